"""The cost of one exactly-once write task's intent check (spark/exactly_once.job_decided) with
an empty intent topic and with HISTORY intent records of other jobs in it: wall seconds and this
process's CPU seconds per check (median of REPEATS), on a real 3-node cluster.

    python -m bench.intent_check [--history 20000] [--repeats 7] [--base-port 47000]

A task's check asks for the job's decision from the offset its driver noted when the job
started (the intent topic's end then); before that existed it read the topic from offset 0.
Prints one line per history size, then the driver's lookup of a named job's earlier intent
(once per job, at its start): of the newest record and of an id never used.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
REPEATS = 7


async def _populate(bootstrap: str, count: int) -> None:
    """`count` done commit intents of other jobs, as a cluster's history leaves them."""
    from producer.producer import Producer
    from spark.exactly_once import INTENT_TOPIC

    async with Producer(bootstrap, acks=-1, linger_ms=5) as producer:
        handles = []
        for n in range(count):
            value = {"job": f"history{n:06d}", "decision": "commit", "transactions": [
                [f"quorumlog-spark-history{n:06d}-p0-a0", 1000 + n, 0]], "done": True}  # fmt: skip
            key = f"history{n:06d}".encode()
            handles.append(await producer.send(INTENT_TOPIC, json.dumps(value).encode(), key, 0))
        for handle in handles:
            await handle.wait()


def _one_check(bootstrap: str, job_id: str, start: int) -> tuple[float, float]:
    from spark import exactly_once

    takes_start = len(inspect.signature(exactly_once.job_decided).parameters) > 2
    args = (bootstrap, job_id, start) if takes_start else (bootstrap, job_id)
    wall, cpu = time.perf_counter(), time.process_time()
    trio.run(exactly_once.job_decided, *args)
    return time.perf_counter() - wall, time.process_time() - cpu


def _lookup(bootstrap: str, job_id: str, repeats: int) -> tuple[float, float]:
    """The driver's lookup of a named job's earlier intent (read_intent without a start)."""
    from spark.exactly_once import read_intent

    samples = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        trio.run(read_intent, bootstrap, job_id)
        samples.append((time.perf_counter() - wall, time.process_time() - cpu))
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def _measure(bootstrap: str, repeats: int) -> tuple[float, float, int]:
    from producer.fetch_client import FetchClient
    from spark.exactly_once import INTENT_TOPIC

    async def end() -> int:
        async with FetchClient(bootstrap) as client:
            return await client.latest_offset(INTENT_TOPIC, 0)

    start = trio.run(end)  # what the driver notes when a job starts
    samples = [_one_check(bootstrap, "bench_job", start) for _ in range(repeats)]
    return (
        statistics.median(s[0] for s in samples),
        statistics.median(s[1] for s in samples),
        start,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--base-port", type=int, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests" / "node"))
    from cluster_harness import Cluster

    from spark.exactly_once import ensure_intent_topic

    data_dir = Path(tempfile.mkdtemp(prefix="intent-check-"))
    cluster = Cluster(data_dir, 3, base_port=args.base_port)
    try:
        cluster.start_all()
        bootstrap = cluster.layout.bootstrap_servers
        ensure_intent_topic(bootstrap)
        for history in (0, args.history):
            if history:
                trio.run(_populate, bootstrap, history)
            wall, cpu, start = _measure(bootstrap, args.repeats)
            print(f"intent check, {history:>6} history records (job starts at offset {start}): "
                  f"{wall * 1000:7.1f} ms wall, {cpu * 1000:7.1f} ms CPU (median of "
                  f"{args.repeats})")  # fmt: skip
            if history:
                for what, job_id in (("the newest", f"history{history - 1:06d}"),
                                     ("a never used", "bench_never_used")):  # fmt: skip
                    wall, cpu = _lookup(bootstrap, job_id, args.repeats)
                    print(f"driver's lookup of {what} job id's intent, {history} history "
                          f"records: {wall * 1000:7.1f} ms wall, {cpu * 1000:7.1f} ms CPU")  # fmt: skip
    finally:
        cluster.stop_all()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
