"""Fail-over on `quorumlog up` defaults: kill -9 of a partition leader to the next `acks=all` ack.

A 3-node cluster with the settings `quorumlog up` writes (broker.session.timeout.ms 9000,
broker.disconnect.fence.ms 100, nothing from the test harness), one topic of one partition,
RF 3, min.insync.replicas 2, and two producers at ~1,000 records/s each: confluent-kafka with
its defaults except `acks=all` (idempotent), and ours (quorumlog's SyncProducer, its defaults:
acks=all, idempotent). Each round kills the partition leader with SIGKILL and times, from the
kill:

* `elected`: a surviving controller's committed metadata names a new leader (the controller
  saw the dead broker's heartbeat connection close, waited broker.disconnect.fence.ms for a
  reconnect, fenced it and elected the first live ISR member, all in one metadata batch);
  followed with a MetadataFetch long-poll, so this is when the commit was visible;
* `first ack`, per client: the first acknowledgement of a record produced after the kill (the
  producer learned the new leader from a metadata refresh, the new leader appended, the
  follower fetched, the high watermark passed the record). librdkafka asks for metadata at
  the disconnect, ~100 ms before the fence: a survivor holds that answer until the new leader
  is elected (its fetchers lost the leader too), and lists the dead broker in it, once per
  connection (log/server/broker_failure_view.py). Before that (traced with
  debug=metadata,topic,broker), confluent-kafka's first ack took 1.7-2.0 s: the answer named
  the old leader, librdkafka asked again on its 1 s topic scan, and that answer, which also
  dropped the fenced broker, lost the partition's move to librdkafka's internal broker
  until the next scan.
The dead node is restarted and the round waits until the ISR is whole again. A leader that is
also the active controller adds a Raft election (pysyncobj, 300-600 ms timeouts) and the new
controller's wait for the brokers to heartbeat to it; those rounds are shown apart, with the
step between: `new controller active`, when another node's controller activation was
committed (the Raft election and the activation record), after which the new controller
fences the dead broker (its disconnect grace ran from the loss of its Raft connection, so at
once).

`--victim controller` kills the active controller's node each round instead, whether or not it
leads the partition: as a follower it still stalls `acks=all` until the new controller fences it
out of the ISR (that commit is the `elected` step then). Its rows are the controller's whole
fail-over, every round.

    python -m bench.failover [--kills 10] [--victim leader|controller] [--keep DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import trio

from bench.rows import emit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "node"))

from cluster_harness import Cluster  # noqa: E402

from bench.defaults_cluster import defaults_cluster  # noqa: E402
from quorum.state_machine import MetadataStateMachine  # noqa: E402

TOPIC = "failover"
RATE_PER_S = 1000


class PacedProducer:
    """confluent-kafka, defaults but acks=all; remembers when each record was produced and
    acknowledged."""

    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.acks: list[tuple[float, float]] = []  # (produced_at, acked_at)
        self.errors: list = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                      "enable.idempotence": True})  # fmt: skip

        def on_delivery(err, _message, produced_at):
            if err is None:
                self.acks.append((produced_at, time.monotonic()))
            else:
                self.errors.append(err)

        while not self.stop.is_set():
            produced_at = time.monotonic()
            p.produce(TOPIC, b"y" * 100,
                      on_delivery=lambda e, m, t=produced_at: on_delivery(e, m, t))  # fmt: skip
            p.poll(0)
            time.sleep(1 / RATE_PER_S)
        p.flush(60)

    def first_ack_after(self, t: float) -> float | None:
        later = [acked for produced, acked in list(self.acks) if produced > t]
        return min(later) if later else None


class OurPacedProducer(PacedProducer):
    """quorumlog's SyncProducer with its defaults (acks=all, idempotent), the same pace."""

    name = "quorumlog"

    def _run(self) -> None:
        from producer.sync_producer import SyncProducer

        def on_done(future, produced_at) -> None:
            error = future.exception()
            if error is None:
                self.acks.append((produced_at, time.monotonic()))
            else:
                self.errors.append(error)

        with SyncProducer(self.bootstrap) as p:
            while not self.stop.is_set():
                produced_at = time.monotonic()
                future = p.send(TOPIC, b"y" * 100)
                future.add_done_callback(lambda f, t=produced_at: on_done(f, t))
                time.sleep(1 / RATE_PER_S)
            p.flush(60)


async def wait_for_new_leader(
    cluster: Cluster, survivors: list[int], victim: int, steps: dict[str, Any]
) -> None:
    """Follow a surviving controller's committed metadata; note in `steps` when another node's
    controller activation followed one of `victim`'s (`took_over`, a list: replaying the log
    from its start passes earlier ones, stamped before the kill) and when the partition's
    leader and ISR without `victim` are committed (`elected`: a new leader when it led)."""
    client = cluster.client(survivors)
    machine = MetadataStateMachine()
    took_over = steps.setdefault("took_over", [])
    try:
        while True:
            r = await client.metadata_fetch(-1, machine.last_applied_offset, 500)
            if r.checkpoint is not None and r.checkpoint_offset > machine.last_applied_offset:
                machine = MetadataStateMachine.from_checkpoint(bytes(r.checkpoint))
            for batch in r.batches:
                before = machine.image.controller_id
                machine.apply(batch.offset, bytes(batch.payload))
                if before == victim and machine.image.controller_id not in (victim, -1):
                    took_over.append(time.monotonic())
            topic = machine.image.topic(TOPIC)
            state = topic.partitions[0] if topic is not None else None
            if state is not None and state.leader not in (victim, -1) and victim not in state.isr:
                steps["elected"] = time.monotonic()
                return
    finally:
        await client.aclose()


async def partition_and_controller(cluster: Cluster, node_ids: list[int]):
    for node_id in node_ids:
        try:
            with trio.fail_after(10):
                image = await cluster.image_from(node_id)
        except (trio.TooSlowError, OSError, Exception):  # noqa: BLE001 - try the next node
            continue
        return image.topic(TOPIC).partitions[0], image.controller_id
    raise RuntimeError("no controller answered")


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(30)


async def run(workdir: Path, kills: int, kill_controller: bool = False) -> list[dict]:
    cluster = defaults_cluster(workdir, 3)
    await trio.to_thread.run_sync(cluster.start_all)
    rounds = []
    loads: list[PacedProducer] = []
    try:
        await trio.to_thread.run_sync(create_topic, cluster.layout.bootstrap_servers)
        loads = [PacedProducer(cluster.layout.bootstrap_servers),
                 OurPacedProducer(cluster.layout.bootstrap_servers)]  # fmt: skip
        for load in loads:
            load.thread.start()
        nodes = list(cluster.layout.node_ids)
        for _ in range(kills):
            await trio.sleep(2)
            state, controller = await partition_and_controller(cluster, nodes)
            victim = controller if kill_controller else state.leader
            survivors = [n for n in nodes if n != victim]
            async with trio.open_nursery() as nursery:
                steps: dict[str, Any] = {}
                nursery.start_soon(wait_for_new_leader, cluster, survivors, victim, steps)
                await trio.sleep(0.3)  # the watcher is long-polling
                killed_at = time.monotonic()
                cluster.kill9(victim)
                acked_at: dict[str, float] = {}
                with trio.fail_after(60):
                    while len(acked_at) < len(loads):
                        for load in loads:
                            if load.name not in acked_at:
                                at = load.first_ack_after(killed_at)
                                if at is not None:
                                    acked_at[load.name] = at
                        await trio.sleep(0.005)
            row = {
                "victim_was_controller": victim == controller,
                "victim_led": victim == state.leader,
                "elected_s": steps["elected"] - killed_at,
                "first_ack_s": {name: at - killed_at for name, at in acked_at.items()},
            }
            if row["victim_was_controller"]:
                after = [t for t in steps["took_over"] if t > killed_at] or [steps["elected"]]
                row["controller_s"] = after[0] - killed_at
            rounds.append(row)
            acks = ", ".join(f"{name} {s * 1000:.0f} ms" for name, s in row["first_ack_s"].items())
            took_over = (f"new controller active {row['controller_s'] * 1000:.0f} ms; "
                         if row["victim_was_controller"] else "")  # fmt: skip
            role = "leader" if row["victim_led"] else "follower"
            also = " (also the active controller)" if row["victim_was_controller"] else ""
            step = "new leader" if row["victim_led"] else "ISR without it"
            print(f"  kill {len(rounds)}: {role} {victim}{also}: {took_over}{step} committed "
                  f"{row['elected_s'] * 1000:.0f} ms; first ack: {acks}", flush=True)  # fmt: skip
            cluster.start(victim)
            await trio.to_thread.run_sync(cluster.wait_ready, victim)
            with trio.fail_after(60):
                while len((await partition_and_controller(cluster, nodes))[0].isr) < 3:
                    await trio.sleep(0.2)
    finally:
        for load in loads:
            load.stop.set()
        for load in loads:
            await trio.to_thread.run_sync(load.thread.join, 60)
        cluster.stop_all()
    for load in loads:
        if load.errors:
            raise RuntimeError(f"{load.name}: {len(load.errors)} deliveries failed, "
                               f"e.g. {load.errors[0]}")  # fmt: skip
    return rounds


def summary(rounds: list[dict]) -> list[dict]:
    rows = []
    clients = list(rounds[0]["first_ack_s"]) if rounds else []
    led = [r for r in rounds if r.get("victim_led", True)]
    for case, subset in (
        ("leader only", [r for r in led if not r["victim_was_controller"]]),
        ("leader and active controller", [r for r in led if r["victim_was_controller"]]),
        ("active controller, a follower", [r for r in rounds if r not in led]),
        ("all kills", rounds),
    ):
        if not subset:
            continue
        elected = [r["elected_s"] for r in subset]
        row = {"case": case, "kills": len(subset),
               "elected_median_s": statistics.median(elected), "elected_max_s": max(elected),
               "first_ack_s": {}}  # fmt: skip
        took_over = [r["controller_s"] for r in subset if "controller_s" in r]
        if len(took_over) == len(subset):
            row["controller_median_s"] = statistics.median(took_over)
            row["controller_max_s"] = max(took_over)
        for client in clients:
            acked = [r["first_ack_s"][client] for r in subset]
            row["first_ack_s"][client] = [statistics.median(acked), max(acked)]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--victim", choices=("leader", "controller"), default="leader",
                        help="kill the partition leader (default) or the active controller")  # fmt: skip
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep the node logs")
    args = parser.parse_args()
    kill_controller = args.victim == "controller"
    print(f"kill -9 of the {'active controller' if kill_controller else 'partition leader'}, 3 nodes on `quorumlog up` defaults "
          "(broker.session.timeout.ms 9000, broker.disconnect.fence.ms 100); producers at "
          "~1,000 records/s each: confluent-kafka (defaults but acks=all) and ours (defaults)",
          flush=True)  # fmt: skip
    if args.keep:
        rounds = trio.run(run, Path(args.keep), args.kills, kill_controller)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
            rounds = trio.run(run, Path(tmp), args.kills, kill_controller)
    rows = summary(rounds)
    for row in rows:
        row["killed"] = args.victim
    clients = list(rows[0]["first_ack_s"]) if rows else []
    print("| case | kills | new controller active median / max (ms) | new leader (or ISR "
          "without the follower) committed median / max (ms) | "
          + " | ".join(f"first ack, {c}: median / max (ms)" for c in clients)
          + " |\n|---|---|---|---|" + "---|" * len(clients))  # fmt: skip
    for row in rows:
        acks = " | ".join(
            f"{m * 1000:.0f} / {x * 1000:.0f}" for m, x in row["first_ack_s"].values()
        )
        took_over = (f"{row['controller_median_s'] * 1000:.0f} / "
                     f"{row['controller_max_s'] * 1000:.0f}"
                     if "controller_median_s" in row else "-")  # fmt: skip
        print(f"| {row['case']} | {row['kills']} | {took_over} | "
              f"{row['elected_median_s'] * 1000:.0f} / {row['elected_max_s'] * 1000:.0f} | "
              f"{acks} |")  # fmt: skip
    emit("failover", rows)


if __name__ == "__main__":
    main()
