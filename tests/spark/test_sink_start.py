"""SinkStart.earlier (spark/exactly_once.py): what a streaming sink's newest intent says about a
micro-batch Spark runs, without any I/O. The sink decides its micro-batches in order, so its
newest intent tells which batches were committed."""

from __future__ import annotations

from spark.exactly_once import ABORT, COMMIT, LatestIntent, PreparedTxn, SinkStart, _intent

PREFIX = "sink-b"
WINNER = PreparedTxn("quorumlog-spark-sink-b5-p0-a0", 7, 0)


def _start(batch: int | None, decision: str = COMMIT, done: bool = True) -> SinkStart:
    if batch is None:
        return SinkStart(PREFIX, 100, None)
    job = f"{PREFIX}{batch}"
    winners = [WINNER] if decision == COMMIT else []
    return SinkStart(PREFIX, 100, LatestIntent(90, job, _intent(job, decision, winners, done)))


def test_a_sink_without_intents_has_no_earlier_decision():
    assert _start(None).earlier(0) is None


def test_the_batch_after_the_newest_is_new():
    assert _start(5).earlier(6) is None
    assert _start(5, ABORT).earlier(6) is None


def test_a_replay_of_the_newest_committed_batch_gets_its_intent_and_winners():
    earlier = _start(5, done=False).earlier(5)
    assert earlier is not None and earlier["decision"] == COMMIT and not earlier["done"]
    assert earlier["transactions"] == [[WINNER.transactional_id, 7, 0]]


def test_a_replay_of_an_aborted_batch_is_decided_again():
    assert _start(5, ABORT).earlier(5) is None


def test_a_batch_below_the_newest_was_committed_and_finished():
    for decision in (COMMIT, ABORT):  # batch 5 ran, so batch 3 had been committed
        earlier = _start(5, decision).earlier(3)
        assert earlier is not None and earlier["decision"] == COMMIT and earlier["done"]
        assert earlier["job"] == f"{PREFIX}3" and earlier["transactions"] == []


def test_other_sinks_keys_are_not_batches_of_this_one():
    other = SinkStart(
        PREFIX, 100, LatestIntent(90, "sinkx-b9", _intent("sinkx-b9", COMMIT, (), True))
    )
    assert other.earlier(1) is None
