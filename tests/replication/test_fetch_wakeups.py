"""Who a partition's signals wake (Kafka's DelayedFetch.tryComplete conditions): an append that
leaves the high watermark where it was wakes only the followers' fetches; a HW moved by a
follower's fetch wakes acks=all appends and consumers' fetches and only marks fetch sessions
dirty. Then, over three in-process brokers whose long polls would wait 60 s, every wait is
answered by a wake-up: acks=all produces one after another, and a consumer's parked fetch."""

from __future__ import annotations

import trio

from log.common.errors import ErrorCode
from log.replication.fetch_session import FetchSession
from log.replication.partition import FetchWaiter, HostedPartition, SessionWatcher
from log.server.handlers import fetch as fetch_handler
from tests.broker.conftest import LocalQuorum, WireClient, fetch_body
from tests.replication.test_replication_in_process import (
    TOPIC,
    _produce,
    _replicated_topic,
    _start,
)

LONG_POLL_PROPS = {"replica.fetch.wait.max.ms": 60_000, "replica.fetch.backoff.ms": 50}


def _hosted() -> HostedPartition:
    # Only the waiting side is exercised: no log or replication state is touched.
    return HostedPartition("t", 0, None, 0, (), (), True, None)  # type: ignore[arg-type]


async def test_signals_wake_only_the_waits_that_can_progress():
    hosted = _hosted()
    consumer, follower = FetchWaiter(for_data=False), FetchWaiter(for_data=True)
    session = FetchSession(1)
    watcher = session.watcher = SessionWatcher(session)
    watcher.event = trio.Event()  # the session's long poll is waiting
    hosted.fetch_waiters |= {consumer, follower}
    hosted.session_watchers.add(watcher)
    acks = hosted.high_watermark_changed

    hosted.signal_appended()  # records appended, HW unmoved
    assert follower.event.is_set() and watcher.event.is_set()
    assert not consumer.event.is_set() and not acks.is_set()
    assert hosted.fetch_waiters == {consumer}  # still waiting
    assert session.dirty == {("t", 0)}

    session.dirty.clear()
    watcher.event = trio.Event()
    follower = FetchWaiter(for_data=True)
    hosted.fetch_waiters.add(follower)
    hosted.signal_high_watermark_moved()  # a follower's fetch moved the HW
    assert consumer.event.is_set() and acks.is_set()
    assert not follower.event.is_set() and not watcher.event.is_set()
    assert session.dirty == {("t", 0)}  # its next round carries the new HW
    assert hosted.fetch_waiters == {follower}

    hosted.signal_high_watermark()  # anything else (leadership, ISR, log start): everyone
    assert follower.event.is_set() and watcher.event.is_set()
    assert hosted.fetch_waiters == set()


async def test_long_polls_are_answered_by_wake_ups_not_their_max_wait(
    nursery, tmp_path, monkeypatch
):
    replica_reads: list[int] = []  # each read pass of a follower's fetch on any broker
    read = fetch_handler._FetchPass.read

    def counted(fetch_pass, indices=None):
        if fetch_pass.replica_id >= 0:
            replica_reads.append(fetch_pass.replica_id)
        return read(fetch_pass, indices)

    monkeypatch.setattr(fetch_handler._FetchPass, "read", counted)
    quorum = LocalQuorum()
    brokers = {i: await _start(nursery, quorum, tmp_path, i, LONG_POLL_PROPS) for i in (1, 2, 3)}
    leader, leader_server, leader_port, followers = await _replicated_topic(
        quorum, brokers, min_insync_replicas=2
    )
    client = await WireClient.connect(leader_port)
    fetched: list = []

    async def consume() -> None:  # parked: nothing below the HW yet; it may wait 60 s
        response = await client.call(1, 11, fetch_body(TOPIC, 0, 0, max_wait_ms=60_000))
        fetched.append(response.responses[0].partitions[0])

    nursery.start_soon(consume)
    hosted = leader_server.replica_manager.get(TOPIC, 0)
    with trio.fail_after(30):  # a round that waited for a max wait would take 60 s
        while not any(not waiter.for_data for waiter in hosted.fetch_waiters):
            await trio.sleep(0.01)  # the consumer's fetch is parked
        replica_reads.clear()
        for i in range(5):  # each answered once both followers fetched again
            assert await _produce(leader_port, -1, b"v%d" % i) == ErrorCode.NONE
        # Per record, each follower's parked fetch read once when woken by the append, and
        # its next fetch once on arrival; neither read again for the HW their fetches moved.
        while len(replica_reads) < 4 * 5:
            await trio.sleep(0.01)
        assert sorted(replica_reads) == sorted(followers * 2 * 5)
        while not fetched:
            await trio.sleep(0.01)
    partition = fetched[0]
    assert partition.error_code == ErrorCode.NONE and partition.records
    assert partition.high_watermark >= 1
    assert leader_server.log_manager.get_log(TOPIC, 0).high_watermark == 5
    for b in followers:
        assert brokers[b][0].log_manager.get_log(TOPIC, 0).log_end_offset == 5
    await client.aclose()
