"""Three real KafkaServers in one trio process over the broker tests' local quorum (real
controller decisions, no Raft, no broker sessions -- so nothing fences a stopped broker and
ISR shrinks here are the leader's own, from IsrManager). Real sockets and clock; ~4 s."""

from __future__ import annotations

import trio

from log.common.errors import ErrorCode
from log.protocol.produce import PRODUCE_REQUEST
from log.records.builder import Record, build_batch
from log.replication.replica_fetcher import LeaderConnection
from log.server.broker import KafkaServer
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from producer.cluster_view import TopicPartition
from quorum import controller
from tests.broker.conftest import LocalQuorum, node_config

TOPIC = "r"
TIMEOUT_S = 10


FAST_FETCH_PROPS = {"replica.fetch.wait.max.ms": 50, "replica.fetch.backoff.ms": 50}


async def _start(
    nursery: trio.Nursery,
    quorum: LocalQuorum,
    tmp_path,
    broker_id: int,
    fetch_props: dict = FAST_FETCH_PROPS,
):
    config = node_config(
        tmp_path / f"b{broker_id}",
        **{
            "node.id": broker_id,
            "process.roles": "broker",
            "listeners": "PLAINTEXT://127.0.0.1:9092",
            "replica.lag.time.max.ms": 1000,
            **fetch_props,
        },
    )
    epochs: dict[int, int] = {}
    server = KafkaServer(
        config,
        LogManager(config.log_dir, default_log_config(config)),
        quorum,
        quorum,
        broker_epoch_getter=lambda: epochs.get(broker_id, -1),
        listen_port=0,
    )
    scope = trio.CancelScope()

    async def run(task_status=trio.TASK_STATUS_IGNORED):
        with scope:
            await server.run(task_status=task_status)

    port = await nursery.start(run)
    quorum.register(broker_id, "127.0.0.1", port)
    epochs[broker_id] = quorum.broker_epoch
    return server, port, scope


async def _produce(port: int, acks: int, value: bytes = b"v") -> int:
    P = PRODUCE_REQUEST.cls  # noqa: N806
    body = P(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    P.PartitionProduceData(index=0, records=build_batch([Record(value)]))
                ],
            )
        ],
    )
    connection = LeaderConnection("127.0.0.1", port, "test")
    try:
        with trio.fail_after(TIMEOUT_S):
            response = await connection.request(0, 8, body)
    finally:
        await connection.aclose()
    return response.responses[0].partition_responses[0].error_code


def _partition(quorum: LocalQuorum):
    return quorum.image.topic(TOPIC).partitions[0]


async def _wait(predicate) -> None:
    with trio.fail_after(TIMEOUT_S):
        while not predicate():
            await trio.sleep(0.02)


async def _replicated_topic(quorum, brokers, min_insync_replicas: int):
    """Create TOPIC (1 partition, RF 3) and wait until both followers fetch and are in the ISR
    (a slow start may shrink and re-expand it first); the leader's id, server, port and the
    followers."""
    response = await quorum.create_topics(
        controller.CreateTopicsRequest(
            (
                controller.CreatableTopic(
                    TOPIC, 1, 3, {"min.insync.replicas": str(min_insync_replicas)}
                ),
            )
        )
    )
    assert response.results[0].error_code == 0
    state = _partition(quorum)
    leader = state.leader
    followers = [b for b in state.replicas if b != leader]
    leader_server, leader_port, _ = brokers[leader]
    leader_server.ctx.replica_manager.sync()
    hosted = leader_server.replica_manager.get(TOPIC, 0)
    await _wait(
        lambda: (
            hosted.state.isr == {1, 2, 3}
            and all(hosted.state.followers[b].last_fetch_time_ms > 0 for b in followers)
        )
    )
    return leader, leader_server, leader_port, followers


async def test_followers_fetch_hw_follows_isr_and_leader_shrinks_it(nursery, tmp_path):
    quorum = LocalQuorum()
    brokers = {i: await _start(nursery, quorum, tmp_path, i) for i in (1, 2, 3)}
    leader, leader_server, leader_port, followers = await _replicated_topic(
        quorum, brokers, min_insync_replicas=2
    )

    # acks=all is answered once both followers fetched: their logs hold the batch then.
    assert await _produce(leader_port, -1) == ErrorCode.NONE
    for b in (leader, *followers):
        log = brokers[b][0].log_manager.get_log(TOPIC, 0)
        assert log.log_end_offset == 1, b
    assert leader_server.log_manager.get_log(TOPIC, 0).high_watermark == 1
    # Followers adopt the HW with their next fetch.
    await _wait(
        lambda: all(
            brokers[b][0].log_manager.get_log(TOPIC, 0).high_watermark == 1 for b in followers
        )
    )

    # A follower stops fetching; once it lags (new data) for replica.lag.time.max.ms the leader
    # shrinks the ISR (a caught-up idle follower stays in, as in Kafka) and the HW moves on.
    log = leader_server.log_manager.get_log(TOPIC, 0)
    brokers[followers[0]][2].cancel()
    assert await _produce(leader_port, 1) == ErrorCode.NONE
    await _wait(lambda: set(_partition(quorum).isr) == {leader, followers[1]})
    await _wait(lambda: log.high_watermark == 2)
    assert await _produce(leader_port, -1) == ErrorCode.NONE

    # The second one too: ISR [leader] < min.insync.replicas -> NOT_ENOUGH_REPLICAS.
    brokers[followers[1]][2].cancel()
    assert await _produce(leader_port, 1) == ErrorCode.NONE
    await _wait(lambda: set(_partition(quorum).isr) == {leader})
    assert await _produce(leader_port, -1) == ErrorCode.NOT_ENOUGH_REPLICAS
    # KIP-966: under min.insync.replicas the leader does not advance its HW, so the acks=1
    # record only it holds stays uncommitted (no ELR election can take a committed one back).
    assert (log.high_watermark, log.log_end_offset) == (3, 4)

    # A follower returns (same log dir): it catches up and the leader expands the ISR.
    brokers[followers[0]] = await _start(nursery, quorum, tmp_path, followers[0])
    await _wait(lambda: set(_partition(quorum).isr) == {leader, followers[0]})
    assert brokers[followers[0]][0].log_manager.get_log(TOPIC, 0).log_end_offset >= 4
    await _wait(lambda: log.high_watermark == 4)  # at min.insync.replicas again: committed
    assert await _produce(leader_port, -1) == ErrorCode.NONE
    for _, _, scope in brokers.values():
        scope.cancel()


# Long enough that any step of an acks=all produce waiting for a fetcher timer shows.
SLOW_TIMER_MS = 5000
SEQUENTIAL_PRODUCE_COUNT = 10


async def test_acks_all_latency_waits_for_no_timer(nursery, tmp_path):
    """An acks=all produce is answered by events alone: the append wakes the followers' long
    polls, each follower fetches again as soon as it appended, and that fetch moves the HW and
    answers the produce. With replica.fetch.wait.max.ms and replica.fetch.backoff.ms at 5 s,
    a missing wake-up (a long poll the append does not end, a follower backing off or waiting
    after its append, a HW moved only by a timer) costs >= 5 s per produce; 10 in a row must
    take well under one such timer in all."""
    quorum = LocalQuorum()
    slow = {"replica.fetch.wait.max.ms": SLOW_TIMER_MS, "replica.fetch.backoff.ms": SLOW_TIMER_MS}
    brokers = {i: await _start(nursery, quorum, tmp_path, i, slow) for i in (1, 2, 3)}
    _, leader_server, leader_port, followers = await _replicated_topic(
        quorum, brokers, min_insync_replicas=3
    )
    for _ in range(SEQUENTIAL_PRODUCE_COUNT):
        # a missed wake-up makes one produce wait a whole timer: tell the two apart, with room
        # for a loaded machine (each takes milliseconds)
        started = trio.current_time()
        assert await _produce(leader_port, -1) == ErrorCode.NONE
        elapsed_ms = (trio.current_time() - started) * 1000
        assert elapsed_ms < SLOW_TIMER_MS * 0.8, elapsed_ms
    log = leader_server.log_manager.get_log(TOPIC, 0)
    assert log.high_watermark == log.log_end_offset == SEQUENTIAL_PRODUCE_COUNT
    for b in followers:  # min.insync.replicas 3: every follower holds every record
        assert brokers[b][0].log_manager.get_log(TOPIC, 0).log_end_offset >= log.high_watermark
    for _, _, scope in brokers.values():
        scope.cancel()


async def test_not_leader_answer_names_the_leader_kip_951(nursery, tmp_path):
    """Produce v10 sent to a follower is answered NOT_LEADER_OR_FOLLOWER with the partition's
    current leader and leader epoch, and where that leader listens (KIP-951), so a client goes
    there without a metadata request; v8 has no such fields and says nothing more."""
    quorum = LocalQuorum()
    brokers = {i: await _start(nursery, quorum, tmp_path, i) for i in (1, 2, 3)}
    leader, _, leader_port, followers = await _replicated_topic(
        quorum, brokers, min_insync_replicas=2
    )
    P = PRODUCE_REQUEST.cls  # noqa: N806
    body = P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=build_batch([Record(b"v")]))],
    )])  # fmt: skip
    connection = LeaderConnection("127.0.0.1", brokers[followers[0]][1], "test")
    try:
        with trio.fail_after(TIMEOUT_S):
            v10 = await connection.request(0, 10, body)
            v8 = await connection.request(0, 8, body)
    finally:
        await connection.aclose()
    answer = v10.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (
        leader,
        _partition(quorum).leader_epoch,
    )
    assert [(e.node_id, e.host, e.port) for e in v10.node_endpoints] == [
        (leader, "127.0.0.1", leader_port)
    ]
    answer = v8.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert answer.current_leader.leader_id == -1 and v8.node_endpoints == []
    for _, _, scope in brokers.values():
        scope.cancel()


async def test_our_producer_follows_the_leader_hint_without_a_metadata_refresh(nursery, tmp_path):
    """Leadership moves off a broker that stays up (its controlled shutdown): our producer's
    next batch there is answered NOT_LEADER_OR_FOLLOWER with the new leader (Produce v10,
    KIP-951), and is acknowledged by that leader with no metadata request in between."""
    from producer.producer import Producer

    quorum = LocalQuorum()
    brokers = {i: await _start(nursery, quorum, tmp_path, i) for i in (1, 2, 3)}
    leader, _, _, _ = await _replicated_topic(quorum, brokers, min_insync_replicas=2)
    bootstrap = ",".join(f"127.0.0.1:{port}" for _, port, _ in brokers.values())
    async with Producer(bootstrap, acks="all", metadata_max_age_ms=600_000) as producer:
        await producer.send(TOPIC, b"before", partition=0)
        with trio.fail_after(TIMEOUT_S):
            await producer.flush()
        metadata = producer.sender.metadata
        assert metadata.leader_for(TopicPartition(TOPIC, 0)) == leader
        refreshes = metadata.update_version
        records, _ = controller.controlled_shutdown(
            quorum.image,
            controller.ControlledShutdownRequest(leader, quorum.image.brokers[leader].broker_epoch),
        )
        quorum.commit(records)
        new_leader = _partition(quorum).leader
        assert new_leader not in (leader, -1)
        handle = await producer.send(TOPIC, b"after", partition=0)
        with trio.fail_after(TIMEOUT_S):
            await producer.flush()
        assert handle.error is None, handle.error
        assert metadata.leader_for(TopicPartition(TOPIC, 0)) == new_leader
        assert metadata.update_version == refreshes  # the hint, not a refresh, moved it
    log = brokers[new_leader][0].log_manager.get_log(TOPIC, 0)
    assert log.log_end_offset == 2
    for _, _, scope in brokers.values():
        scope.cancel()


async def test_followers_fetch_with_their_broker_epoch_and_learn_divergence_from_fetch(
    nursery, tmp_path
):
    """Fetch v15+ (KIP-903): followers send their broker epoch, the leader keeps it as the
    epoch their fetch state was learned from (an AlterPartition carries it), and a fetch from
    an older incarnation than the registration the leader knows is refused. Fetch v12+: a
    follower whose last fetched epoch the leader's log does not hold is told where to
    truncate, in the fetch answer itself."""
    from log.protocol.fetch import FETCH_REQUEST

    quorum = LocalQuorum()
    brokers = {i: await _start(nursery, quorum, tmp_path, i) for i in (1, 2, 3)}
    leader, leader_server, leader_port, followers = await _replicated_topic(
        quorum, brokers, min_insync_replicas=2
    )
    assert await _produce(leader_port, -1) == ErrorCode.NONE
    hosted = leader_server.replica_manager.get(TOPIC, 0)
    registered = {b: quorum.image.brokers[b].broker_epoch for b in followers}
    assert {b: hosted.state.followers[b].broker_epoch for b in followers} == registered

    F = FETCH_REQUEST.cls  # noqa: N806
    topic_id = quorum.image.topic_ids_by_name[TOPIC]
    follower = followers[0]

    def replica_fetch(replica_epoch: int, fetch_offset: int, last_fetched_epoch: int):
        return F(
            replica_state=F.ReplicaState(replica_id=follower, replica_epoch=replica_epoch),
            max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            topics=[F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(
                partition=0, fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                partition_max_bytes=1 << 20)])],
        )  # fmt: skip

    connection = LeaderConnection("127.0.0.1", leader_port, "test")
    try:
        stale = await connection.request(1, 17, replica_fetch(registered[follower] - 1, 1, 0))
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH and stale.responses == []
        # A follower holding epoch-0 records past the leader's log end (an old leader's
        # unreplicated tail): the leader's epoch 0 ends at 1, so it truncates there first.
        diverged = await connection.request(1, 17, replica_fetch(registered[follower], 5, 0))
        partition = diverged.responses[0].partitions[0]
        assert partition.error_code == ErrorCode.NONE and not partition.records
        assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (0, 1)
    finally:
        await connection.aclose()
    for _, _, scope in brokers.values():
        scope.cancel()
