"""Restart times: a node with a large metadata log, and a node with a large partition log.

1. Metadata: a one-node cluster on `quorumlog up` defaults whose metadata log holds
   `--metadata-records` records (default 1,000,000): topics of 1,000 partitions RF 3, each
   created on three brokers of its own that register and are then fenced (they never run: one
   PartitionChangeRecord per partition), all decided by the controller's own code
   (quorum/controller.py) and committed through the node's own RaftNode into its data
   directory. A checkpoint is taken after all but `--tail-records` of them; the rest stay in
   the journal for the restart to replay. Then the real node starts on that directory:
   seconds to READY (registered and caught up), after a clean stop and after kill -9, per
   tail length.
2. Partition log: a one-node cluster, one partition, `--log-gb` GB written by confluent-kafka
   (acks=1, 100 KiB values, 1 MiB batches). Restart after a clean stop (SIGTERM: flush and
   `.kafka_cleanshutdown`); then, per `--unflushed-mb`, that many MB more and kill -9: the
   restart recovers (re-reads and CRC-checks) what lies after the recovery point on disk (the
   clean stop's, or a later one: a segment roll flushes and moves it), never the whole log.
   Seconds to READY and the node's own "log recovery done" time.

    python -m bench.restart [--metadata-records 1000000] [--tail-records 0 100000 1000000]
                            [--log-gb 10] [--unflushed-mb 100 1000]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
import uuid
from pathlib import Path

import trio

from bench.defaults_cluster import defaults_cluster
from bench.rows import emit
from tools.confluent_produce import produce_waiting

PARTITIONS_PER_TOPIC = 1000
FIRST_FAKE_BROKER = 1000  # brokers that never run: three per topic
RECORDS_PER_BATCH = 5000  # one Raft entry each, well under max_batch_bytes
TOPIC = "restart"
VALUE_BYTES = 100 * 1024


# -- 1. metadata ------------------------------------------------------------------------------


async def _populate_metadata(config, total_records: int, tail_records: int) -> int:
    """Commit ~`total_records` metadata records through the node's RaftNode (the node is not
    running); a checkpoint after all but the last `tail_records`. The records committed."""
    from quorum import controller
    from quorum.raft import RaftNode
    from quorum.records import BrokerEndpoint, encode_batch
    from quorum.service import raft_config_for
    from quorum.state_machine import MetadataStateMachine

    async with RaftNode(
        raft_config_for(config), state_machine_factory=MetadataStateMachine
    ) as raft:
        with trio.fail_after(30):
            while not (raft.is_leader and raft.has_quorum):
                await trio.sleep(0.05)
        proposals = iter(range(1, 1 << 40))
        committed = 0
        checkpointed = False

        async def commit(records: list) -> None:
            nonlocal committed, checkpointed
            for i in range(0, len(records), RECORDS_PER_BATCH):
                chunk = records[i : i + RECORDS_PER_BATCH]
                with trio.fail_after(60):
                    result = await raft.propose(encode_batch(chunk, 1, next(proposals)))
                assert getattr(result.result, "accepted", True), result.result
                committed += len(chunk)
            if not checkpointed and committed >= total_records - tail_records:
                checkpointed = True
                before = raft.latest_checkpoint()
                raft.force_checkpoint()
                with trio.fail_after(120):
                    while raft.latest_checkpoint() is before:
                        await trio.sleep(0.05)

        def image():
            return raft.state_machine.image

        await commit(controller.activate_controller(config.node_id, 1))
        # Each partition costs two records: its PartitionRecord, and the change that fences it.
        # Every topic gets three brokers of its own, fenced right after it is created, so one
        # fence decision touches one topic's partitions (a batch of ~1,000 changes).
        topics = max(1, (total_records // 2) // PARTITIONS_PER_TOPIC)
        for n in range(topics):
            brokers = [FIRST_FAKE_BROKER + 3 * n + i for i in range(3)]
            for broker_id in brokers:
                request = controller.BrokerRegistrationRequest(
                    broker_id, uuid.uuid4(), (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 1),)
                )
                records, response = controller.register_broker(image(), request)
                await commit(records)
                heartbeat = controller.BrokerHeartbeatRequest(
                    broker_id, response.broker_epoch, image().last_offset
                )
                await commit(controller.heartbeat(image(), heartbeat)[0])
            request = controller.CreateTopicsRequest(
                (controller.CreatableTopic(f"t{n}", PARTITIONS_PER_TOPIC, 3),)
            )
            records, response = controller.create_topics(
                image(), request, start_index=n, topic_ids=[uuid.uuid4()]
            )
            assert response.results[0].error_code == 0, response
            await commit(records)
            records, _ = controller.fence_expired_brokers(
                image(), dict.fromkeys(brokers, 0), 1 << 40, 1
            )
            await commit(records)
        return committed


def _ready_seconds(cluster, node_id: int = 1) -> float:
    start = time.monotonic()
    cluster.start(node_id)
    cluster.wait_ready(node_id, timeout_s=1800)
    return time.monotonic() - start


def metadata_rows(args: argparse.Namespace, workdir: Path) -> list[dict]:
    rows = []
    for tail in args.tail_records:
        cluster = defaults_cluster(workdir / f"meta-{tail}", 1)
        started = time.monotonic()
        committed = trio.run(_populate_metadata, cluster.config(1), args.metadata_records, tail)
        build_s = time.monotonic() - started
        try:
            first = _ready_seconds(cluster)  # the populating process stopped cleanly
            cluster.kill9(1)
            after_kill = _ready_seconds(cluster)
            cluster.terminate(1)
            after_clean = _ready_seconds(cluster)
        finally:
            cluster.stop_all()
        rows.append({"part": "metadata", "records": committed, "tail_records": tail,
                     "build_s": build_s, "first_start_s": first,
                     "after_kill9_s": after_kill, "after_clean_stop_s": after_clean})  # fmt: skip
        print(f"metadata {committed:,} records, tail {tail:,}: first start {first:.1f} s, "
              f"after kill -9 {after_kill:.1f} s, after clean stop {after_clean:.1f} s "
              f"(built in {build_s:.0f} s)", flush=True)  # fmt: skip
    return rows


# -- 2. partition log ---------------------------------------------------------------------------


def _produce_bytes(bootstrap: str, total_bytes: int) -> float:
    """Write `total_bytes` of 100 KiB values to TOPIC partition 0; seconds it took."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1 << 20, "message.max.bytes": 1 << 21,
                         "queue.buffering.max.kbytes": 1 << 20})  # fmt: skip
    value = b"x" * VALUE_BYTES
    start = time.monotonic()
    for _ in range(max(1, total_bytes // VALUE_BYTES)):
        produce_waiting(producer, TOPIC, value, poll_s=0.01, partition=0)
        producer.poll(0)
    assert producer.flush(600) == 0
    return time.monotonic() - start


def _recovery_ms(cluster, node_id: int = 1) -> float:
    found = re.findall(r"log recovery done .* duration_ms=(\d+)", cluster.log(node_id))
    return float(found[-1]) if found else float("nan")


def log_rows(args: argparse.Namespace, workdir: Path) -> list[dict]:
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = defaults_cluster(workdir / "log", 1)
    cluster.start_all()
    rows = []
    try:
        bootstrap = cluster.layout.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
        size = int(args.log_gb * (1 << 30))
        write_s = _produce_bytes(bootstrap, size)
        print(f"wrote {args.log_gb} GB in {write_s:.0f} s", flush=True)
        cluster.terminate(1)
        clean = _ready_seconds(cluster)
        rows.append({"part": "log", "log_gb": args.log_gb, "case": "after clean stop",
                     "unflushed_mb": 0, "ready_s": clean,
                     "recovery_s": _recovery_ms(cluster) / 1000})  # fmt: skip
        for unflushed_mb in args.unflushed_mb:
            _produce_bytes(bootstrap, unflushed_mb << 20)
            cluster.kill9(1)
            ready = _ready_seconds(cluster)
            rows.append({"part": "log", "log_gb": args.log_gb, "case": "after kill -9",
                         "unflushed_mb": unflushed_mb, "ready_s": ready,
                         "recovery_s": _recovery_ms(cluster) / 1000})  # fmt: skip
            # the next case starts from a clean recovery point again
            cluster.terminate(1)
            _ready_seconds(cluster)
        for r in rows:
            print(f"log {r['log_gb']} GB, {r['case']}, {r['unflushed_mb']} MB written since the "
                  f"last clean start: ready in {r['ready_s']:.1f} s (log recovery "
                  f"{r['recovery_s']:.1f} s)", flush=True)  # fmt: skip
    finally:
        cluster.stop_all()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metadata-records", type=int, default=1_000_000)
    parser.add_argument("--tail-records", type=int, nargs="*", default=[0, 100_000, 1_000_000])
    parser.add_argument("--log-gb", type=float, default=10)
    parser.add_argument("--unflushed-mb", type=int, nargs="*", default=[100, 1000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        rows = metadata_rows(args, Path(tmp)) if args.tail_records else []
        if args.log_gb > 0:
            rows += log_rows(args, Path(tmp))
    emit("restart", rows)


if __name__ == "__main__":
    main()
