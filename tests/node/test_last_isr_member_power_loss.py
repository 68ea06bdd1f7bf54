"""Issue 14 with real processes: the last ISR member loses its unflushed tail and restarts.

Three combined nodes, a topic with RF 3 and min.insync.replicas 2, leader L, followers B and C.
Acknowledged (acks=all) records are on L and B when B leaves the ISR by a clean shutdown (the
ISR is then below min.insync.replicas, so B becomes an eligible leader replica). Then L "loses
power": kill -9 and its segment files cut back to before those records, no clean-shutdown
marker. Restarted, L registers uncleanly and must not lead while B is eligible; once B is back,
B leads and no acknowledged record is lost. (Before KIP-966, L led again and B truncated to it.)

To keep the metadata quorum (3 controllers) while two brokers are away, a stopped node runs
again as a controller only (`process.roles = "controller"`): its broker stays fenced.
"""

from __future__ import annotations

import time

import pytest
import trio
from cluster_harness import Cluster, wait_until

from log.common.node_config import NODE_CONFIG_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "payments"
NOT_LEADER_FOR_S = 4  # how long the restarted former last ISR member is watched not leading


def _set_roles(cluster: Cluster, node_id: int, roles: str) -> None:
    path = cluster.layout.node_dir(node_id) / NODE_CONFIG_FILE
    lines = path.read_text().splitlines()
    lines = [
        f'"process.roles" = "{roles}"' if ln.startswith('"process.roles"') else ln for ln in lines
    ]
    path.write_text("\n".join(lines) + "\n")


def _produce(bootstrap: str, values: list[bytes], acks: str = "all") -> list[bytes]:
    """The values whose delivery was acknowledged."""
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": 10_000}
    )
    acked: list[bytes] = []

    def report(error, message) -> None:  # noqa: ANN001
        if error is None:
            acked.append(message.value())

    for value in values:
        producer.produce(TOPIC, value=value, partition=0, on_delivery=report)
    producer.flush(30)
    return acked


def _consume_all(bootstrap: str, expected: int) -> list[bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def _segment_sizes(cluster: Cluster, node_id: int) -> dict:
    partition_dir = cluster.config(node_id).log_dir / f"{TOPIC}-0"
    return {p: p.stat().st_size for p in partition_dir.glob("*.log")}


def _lose_unflushed_tail(cluster: Cluster, node_id: int, sizes: dict) -> None:
    """What a power failure leaves: segments cut back to `sizes` (newer ones gone), indexes of
    what was cut gone (recovery rebuilds them), no clean-shutdown marker."""
    config = cluster.config(node_id)
    partition_dir = config.log_dir / f"{TOPIC}-0"
    assert not (config.log_dir / ".kafka_cleanshutdown").exists()
    for segment in partition_dir.glob("*.log"):
        if segment not in sizes:
            segment.unlink()
        elif segment.stat().st_size > sizes[segment]:
            with open(segment, "r+b") as f:
                f.truncate(sizes[segment])
        for suffix in (".index", ".timeindex"):
            segment.with_suffix(suffix).unlink(missing_ok=True)


async def _partition(cluster: Cluster, reader: int):
    image = await cluster.image_from(reader)
    topic = image.topic(TOPIC)
    return None if topic is None else topic.partitions[0]


async def test_last_isr_member_losing_its_tail_does_not_lead_and_no_acked_record_is_lost(
    tmp_path,
):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(tmp_path, 3)
    try:
        cluster.start_all()
        bootstrap = cluster.layout.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
        await trio.to_thread.run_sync(lambda: admin.create_topics([topic])[TOPIC].result(30))
        state = await wait_until(lambda: _partition(cluster, 1), 10)
        leader = state.leader
        b, c = [n for n in state.replicas if n != leader]

        first = [b"first-%d" % i for i in range(50)]
        acked = await trio.to_thread.run_sync(_produce, bootstrap, first)
        assert sorted(acked) == sorted(first)
        flushed_sizes = _segment_sizes(cluster, leader)

        # C away: its broker fenced, its controller back so that the quorum keeps 3 members.
        cluster.kill9(c)
        _set_roles(cluster, c, "controller")
        cluster.start(c)

        async def isr_is(isr):
            s = await _partition(cluster, leader)
            return s if s is not None and set(s.isr) == set(isr) else None

        await wait_until(lambda: isr_is({leader, b}), 20)
        second = [b"second-%d" % i for i in range(50)]
        acked_second = await trio.to_thread.run_sync(_produce, bootstrap, second)
        assert sorted(acked_second) == sorted(second)  # on L and B only
        acked += acked_second

        # B shuts down cleanly: the ISR drops below min.insync.replicas, B stays eligible.
        assert cluster.terminate(b) == 0
        _set_roles(cluster, b, "controller")
        cluster.start(b)
        await wait_until(lambda: isr_is({leader}), 20)
        refused = await trio.to_thread.run_sync(_produce, bootstrap, [b"refused"])
        assert refused == []  # NOT_ENOUGH_REPLICAS: nothing more is acknowledged

        # The last ISR member loses power, losing the second batch of acknowledged records.
        cluster.kill9(leader)
        _lose_unflushed_tail(cluster, leader, flushed_sizes)
        cluster.start(leader)
        await trio.to_thread.run_sync(cluster.wait_ready, leader)
        deadline = trio.current_time() + NOT_LEADER_FOR_S
        while trio.current_time() < deadline:
            state = await _partition(cluster, b)
            assert state.leader == -1, f"node {leader} restarted uncleanly and leads: {state}"
            await trio.sleep(0.2)
        assert state.elr == (b,) and state.isr == (), state  # B is eligible, L is not

        # B returns (clean shutdown, so still eligible): it leads, nothing acknowledged is lost.
        _set_roles(cluster, b, "broker,controller")
        cluster.terminate(b)
        cluster.start(b)
        await trio.to_thread.run_sync(cluster.wait_ready, b)

        async def led_by_b():
            s = await _partition(cluster, b)
            return s if s is not None and s.leader == b else None

        await wait_until(led_by_b, 20)
        values = await trio.to_thread.run_sync(_consume_all, bootstrap, len(acked))
        assert set(acked) <= set(values), sorted(set(acked) - set(values))[:5]
    finally:
        cluster.stop_all()
