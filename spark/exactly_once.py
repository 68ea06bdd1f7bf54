"""Exactly-once job output: the commit protocol between write tasks and the driver.

A job (a batch write, or one micro-batch of a streaming query) has a job id. Each task attempt
writes inside its own transaction, transactional id `quorumlog-spark-<job>-p<partition>-a<attempt>`,
opened with KIP-939 two-phase commit (no transaction timeout). Instead of committing, the task
*prepares*: it flushes, then, unless the job was already decided (see below), reports
`PreparedTxn(transactional id, producer id, epoch)` in its commit message and leaves the
transaction open.

The driver decides. `commit_job` first writes a commit *intent* to the compacted topic
`INTENT_TOPIC` (key: the job id; value: the decision and the winning transactions), acks=all;
from then on the job is committed whatever happens to the driver. Then it ends the winners'
transactions with EndTxn(commit) and aborts every other open transaction of the job (failed or
speculative attempts; found with ListTransactions by the job's prefix) with a 2PC
InitProducerId, which also fences them; then it waits until the winners' transactions are
complete (EndTxn answers once the commit is decided; the COMMIT markers that make the rows
readable follow, later when a partition leader just died), so a read_committed read right
after the job sees its whole output; last it marks the intent done. `abort_job` writes an
abort intent and aborts every open transaction of the job. Every step is idempotent, so
`recover_job` (run by the next job with the same job id before it writes anything, or by hand:
`python -m spark.exactly_once BOOTSTRAP JOB_ID`) finishes what a crashed driver started: the
winners of a commit intent are committed; without a commit intent everything is aborted.

A straggler (a speculative attempt still running when the driver decides) checks the intent
after its flush: a decided job makes it abort its own transaction. One that opened its
transaction before the driver listed the job's transactions is aborted by the driver; one that
opened it later sees the intent, because the intent was written before the listing.

The checks cost the job, not the topic's history (compaction keeps one record per job id
forever). Before any task runs, the driver notes the topic's end offset (JobStart, SinkStart):
the job's own intents lie after it, so the tasks' checks and the driver's decision read from
there. An intent of the same job id from before it (a batch job re-run with its
exactlyOnceJobId, a micro-batch replayed from the checkpoint) is resolved by the driver at
that start and handed to the tasks with the offset: an earlier commit means they write
nothing; an earlier abort is no decision for this run (it decides anew). A named batch job
finds its earlier intent backwards from the end (what was written since it; all of the topic
for an id never used); a streaming sink finds only its newest intent, backwards from the end
(in a running query, among the last records): it decides its micro-batches in order, so that
one tells it which batches were committed and which one may be unfinished (SinkStart).

A job id that was committed stays committed: a later commit of the same id (a replayed
micro-batch, or a batch job re-run with the same `exactlyOnceJobId`) aborts its new
transactions and reports the job as already committed, so the output appears once.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

log = logging.getLogger(__name__)

INTENT_TOPIC = "_quorumlog_spark_commits"
TXN_PREFIX = "quorumlog-spark-"
COMMIT = "commit"
ABORT = "abort"
COMPLETE_WAIT_S = 120.0  # how long a commit waits for its markers before it returns anyway
COMPLETE_POLL_S = 0.05
LATEST_WINDOW = 256  # latest_intent's first backward window (offsets), then x4 each time
LATEST_WINDOW_MAX = 65_536


@dataclass(frozen=True)
class PreparedTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int


def transactional_id(job_id: str, spark_partition: int, attempt: int) -> str:
    return f"{TXN_PREFIX}{job_id}-p{spark_partition}-a{attempt}"


def job_prefix(job_id: str) -> str:
    return f"{TXN_PREFIX}{job_id}-"


# -- the intent topic ----------------------------------------------------------------------------


def ensure_intent_topic(bootstrap_servers: str) -> None:
    """The compacted, single-partition intent topic, replicated like the internal topics
    (driver side, before any task runs)."""
    import trio

    from spark.admin import broker_count, create_topic

    replicas = min(3, max(1, trio.run(broker_count, bootstrap_servers)))
    create_topic(bootstrap_servers, INTENT_TOPIC, 1, replicas, {"cleanup.policy": "compact"})


async def intent_end(bootstrap_servers: str) -> int:
    """The intent topic's end offset (its high watermark) now. Noted by the driver when a job
    starts, before any of its tasks runs: every intent written for the job from then on lies
    at or after it (offsets only grow; compaction keeps them; a new leader has every record
    below the high watermark), so the job's checks read from there, never the whole history."""
    from producer.fetch_client import FetchClient

    async with FetchClient(bootstrap_servers) as client:
        return await client.latest_offset(INTENT_TOPIC, 0)


@dataclass
class IntentScan:
    """What one read of the intent topic found: the latest intent of each matching job, and how
    many records it read (what the read cost; reported by the tasks, kept in the intent)."""

    found: dict[str, dict[str, Any]]
    records_read: int


async def scan_intents(
    bootstrap_servers: str, matches: Callable[[str], bool], start: int = 0
) -> IntentScan:
    """The latest intent record of every job whose id `matches`, read from offset `start`."""
    from producer.fetch_client import FetchClient

    found: dict[str, dict[str, Any]] = {}
    read = 0
    async with FetchClient(bootstrap_servers) as client:
        async for record in client.iter_records(INTENT_TOPIC, 0, start):
            read += 1
            if record.key is None or record.value is None:
                continue
            key = bytes(record.key).decode()
            if matches(key):
                found[key] = json.loads(bytes(record.value))
    return IntentScan(found, read)


@dataclass(frozen=True)
class LatestIntent:
    offset: int
    job_id: str
    intent: dict[str, Any]


async def latest_intent(
    bootstrap_servers: str, matches: Callable[[str], bool]
) -> LatestIntent | None:
    """The newest intent record whose job id `matches`, read backwards from the topic's end in
    growing windows: it costs the records written after it (all of the topic when there is
    none). Compaction never removes a key's newest record, so what it finds is current."""
    from producer.fetch_client import FetchClient

    async with FetchClient(bootstrap_servers) as client:
        return await _latest_before(client, matches, await client.latest_offset(INTENT_TOPIC, 0))


async def _latest_before(
    client: Any, matches: Callable[[str], bool], end: int
) -> LatestIntent | None:
    window = LATEST_WINDOW
    while end > 0:
        start = max(0, end - window)
        newest: LatestIntent | None = None
        async for record in client.iter_records(INTENT_TOPIC, 0, start, end):
            if record.key is None or record.value is None:
                continue
            key = bytes(record.key).decode()
            if matches(key):
                newest = LatestIntent(record.offset, key, json.loads(bytes(record.value)))
        if newest is not None:
            return newest
        end, window = start, min(window * 4, LATEST_WINDOW_MAX)
    return None


async def read_intent(
    bootstrap_servers: str, job_id: str, start: int | None = None
) -> dict[str, Any] | None:
    """The job's latest intent record, or None: read from `start` when the caller knows that
    nothing older matters, else found backwards from the end (latest_intent)."""
    if start is None:
        latest = await latest_intent(bootstrap_servers, lambda key: key == job_id)
        return None if latest is None else latest.intent
    return (await scan_intents(bootstrap_servers, lambda key: key == job_id, start)).found.get(
        job_id
    )


async def write_intent(bootstrap_servers: str, job_id: str, intent: dict[str, Any]) -> None:
    from producer.producer import Producer

    async with Producer(bootstrap_servers, acks=-1, linger_ms=0) as producer:
        handle = await producer.send(INTENT_TOPIC, json.dumps(intent).encode(), job_id.encode(), 0)
        await handle.wait()


def _intent(
    job_id: str, decision: str, winners: Iterable[PreparedTxn], done: bool, **noted: Any
) -> dict:
    """An intent record's value. `noted`: what the driver notes for whoever looks later (the
    tasks' "checks", commit_job)."""
    return {
        "job": job_id,
        "decision": decision,
        "transactions": [[t.transactional_id, t.producer_id, t.producer_epoch] for t in winners],
        "done": done,
        **noted,
    }


def _winners(intent: dict[str, Any]) -> list[PreparedTxn]:
    return [PreparedTxn(t, int(p), int(e)) for t, p, e in intent["transactions"]]


# -- ending transactions -------------------------------------------------------------------------


async def _open_transactions(client: Any, job_id: str) -> list[str]:
    prefix = job_prefix(job_id)
    listed = await client.list_transactions(["Ongoing"])
    return sorted({tid for tid, _pid, _state in listed if tid.startswith(prefix)})


async def _abort(client: Any, transactional_ids: Iterable[str]) -> None:
    """A 2PC InitProducerId without keep_prepared_txn: aborts the open transaction and fences
    whoever wrote it (retried by the client until the abort went through)."""
    for tid in transactional_ids:
        await client.init_producer_id(tid, 60_000, enable_2pc=True)


async def _finish_commit(client: Any, job_id: str, winners: Sequence[PreparedTxn]) -> None:
    for txn in winners:
        # A retry of a commit that went through is answered NONE (same producer id and
        # epoch); a fenced one (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) means the transaction
        # was aborted by someone else: raised, never taken for a commit.
        await client.end_txn(txn.transactional_id, txn.producer_id, txn.producer_epoch, commit=True)
    committed = {t.transactional_id for t in winners}
    await _abort(
        client, [t for t in await _open_transactions(client, job_id) if t not in committed]
    )
    await _await_complete(client, committed)


async def _await_complete(client: Any, transactional_ids: set[str]) -> None:
    """Wait until none of `transactional_ids` is still in PrepareCommit: their COMMIT markers
    are written and replicated, so the last stable offsets passed their rows. The decision is
    durable before this: after COMPLETE_WAIT_S it only logs that the rows show up later."""
    from log.common.errors import KafkaError

    with trio.move_on_after(COMPLETE_WAIT_S):
        while True:
            try:
                listed = await client.list_transactions(["PrepareCommit"])
            except KafkaError as exc:
                # ListTransactions gave up on a broker after its own 60 s of retries (one
                # stopped but never fenced). The job is committed already: ask again until
                # COMPLETE_WAIT_S, never fail a durable commit here.
                if not exc.retriable:
                    raise
                log.info("waiting for the commit markers: %s; asking again", exc)
            else:
                if not any(tid in transactional_ids for tid, _pid, _state in listed):
                    return
            await trio.sleep(COMPLETE_POLL_S)
    log.warning("committed transactions still writing their markers after %.0f s: the rows "
                "become readable once they are written", COMPLETE_WAIT_S)  # fmt: skip


async def commit_job(
    bootstrap_servers: str,
    job_id: str,
    prepared: Sequence[PreparedTxn],
    *,
    intents_from: int = 0,
    earlier: dict[str, Any] | None = None,
    checks: dict[str, int] | None = None,
) -> bool:
    """Commit the job's winning transactions as one decision. False when the job id had been
    committed before (its new transactions are aborted: the output stays as it was).

    `intents_from`: the intent topic's end when the job started (JobStart, SinkStart): the
    job's own intents lie after it. `earlier`: a commit intent of this job id from before that,
    found by the driver at the job's start (the job was committed by an earlier run).
    `checks`: what the tasks' intent checks cost ("from": the offset they read from,
    "most_read": the most records one task's checks read), kept in the intent."""
    from producer.transaction_client import TransactionClient

    previous = earlier or await read_intent(bootstrap_servers, job_id, intents_from)
    noted = {} if checks is None else {"checks": checks}
    async with TransactionClient.open(bootstrap_servers) as client:
        if previous is not None and previous["decision"] == COMMIT:
            await _finish_earlier(client, bootstrap_servers, job_id, previous)
            return False
        await write_intent(bootstrap_servers, job_id,
                           _intent(job_id, COMMIT, prepared, False, **noted))  # fmt: skip
        await _finish_commit(client, job_id, prepared)
    await write_intent(bootstrap_servers, job_id, _intent(job_id, COMMIT, prepared, True, **noted))
    return True


async def _finish_earlier(
    client: Any, bootstrap_servers: str, job_id: str, previous: dict[str, Any]
) -> None:
    """Finish a commit decided before (idempotent) and mark it done if it was not."""
    await _finish_commit(client, job_id, _winners(previous))
    if not previous["done"]:
        await write_intent(bootstrap_servers, job_id, {**previous, "done": True})


async def abort_job(
    bootstrap_servers: str,
    job_id: str,
    *,
    intents_from: int = 0,
    earlier: dict[str, Any] | None = None,
) -> bool:
    """Abort every open transaction of the job. False when the job had been committed (a
    commit intent is never undone: it is finished instead). The keywords: as commit_job."""
    from producer.transaction_client import TransactionClient

    previous = earlier or await read_intent(bootstrap_servers, job_id, intents_from)
    async with TransactionClient.open(bootstrap_servers) as client:
        if previous is not None and previous["decision"] == COMMIT:
            await _finish_earlier(client, bootstrap_servers, job_id, previous)
            return False
        await write_intent(bootstrap_servers, job_id, _intent(job_id, ABORT, (), False))
        await _abort(client, await _open_transactions(client, job_id))
    return True


async def recover_job(bootstrap_servers: str, job_id: str) -> str:
    """Finish what a crashed driver left: 'committed' (a commit intent, now finished),
    'aborted' (open transactions of an undecided job aborted) or 'clean'. Finds the job's
    intent backwards from the topic's end (latest_intent)."""
    return await _recover(bootstrap_servers, job_id, await read_intent(bootstrap_servers, job_id))


async def _recover(bootstrap_servers: str, job_id: str, previous: dict[str, Any] | None) -> str:
    from producer.transaction_client import TransactionClient

    async with TransactionClient.open(bootstrap_servers) as client:
        if previous is not None and previous["decision"] == COMMIT:
            await _finish_earlier(client, bootstrap_servers, job_id, previous)
            return "committed"
        open_ids = await _open_transactions(client, job_id)
        await _abort(client, open_ids)
    return "aborted" if open_ids else "clean"


@dataclass(frozen=True)
class JobStart:
    """What a batch job's driver found before any of its tasks ran (start_job)."""

    intents_from: int  # the intent topic's end then: the job's own intents lie after it
    earlier: dict[str, Any] | None = None  # the job id's commit intent from an earlier run

    @property
    def committed_before(self) -> bool:
        return self.earlier is not None


async def start_job(bootstrap_servers: str, job_id: str, named: bool) -> JobStart:
    """A batch job's start, on the driver before any task. A `named` job id (exactlyOnceJobId)
    may have been used before: what an earlier run left is recovered first (recover_job; the
    one read of the job's history: backwards until its newest intent, all of the topic for an
    id never used); its commit intent, if any, means the job was committed before and the
    tasks write nothing. A fresh (random) id has no history. Then the topic's end offset, from
    which the tasks' checks and the driver's decision read."""
    earlier = None
    if named:
        previous = await read_intent(bootstrap_servers, job_id)
        outcome = await _recover(bootstrap_servers, job_id, previous)
        log.info("quorumlog sink: job %s recovered: %s", job_id, outcome)
        if previous is not None and previous["decision"] == COMMIT:
            earlier = {**previous, "done": True}
    return JobStart(await intent_end(bootstrap_servers), earlier)


def _batch_of(name: str, sink_prefix: str) -> int | None:
    """The micro-batch number of a job id or transactional id under `sink_prefix`
    ("<sink>-b"), or None."""
    if not name.startswith(sink_prefix):
        return None
    digits = name[len(sink_prefix) :].split("-", 1)[0]
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True)
class SinkStart:
    """What a streaming sink's driver found before a micro-batch's tasks ran (start_sink):
    the topic's end then, and the sink's newest intent (any of its micro-batches) before it.

    A sink decides its micro-batches in order: Spark runs batch n + 1 only after the sink's
    commit of batch n returned, which first finished every earlier batch (recover_batches) and
    then wrote batch n's commit intent. So the sink's newest intent is of its highest batch
    so far, and every lower batch was committed; only the newest can be unfinished. Spark
    replays, after a restart from its checkpoint, the batch it had not recorded as committed:
    that newest one, or (a checkpoint restored from a copy) a lower one."""

    sink_prefix: str
    intents_from: int
    latest: LatestIntent | None

    def earlier(self, batch: int) -> dict[str, Any] | None:
        """The commit intent an earlier run left for micro-batch `batch`, or None (not decided,
        or aborted: decided again now). A batch below the newest was committed, its intent
        done: it is given without its transactions, which nothing needs any more."""
        if self.latest is None:
            return None
        newest = _batch_of(self.latest.job_id, self.sink_prefix)
        if newest is None or newest < batch:
            return None
        if newest == batch:
            return self.latest.intent if self.latest.intent["decision"] == COMMIT else None
        job_id = f"{self.sink_prefix}{batch}"
        return _intent(job_id, COMMIT, (), True, below=self.latest.job_id)


async def start_sink(bootstrap_servers: str, sink_prefix: str) -> SinkStart:
    """A streaming sink's view before a micro-batch ("<sink>-b"): its newest intent, found
    backwards from the end (it costs the intents written since: in a running query, the
    previous micro-batch's commit is among the last records), and the end offset."""
    from producer.fetch_client import FetchClient

    async with FetchClient(bootstrap_servers) as client:
        end = await client.latest_offset(INTENT_TOPIC, 0)  # as intent_end
        latest = await _latest_before(
            client, lambda key: _batch_of(key, sink_prefix) is not None, end
        )
    return SinkStart(sink_prefix, end, latest)


async def recover_batches(
    bootstrap_servers: str, sink_prefix: str, before: int, start: SinkStart | None = None
) -> None:
    """recover_job for a streaming sink's micro-batches before `before` (job ids
    "<sink>-b<n>"): the sink's newest intent (`start`, else found now) finished if it is an
    unfinished commit of an earlier batch (only the newest can be: SinkStart), undecided
    transactions of earlier batches aborted. Spark's checkpoint has those batches committed;
    the current one is left to its own commit."""
    from producer.transaction_client import TransactionClient

    if start is None:
        start = await start_sink(bootstrap_servers, sink_prefix)
    async with TransactionClient.open(bootstrap_servers) as client:
        latest = start.latest
        if latest is not None:
            batch = _batch_of(latest.job_id, sink_prefix)
            intent = latest.intent
            if (batch is not None and batch < before and intent["decision"] == COMMIT
                    and not intent["done"]):  # fmt: skip
                await _finish_earlier(client, bootstrap_servers, latest.job_id, intent)
        prefix = TXN_PREFIX + sink_prefix
        listed = await client.list_transactions(["Ongoing"])
        stale = set()
        for tid, _pid, _state in listed:
            batch = (
                _batch_of(tid[len(TXN_PREFIX) :], sink_prefix) if tid.startswith(prefix) else None
            )
            if batch is not None and batch < before:
                stale.add(tid)
        await _abort(client, sorted(stale))


async def job_decided(
    bootstrap_servers: str, job_id: str, start: int = 0
) -> tuple[str | None, int]:
    """A task's check before it writes and before it prepares: (the job's decision so far or
    None, the intent records read), reading from `start`, the offset its driver noted when the
    job started (JobStart, SinkStart): the job's cost, not the topic's history. A decision of
    an earlier run with this job id lies before `start`; the driver resolved it before the
    tasks ran and told them (an earlier commit: they write nothing; an abort: decided anew)."""
    scan = await scan_intents(bootstrap_servers, lambda key: key == job_id, start)
    intent = scan.found.get(job_id)
    return (None if intent is None else str(intent["decision"])), scan.records_read


def main(argv: Sequence[str]) -> int:
    import trio

    if len(argv) != 2:
        print("usage: python -m spark.exactly_once BOOTSTRAP_SERVERS JOB_ID", file=sys.stderr)
        return 2
    print(trio.run(recover_job, argv[0], argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
