"""Replication between real `quorumlog node` processes with real clients (confluent-kafka):
RF 3, min.insync.replicas 2."""

from __future__ import annotations

import pytest
import trio
from cluster_harness import wait_until
from replication_harness import (
    TOPIC,
    BackgroundProducer,
    consume_all,
    create_topic,
    image_from_any,
    partition_batches,
    partition_state,
    producer,
    start_cluster,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
N = 300


def _produce(bootstrap: str, count: int, prefix: str = "v") -> tuple[set[bytes], list]:
    acked: set[bytes] = set()
    errors: list = []

    def on_delivery(err, message):
        if err is None:
            acked.add(message.value())
        else:
            errors.append(err)

    p = producer(bootstrap)
    for i in range(count):
        p.produce(TOPIC, b"%s-%d" % (prefix.encode(), i), on_delivery=on_delivery)
        p.poll(0)
    p.flush(60)
    return acked, errors


async def _isr(cluster, partition: int = 0) -> tuple[int, ...]:
    image = await cluster.image_from(0)
    topic = image.topic(TOPIC)
    return topic.partitions[partition].isr if topic is not None else ()


async def test_acks_all_replicates_to_identical_logs(tmp_path):
    cluster = await trio.to_thread.run_sync(start_cluster, tmp_path)
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(create_topic, bootstrap)
    acked, errors = await trio.to_thread.run_sync(_produce, bootstrap, N)
    assert not errors and len(acked) == N
    values = await trio.to_thread.run_sync(consume_all, bootstrap, 1, N)
    assert sorted(values) == sorted(acked)
    # Followers fetched before the acks: every replica holds the data once it is stopped.
    await trio.sleep(1)  # let followers adopt the final HW
    for node_id in list(cluster.processes):
        cluster.terminate(node_id)
    logs = [partition_batches(cluster.layout.node_dir(i)) for i in cluster.layout.node_ids]
    high_watermarks = {hw for hw, _ in logs}
    assert high_watermarks == {N}, high_watermarks
    assert logs[0][1] == logs[1][1] == logs[2][1]


async def _wait_isr(cluster, expected: set[int], partition: int = 0, timeout_s: float = 30) -> None:
    async def isr_is_expected():
        return set((await partition_state(cluster, partition)).isr) == expected

    await wait_until(isr_is_expected, timeout_s, interval_s=0.2)


async def test_kill_leader_under_idempotent_load_loses_and_duplicates_nothing(tmp_path):
    import time

    cluster = await trio.to_thread.run_sync(start_cluster, tmp_path)
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(create_topic, bootstrap)
    load = BackgroundProducer(bootstrap, 4000, rate_per_s=1000)
    load.start()
    await wait_until(lambda: _async(len(load.acked) >= 800), 30)
    leader = (await partition_state(cluster)).leader
    acked_before = len(load.ack_times)
    killed_at = time.monotonic()
    cluster.kill9(leader)

    async def leadership_moved() -> bool:
        state = await partition_state(cluster)
        return state.leader not in (leader, -1) and state.leader_epoch >= 1

    # Acks of requests in flight at the kill may still arrive: wait for the election itself
    # (the controller fences the dead broker after its session timeout), then for new acks.
    await wait_until(leadership_moved, 30, interval_s=0.1)
    await wait_until(lambda: _async(len(load.ack_times) > acked_before + 10), 30)
    failover_s = load.ack_times[acked_before] - killed_at
    cluster.start(leader)
    await trio.to_thread.run_sync(cluster.wait_ready, leader)
    await trio.to_thread.run_sync(load.thread.join, 180)
    assert not load.errors
    assert len(load.acked) == 4000
    await _wait_isr(cluster, {1, 2, 3})
    values = await trio.to_thread.run_sync(consume_all, bootstrap, 1, len(load.acked))
    assert len(values) == len(set(values)), "duplicates"
    assert set(values) >= load.acked, "acknowledged records lost"
    assert set(values) <= {b"v-%d" % i for i in range(4000)}
    await trio.sleep(1)
    for node_id in list(cluster.processes):
        cluster.terminate(node_id)
    logs = [partition_batches(cluster.layout.node_dir(i)) for i in cluster.layout.node_ids]
    common = min(len(batches) for _, batches in logs)
    assert common > 0 and logs[0][1][:common] == logs[1][1][:common] == logs[2][1][:common]
    print(f"fail-over {failover_s * 1000:.0f} ms")
    assert failover_s < 5


async def _async(value):
    return value


async def _produce_raw(cluster, node_id: int, acks: int, partition: int = 0) -> int:
    """One acks=`acks` batch straight to `node_id` over the wire; its error code."""
    from log.protocol.produce import PRODUCE_REQUEST
    from log.records.builder import Record, build_batch
    from log.replication.replica_fetcher import LeaderConnection

    P = PRODUCE_REQUEST.cls  # noqa: N806
    body = P(
        acks=acks,
        timeout_ms=3000,
        topic_data=[
            P.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    P.PartitionProduceData(index=partition, records=build_batch([Record(b"raw")]))
                ],
            )
        ],
    )
    connection = LeaderConnection("127.0.0.1", cluster.layout.kafka_port(node_id), "test")
    try:
        with trio.fail_after(10):
            response = await connection.request(0, 8, body)
    finally:
        await connection.aclose()
    return response.responses[0].partition_responses[0].error_code


async def test_isr_shrinks_and_expands_and_min_isr_refuses(tmp_path):
    """4 nodes (3 controllers + 1 broker), so that 2 of a partition's 3 replicas can die while
    the metadata quorum (which commits ISR changes) stays up."""
    from log.common.errors import ErrorCode

    cluster = await trio.to_thread.run_sync(start_cluster, tmp_path, 4)
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(create_topic, bootstrap, 4)
    acked, errors = await trio.to_thread.run_sync(_produce, bootstrap, 100)
    assert not errors and len(acked) == 100
    image = await image_from_any(cluster)
    partitions = image.topic(TOPIC).partitions
    # A partition led by a controller, with broker 4 and another controller as followers.
    partition = next(p for p, s in sorted(partitions.items()) if s.leader != 4 and 4 in s.replicas)
    state = partitions[partition]
    leader = state.leader
    followers = sorted((b for b in state.replicas if b != leader), key=lambda b: b != 4)
    await _wait_isr(cluster, set(state.replicas), partition)
    # One follower dies: the ISR shrinks, acks=all still works with 2 in sync.
    cluster.kill9(followers[0])
    await _wait_isr(cluster, {leader, followers[1]}, partition)
    assert await _produce_raw(cluster, leader, -1, partition) == ErrorCode.NONE
    # The second one dies too: ISR [leader] < min.insync.replicas 2.
    cluster.kill9(followers[1])
    await _wait_isr(cluster, {leader}, partition)
    assert await _produce_raw(cluster, leader, -1, partition) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert await _produce_raw(cluster, leader, 1, partition) == ErrorCode.NONE  # acks=1 appends
    # Both return: they catch up (the acks=1 record included) and rejoin the ISR.
    for follower in followers:
        cluster.start(follower)
    for follower in followers:
        await trio.to_thread.run_sync(cluster.wait_ready, follower)
    await _wait_isr(cluster, set(state.replicas), partition)
    assert await _produce_raw(cluster, leader, -1, partition) == ErrorCode.NONE
    await trio.sleep(1)
    for node_id in list(cluster.processes):
        cluster.terminate(node_id)
    logs = [partition_batches(cluster.layout.node_dir(i), partition) for i in state.replicas]
    common = min(len(batches) for _, batches in logs)
    assert common >= 2 and logs[0][1][:common] == logs[1][1][:common] == logs[2][1][:common]


async def test_restarted_replica_truncates_its_divergent_tail(tmp_path):
    """The leader appends acks=1 batches no follower fetched (both followers frozen, their
    long-polls already answered), then dies; a follower becomes leader in a new epoch and takes
    acks=all writes; the old leader restarts, truncates the divergent tail by leader epoch and
    ends with the new leader's log."""
    import os
    import signal

    from log.common.errors import ErrorCode

    cluster = await trio.to_thread.run_sync(start_cluster, tmp_path, 4)
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(create_topic, bootstrap, 4)
    image = await image_from_any(cluster)
    partitions = image.topic(TOPIC).partitions
    partition = next(p for p, s in sorted(partitions.items()) if s.leader != 4 and 4 in s.replicas)
    state = partitions[partition]
    leader = state.leader
    followers = [b for b in state.replicas if b != leader]
    await _wait_isr(cluster, set(state.replicas), partition)
    for _ in range(3):
        assert await _produce_raw(cluster, leader, -1, partition) == ErrorCode.NONE
    for follower in followers:
        os.kill(cluster.processes[follower].pid, signal.SIGSTOP)
    await trio.sleep(0.4)  # their pending long-polls (replica.fetch.wait.max.ms 200) end
    for _ in range(2):
        assert await _produce_raw(cluster, leader, 1, partition) == ErrorCode.NONE
    cluster.kill9(leader)
    for follower in followers:
        os.kill(cluster.processes[follower].pid, signal.SIGCONT)

    async def new_leader():
        s = await partition_state(cluster, partition)
        return s if s.leader in followers else None

    new_state = await wait_until(new_leader, 30, interval_s=0.2)
    for _ in range(4):
        assert await _produce_raw(cluster, new_state.leader, -1, partition) == ErrorCode.NONE
    cluster.start(leader)
    await trio.to_thread.run_sync(cluster.wait_ready, leader)
    await _wait_isr(cluster, set(state.replicas), partition)
    assert cluster.log_matches(leader, rf"{TOPIC}-{partition}: truncating 5 -> 3")
    await trio.sleep(1)
    for node_id in list(cluster.processes):
        cluster.terminate(node_id)
    logs = [partition_batches(cluster.layout.node_dir(i), partition) for i in state.replicas]
    assert [len(batches) for _, batches in logs] == [7, 7, 7]
    assert logs[0][1] == logs[1][1] == logs[2][1]


async def test_clean_shutdown_of_the_leader_moves_leadership_first(tmp_path):
    """SIGTERM: controlled shutdown moves the leadership (epoch + 1) before the node exits, so
    an idempotent acks=all producer loses and duplicates nothing."""
    cluster = await trio.to_thread.run_sync(start_cluster, tmp_path)
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(create_topic, bootstrap)
    load = BackgroundProducer(bootstrap, 2000, rate_per_s=1000)
    load.start()
    await wait_until(lambda: _async(len(load.acked) >= 500), 30)
    state = await partition_state(cluster)
    assert await trio.to_thread.run_sync(cluster.terminate, state.leader) == 0
    assert "controlled shutdown: NONE" in cluster.log(state.leader)
    # A surviving controller learns the commit index with the next Raft round (the one that
    # committed may have been the node that just exited): read until the change shows.
    with trio.fail_after(15):
        while (new_state := await partition_state(cluster)).leader == state.leader:
            await trio.sleep(0.1)
    assert new_state.leader != -1 and new_state.leader_epoch > state.leader_epoch
    await trio.to_thread.run_sync(load.thread.join, 120)
    assert not load.errors and len(load.acked) == 2000
    values = await trio.to_thread.run_sync(consume_all, bootstrap, 1, 2000)
    assert len(values) == len(set(values)) and set(values) == load.acked
