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

A job id that was committed stays committed: a later commit of the same id (a replayed
micro-batch, or a batch job re-run with the same `exactlyOnceJobId`) aborts its new
transactions and reports the job as already committed, so the output appears once.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Sequence
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


async def read_intents(bootstrap_servers: str, job_prefix_: str) -> dict[str, dict[str, Any]]:
    """The latest intent record of every job whose id starts with `job_prefix_`."""
    from producer.fetch_client import FetchClient

    found: dict[str, dict[str, Any]] = {}
    async with FetchClient(bootstrap_servers) as client:
        async for record in client.iter_records(INTENT_TOPIC, 0, 0):
            if record.key is None or record.value is None:
                continue
            key = bytes(record.key).decode()
            if key.startswith(job_prefix_):
                found[key] = json.loads(bytes(record.value))
    return found


async def read_intent(bootstrap_servers: str, job_id: str) -> dict[str, Any] | None:
    """The job's latest intent record, or None."""
    return (await read_intents(bootstrap_servers, job_id)).get(job_id)


async def write_intent(bootstrap_servers: str, job_id: str, intent: dict[str, Any]) -> None:
    from producer.producer import Producer

    async with Producer(bootstrap_servers, acks=-1, linger_ms=0) as producer:
        handle = await producer.send(INTENT_TOPIC, json.dumps(intent).encode(), job_id.encode(), 0)
        await handle.wait()


def _intent(job_id: str, decision: str, winners: Iterable[PreparedTxn], done: bool) -> dict:
    return {
        "job": job_id,
        "decision": decision,
        "transactions": [[t.transactional_id, t.producer_id, t.producer_epoch] for t in winners],
        "done": done,
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


async def commit_job(bootstrap_servers: str, job_id: str, prepared: Sequence[PreparedTxn]) -> bool:
    """Commit the job's winning transactions as one decision. False when the job id had been
    committed before (its new transactions are aborted: the output stays as it was)."""
    from producer.transaction_client import TransactionClient

    previous = await read_intent(bootstrap_servers, job_id)
    async with TransactionClient.open(bootstrap_servers) as client:
        if previous is not None and previous["decision"] == COMMIT:
            await _finish_commit(client, job_id, _winners(previous))
            return False
        await write_intent(bootstrap_servers, job_id, _intent(job_id, COMMIT, prepared, False))
        await _finish_commit(client, job_id, prepared)
    await write_intent(bootstrap_servers, job_id, _intent(job_id, COMMIT, prepared, True))
    return True


async def abort_job(bootstrap_servers: str, job_id: str) -> bool:
    """Abort every open transaction of the job. False when the job had been committed (a
    commit intent is never undone: it is finished instead)."""
    from producer.transaction_client import TransactionClient

    previous = await read_intent(bootstrap_servers, job_id)
    async with TransactionClient.open(bootstrap_servers) as client:
        if previous is not None and previous["decision"] == COMMIT:
            await _finish_commit(client, job_id, _winners(previous))
            return False
        await write_intent(bootstrap_servers, job_id, _intent(job_id, ABORT, (), False))
        await _abort(client, await _open_transactions(client, job_id))
    return True


async def recover_job(bootstrap_servers: str, job_id: str) -> str:
    """Finish what a crashed driver left: 'committed' (a commit intent, now finished),
    'aborted' (open transactions of an undecided job aborted) or 'clean'."""
    from producer.transaction_client import TransactionClient

    previous = await read_intent(bootstrap_servers, job_id)
    async with TransactionClient.open(bootstrap_servers) as client:
        if previous is not None and previous["decision"] == COMMIT:
            await _finish_commit(client, job_id, _winners(previous))
            if not previous["done"]:
                previous["done"] = True
                await write_intent(bootstrap_servers, job_id, previous)
            return "committed"
        open_ids = await _open_transactions(client, job_id)
        await _abort(client, open_ids)
    return "aborted" if open_ids else "clean"


def _batch_of(name: str, sink_prefix: str) -> int | None:
    """The micro-batch number of a job id or transactional id under `sink_prefix`
    ("<sink>-b"), or None."""
    if not name.startswith(sink_prefix):
        return None
    digits = name[len(sink_prefix) :].split("-", 1)[0]
    return int(digits) if digits.isdigit() else None


async def recover_batches(bootstrap_servers: str, sink_prefix: str, before: int) -> None:
    """recover_job for a streaming sink's micro-batches before `before` (job ids
    "<sink>-b<n>"): commit intents finished, undecided transactions aborted. Spark's
    checkpoint has those batches committed; the current one is left to its own commit."""
    from producer.transaction_client import TransactionClient

    intents = await read_intents(bootstrap_servers, sink_prefix)
    async with TransactionClient.open(bootstrap_servers) as client:
        for job_id, intent in intents.items():
            batch = _batch_of(job_id, sink_prefix)
            if batch is None or batch >= before:
                continue
            if intent["decision"] == COMMIT and not intent["done"]:
                await _finish_commit(client, job_id, _winners(intent))
                intent["done"] = True
                await write_intent(bootstrap_servers, job_id, intent)
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


async def job_decided(bootstrap_servers: str, job_id: str) -> str | None:
    """The job's decision so far (a task's check before it prepares), or None."""
    intent = await read_intent(bootstrap_servers, job_id)
    return None if intent is None else str(intent["decision"])


def main(argv: Sequence[str]) -> int:
    import trio

    if len(argv) != 2:
        print("usage: python -m spark.exactly_once BOOTSTRAP_SERVERS JOB_ID", file=sys.stderr)
        return 2
    print(trio.run(recover_job, argv[0], argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
