"""One append answers both followers' parked fetches together: their answers leave the leader
in the same turn of its event loop (no I/O wait between the two sends), so neither follower
waits for the other's round trip; the acks=all produce is answered once both fetched again.

Three in-process brokers whose follower long polls would wait 60 s; the leader's sends are
recorded (the real send runs) with the scheduler turn they happened in, counted by a trio
instrument at each I/O wait."""

from __future__ import annotations

import trio

from log.common.errors import ErrorCode
from log.server import broker
from tests.broker.conftest import LocalQuorum
from tests.replication.test_replication_in_process import (
    TOPIC,
    _produce,
    _replicated_topic,
    _start,
)

LONG_POLL_PROPS = {"replica.fetch.wait.max.ms": 60_000, "replica.fetch.backoff.ms": 50}
VALUE = b"answered-together"


class _Turns(trio.abc.Instrument):
    """Counts the scheduler's turns: one I/O wait (poll) per batch of runnable tasks."""

    def __init__(self) -> None:
        self.count = 0

    def before_io_wait(self, timeout: float) -> None:
        self.count += 1


async def test_one_append_answers_both_followers_in_one_turn(nursery, tmp_path, monkeypatch):
    quorum = LocalQuorum()
    brokers = {i: await _start(nursery, quorum, tmp_path, i, LONG_POLL_PROPS) for i in (1, 2, 3)}
    leader, leader_server, leader_port, followers = await _replicated_topic(
        quorum, brokers, min_insync_replicas=2
    )
    sessions = leader_server.ctx.fetch_sessions.sessions
    with trio.fail_after(30):  # both followers' fetches are parked at the leader
        while sum(s.watcher is not None and s.watcher.event is not None
                  for s in sessions.values()) < 2:  # fmt: skip
            await trio.sleep(0.01)

    turns = _Turns()
    sends: list[tuple[int, bytes]] = []  # (turn, bytes) of each answer the leader sent
    send_parts = broker.send_parts

    async def recorded(stream: trio.SocketStream, parts: list) -> None:
        if stream.socket.getsockname()[1] == leader_port:
            sends.append((turns.count, b"".join(bytes(part) for part in parts)))
        await send_parts(stream, parts)

    monkeypatch.setattr(broker, "send_parts", recorded)
    trio.lowlevel.add_instrument(turns)
    try:
        assert await _produce(leader_port, -1, VALUE) == ErrorCode.NONE
    finally:
        trio.lowlevel.remove_instrument(turns)

    # The answers carrying the record: one per follower (the produce's answer does not).
    carrying = [turn for turn, data in sends if VALUE in data]
    assert len(carrying) == 2, sends
    assert carrying[0] == carrying[1]  # sent in the same turn: no I/O wait between them
    for b in (leader, *followers):
        assert brokers[b][0].log_manager.get_log(TOPIC, 0).log_end_offset == 1, b
