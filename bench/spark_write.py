"""Spark writing through the quorumlog data source vs the same job writing Parquet to disk.

One local SparkSession (`--master`, default local[2]) builds N rows with a 100-byte string
`value` and a 16-byte `key` (none with `--no-keys`; cached in memory first, so generating
them is not timed), then runs the same write job up to five ways in one run (`--jobs`),
`--repeat` times each after one warm-up (the repeats interleaved), keeping the best:

* `parquet`: `df.write.parquet(tmpdir)`, local disk (the baseline: Spark's own fast path);
* `quorumlog arrow`: `df.write.format("quorumlog")` with the Arrow writer (partitions per
  column, records encoded per run with numpy/Arrow, see spark/README.md);
* `quorumlog arrow eos`: the same with `.option("exactlyOnce", "true")` (each task's
  transaction prepared, the job committed by the driver: spark/exactly_once.py);
* `quorumlog row`: the same with `.option("writer", "row")` (one `send` per Row);
* `python no-op`: a Python data source whose Arrow writer discards its input: what Spark's
  hand-over of the rows to Python costs, the floor under any Python writer.

The quorumlog writes go to a topic with `--partitions` partitions (replication factor 1) on a
real 3-node cluster started for the run (`python -m tools node` processes, like tests/node,
with `transaction.two.phase.commit.enable` for the exactly-once job), or on `--bootstrap` if
given (that cluster needs it too for `eos`). Producer settings are the writer's defaults
(idempotent, acks=all, batch.size 512 KiB, max.request.size 8 MiB) unless passed as
`--producer key=value`. Wall time of `save()` only, and the CPU seconds each job used per
1 M rows, by kind (bench/process_cpu.py, from /proc: Spark's JVM, its Python workers, the
nodes less their idle rate, the driver; the leanest of the repeats): on this shared box CPU
time moves far less with other jobs' load than wall time does.

    python -m bench.spark_write [--rows 200000] [--repeat 2] [--partitions 6] [--jobs ...]

`--jobs` names: parquet, arrow, eos, row, no-op (default: all).

Measured on the 2 cores shared with the 3 nodes and other jobs (load average 3-11 during
these runs, so single runs move by +-30 %), 1,000,000 rows, local[2], 6 partitions, 16-byte
keys, best of 2-3 (rows/s; ratio to Parquet in the same run):

    | writer version (commit)                         | quorumlog arrow     | parquet   |
    |-------------------------------------------------|---------------------|-----------|
    | before: to_pylist + send_many, batch.size 16 KiB | 224,545 (0.11x)     | 2,017,094 |
    | partitions per column (numpy murmur2), 512 KiB  | 572,148 (0.57x)     | 1,004,334 |
    | + records encoded per run (numpy + Arrow joins) | 801,281 (0.49x)     | 1,641,247 |
    | + one hand-over per Arrow batch, bulk headers   | 1,021,846 (0.44x)   | 2,298,122 |
    | + one take per batch, lengths once              | 1,202,742 (0.77x)   | 1,559,820 |
    | the same, at load average 10                    |   568,165 (0.58x)   |   976,179 |
    | python no-op (the floor), same runs             | 2.4-3.3 M (1.4-2.5x) |          |

With exactlyOnce (issue 17), same runs, best of 2-3, load average 8-10 (other jobs on the box):

    | run (--jobs, --repeat)         | arrow             | arrow eos         | no-op | parquet   |
    |--------------------------------|-------------------|-------------------|-------|-----------|
    | parquet,arrow,eos, 2           |   608,255 (0.96x) |   747,002 (1.17x) |       |   635,898 |
    | parquet,arrow,eos,no-op, 3     |   945,657 (0.62x) | 1,251,524 (0.82x) | 1.03x | 1,525,226 |
    | the same, repeats interleaved  | 1,626,405 (0.62x) | 1,136,154 (0.44x) | 1.43x | 2,611,591 |
      (load average 7 falling to 6.7; this writer commit)
    | + 12 transactional ids warmed   | 1,489,126 (0.67x) | 1,144,843 (0.52x) | 1.60x | 2,217,138 |
      (load average 3.3 to 4.4)

Gathered batches (issue 17 section 4; old = the writer before, run from another checkout,
alternated with this one in one window, 1 M rows, best of 2, load average 14-30 from
other jobs on the box):

    | run (alternated)           | arrow           | arrow eos       | no-op | parquet |
    |----------------------------|-----------------|-----------------|-------|---------|
    | old (load 16 rising to 30) | 102,594 (0.54x) | 100,903 (0.53x) | 1.50x | 188,635 |
    | new (load 20)              | 641,693 (0.72x) | 568,455 (0.64x) | 2.37x | 892,544 |
    | old (load 21 falling to 14)| 467,550 (0.48x) | 314,591 (0.32x) | 1.25x | 970,249 |
    | new (load 14.5)            | 651,523 (0.84x) | 483,395 (0.63x) | 2.81x | 771,379 |
    | best of 3, the box idle:   |                 |                 |       |         |
    | old (load 1 to 2.6)        | 1,252,045 (0.59x) | 959,084 (0.45x) | 1.06x | 2,136,530 |
    | new (load 3.1)             | 1,444,551 (0.68x) | 1,033,170 (0.49x) | 1.34x | 2,114,042 |
    | old (load 3.4 to 4.9)      | 1,199,504 (0.74x) | 864,960 (0.53x) | 1.48x | 1,625,976 |
    | new (load 7)               |   682,151 (0.59x) | 611,970 (0.53x) | 1.59x | 1,162,656 |

(new: 4 MiB gathers, one take and one encoding pass per gather, producer batches handed
over as views of it, requests of up to 8 MiB.) The gain shows where CPU is scarce (load
14-30: the arrow job 1.4x faster, 2.14 s -> 1.53 s); on an idle box it is within the
noise (0.80 s -> 0.69 s at load 1-3, and the last pair ran as the load rose to 7).

Where the time goes (CPU seconds read from /proc around each job, which the box's load
moves far less than wall time; 1 M rows, load average 19-34): Spark's JVM takes the same
0.5-0.9 s for the no-op job and the arrow job; the no-op job's Python workers 0.14-0.17 s,
the arrow job's 0.7-1.0 s (the writer); the three nodes 0.3-0.5 s for the arrow job's
produce requests above their idle cost (heartbeats, Raft ticks: 0.06-0.13 s per second of
wall time for the three). The Parquet job in all: 0.9-1.2 s. Wall time over CPU time is
alike for the arrow and the Parquet jobs (2-3x at that load): the writer is CPU-bound, not
waiting on acks or linger. Outside Spark (one task's 500,000 rows in 10,000-row Arrow
batches to a 3-node cluster, process CPU, load 17): the task 0.26-0.30 s before, 0.19-0.24
s now; the nodes 0.25-0.30 s before, 0.21-0.29 s now. The encoding alone (no producer,
best of 7): 0.13 s before, 0.105 s now per 500,000 rows (cProfile: the joins 0.20 s in
300 calls before, 0.09 s in 50 now; the stable argsort 0.058 s before, 0.005 s now as a
radix sort on 16-bit targets; the take 0.11 s either way). py-spy on the nodes: of a
node's produce work, the append (header and CRC check, one pwritev) is about half, the
answers' sendmsg a quarter, reading and decoding requests the rest; records are never
decoded. So with gathering the writer's CPU falls by about a quarter and the brokers'
by a tenth, and under load the job's ratio to Parquet rises from 0.48-0.54x to
0.72-0.84x (eos 0.32-0.53x to 0.63-0.64x); idle, 0.59-0.74x before and 0.59-0.68x after
(eos 0.45-0.53x, 0.49-0.53x): short of the 1.0x and 0.8x targets either way. What is left is mostly
copies Arrow makes (take, join: about 0.2 s per 1 M rows on a free core), the producer
thread's request building and socket sends, and the nodes' append and answer path, all on
the same 2 cores as Spark. exactlyOnce, outside Spark (one task's 500,000 rows, load 5-7,
step by step): the task takes 0.50-1.19 s against 0.26-0.35 s without it, and its CPU
0.18-0.28 s against 0.13-0.19 s; the two intent checks take 18-92 ms, InitProducerId 16-372
ms, the prepare 0-3 ms, so most of the difference is in the sending itself (the first
batch per partition waits for AddPartitionsToTxn and the broker's verification of it):
not broken down further yet.

Without interleaving (the first two rows of the exactlyOnce table) both orders of arrow
and eos occur: at that load
the runs are noise-bound. Interleaved, exactlyOnce costs about 0.27 s per 1 M-row job here.
Not the driver's commit: timed alone on a 3-node cluster (two prepared tasks; the intent
read, the intent write, EndTxn per task, ListTransactions, the done mark) it takes 21-28 ms
once warm (311 ms for the first job on a cluster: the intent topic's first write), and a
task's check of the intent 4-11 ms; the rest is the tasks' transactions (InitProducerId with
2PC for a new transactional id per task attempt, AddPartitionsToTxn before the first send to
each partition, the prepare's flush). Outside Spark (one task's 500,000 rows through the
writer, timed per step) a warm cluster's transaction adds 10-20 ms per task, but a node's
first InitProducerId costs 0.2-0.7 s, so the bench initializes a few transactional ids
before timing (warm_transactions); the remaining ~0.2 s per job inside Spark is not broken
down yet. The
writer's own work, profiled outside Spark (cProfile on one task's 500,000 rows in 50 Arrow
batches, load average 6): 0.23 s on the task thread, of which Arrow take (the reorder by
partition) 0.04-0.05 s, binary_join_element_wise 0.05 s, argsort 0.02 s, the bytes copy
0.02 s; the no-op data source (Spark's hand-over alone) already takes as long as the whole
Parquet job, so the ratio to Parquet cannot reach 1.0x by the writer's per-row cost alone.

Second round on section 4 (old = main at 18cebce, new = this version; 1 M rows, best of 2,
the two alternated in three windows, load average 3-10; CPU seconds per 1 M rows as this
script prints them, medians of 7 runs each (6 for nodes and totals: one run of each caught
the nodes busy while it sampled their idle rate), range in brackets):

    |                           | old                 | new                 |
    |---------------------------|---------------------|---------------------|
    | arrow: Python workers     | 0.54 (0.49-0.56)    | 0.53 (0.48-0.60)    |
    | arrow: nodes              | 0.23 (0.11-0.28)    | 0.23 (0.19-0.27)    |
    | arrow: total              | 1.27 (1.19-1.35)    | 1.30 (1.12-1.45)    |
    | eos: Python workers       | 0.75 (0.73-0.80)    | 0.74 (0.63-0.85)    |
    | no-op: Python workers     | 0.16 (0.15-0.21)    | 0.17 (0.15-0.19)    |
    | parquet: total            | 0.91 (0.75-1.29)    | 0.91 (0.79-0.96)    |
    | arrow vs parquet (wall)   | 0.36-1.45x, mostly 0.63-0.83x | 0.51-0.93x |
    | eos vs parquet (wall)     | 0.47-1.20x, mostly 0.52-0.62x | 0.37-0.73x |

Inside Spark the difference is within the noise. What changed, measured where it can be
measured alone (best of 7-15, alternated with the old code):

* records encoded with five join pieces per record instead of nine (the integers before the
  key as one numpy-built column), varint widths in one pass per needed byte: encoding
  500,000 rows 0.057 -> 0.043 s (100-byte values), 0.125 -> 0.093 s (80-120 bytes);
* the broker reads a request of 64 KiB or more straight into its own buffer (recv_into):
  an 8 MiB frame fed in 256 KiB reads 4.7 -> 0.3 ms;
* the producer sends an encoded batch as (header, records) buffers with sendmsg instead of
  joining them twice: building an 8 MiB request of 16 batches 9.3 -> 0.34 ms (most of the
  old cost was first-touch page faults of the copies, which a long-running producer's
  allocator partly avoids);
* a task's partition count comes from its producer's metadata (one connection and
  Metadata request less per task), and the writer no longer imports pandas (0.2 s of CPU
  in each fresh Python worker, through pa.array/pa.scalar/to_numpy).

One write task outside Spark (500,000 rows in 10,000-row Arrow batches to a 3-node cluster,
8 runs each, alternated twice, load 1.7-1.9): the task's CPU 0.117-0.128 s (median 0.13)
old, 0.111-0.118 s (median 0.116) new; the nodes' 0.09-0.14 s old, 0.08-0.10 s new.

Where the CPU goes now (per 1 M rows; py-spy of the write tasks inside Spark, load ~19,
before the changes above, and the /proc figures): Spark's JVM 0.3-0.6 s and its hand-over
to Python 0.15-0.2 s are the no-op job's and do not depend on the writer; the writer adds
0.3-0.4 s in the Python workers: on the task thread Arrow's join (the one copy that makes
the records) and take (the reorder into partition order) the most, then murmur2
partitioning, the gathering concat, the run plan; on the producer thread the socket sends;
the nodes 0.2-0.3 s (of a node's produce work, the append's pwritev and the batch check
about half, socket reads a quarter, request decoding and answers the rest; records are
never decoded). So the arrow job takes 1.1-1.45 s of CPU against Parquet's 0.75-1.0 s on
2 cores that the nodes share: while the no-op job alone (Spark's part) takes 0.55-0.8 s,
1.0x needs the writer and the nodes together under ~0.3 s, about half of what they take.

exactlyOnce costs 0.2-0.3 s more CPU per job in the Python workers, per job rather than per
row: each task checks the job's intent twice (a connection and a read of the whole intent
topic each, 10-12 ms; the read grows with the number of jobs on the cluster: not fixed
here) and initializes its transactional id (9-24 ms on a warm cluster, 2PC InitProducerId);
the driver's side runs in Spark's Python planner and commit workers: the writer's set-up
(intent topic check, ~10 ms) and commit_job (~70 ms); a fresh planner or commit worker also
imports the producer and protocol modules (0.4 s of CPU, the Kafka message classes built
at import). Two concurrent tasks outside Spark: 0.20 s CPU per 500,000-row task with
exactlyOnce against 0.155 s without.

The row writer: 16-36k rows/s (0.02x). Parquet's own time varies most between runs (0.44
to 1.0 s for the same job), hence the ratio's spread. Where the rest goes (py-spy on the
Python workers, last version): the writer's Arrow/numpy calls (take, the joins, the varint
columns) and the producer thread's socket sends share one GIL per worker; the three nodes
and Spark's JVM use the same two cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import process_cpu
from bench.rows import emit

REPO = Path(__file__).resolve().parents[1]
VALUE_BYTES = 100


def start_cluster(data_dir: Path):
    sys.path.insert(0, str(REPO / "tests" / "node"))
    from cluster_harness import Cluster

    cluster = Cluster(data_dir, 3, extra_props={"transaction.two.phase.commit.enable": True})
    cluster.start_all()
    return cluster


WARM_TRANSACTIONAL_IDS = 12  # enough ids to reach every node's transaction coordinator


def warm_transactions(bootstrap: str) -> None:
    """Initialize a few 2PC transactional ids before timing: the first InitProducerId a node
    coordinates costs 0.2-0.7 s (its transaction-state partitions, a producer id block from
    the controller), a cost a cluster pays once, not per job; new ids then take ~10 ms."""
    from producer.sync_producer import SyncProducer

    for i in range(WARM_TRANSACTIONAL_IDS):
        producer = SyncProducer(
            bootstrap, transactional_id=f"bench-warm-{i}", transaction_two_phase_commit_enable=True
        )
        producer.init_transactions()
        producer.close()


NOOP_FORMAT = "quorumlog_bench_noop"


def _noop_source():
    """A Python data source whose Arrow writer only counts rows: the cost of Spark handing
    the rows to Python at all, the floor under any Python writer (defined here, in
    __main__, so cloudpickle ships it to the workers by value)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class NoopWriter(DataSourceArrowWriter):
        def write(self, iterator):
            for _batch in iterator:
                pass
            return WriterCommitMessage()

    class NoopSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return NOOP_FORMAT

        def writer(self, schema, overwrite):
            return NoopWriter()

    return NoopSource


IDLE_SAMPLE_S = 1.0
IDLE_SAMPLES = 4


def _idle_node_cpu_rate() -> float:
    """CPU seconds per second the nodes use with nothing to do (heartbeats, Raft ticks),
    taken off their figure for each job: the least of a few one-second samples (work left
    over from the warm-up, a transaction's markers, can still be running in the first)."""
    rates = []
    for _ in range(IDLE_SAMPLES):
        before = process_cpu.snapshot()
        time.sleep(IDLE_SAMPLE_S)
        used = process_cpu.difference(before, process_cpu.snapshot()).get("nodes", 0.0)
        rates.append(used / IDLE_SAMPLE_S)
    return min(rates)


def timed(action) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead")
    parser.add_argument("--producer", action="append", default=[], help="kafka.name=value")
    parser.add_argument("--no-keys", action="store_true", help="value column only")
    parser.add_argument(
        "--jobs",
        default="parquet,arrow,eos,row,no-op",
        help="which of parquet,arrow,eos,row,no-op",
    )
    args = parser.parse_args()

    from spark.admin import create_topic
    from spark.pipeline import build_session

    work = Path(tempfile.mkdtemp(prefix="spark-write-bench-"))
    cluster = None if args.bootstrap else start_cluster(work / "cluster")
    bootstrap = args.bootstrap or cluster.layout.bootstrap_servers
    producer_options = {
        f"producer.{kv.split('=', 1)[0]}": kv.split("=", 1)[1] for kv in args.producer
    }
    try:
        session = build_session(args.master)
        session.dataSource.register(_noop_source())
        df = session.range(0, args.rows, 1, 2).selectExpr(
            "lpad(cast(id as string), 16, 'k') as key",
            f"lpad(cast(id as string), {VALUE_BYTES}, 'v') as value",
        )
        if args.no_keys:
            df = df.select("value")
        df = df.cache()
        assert df.count() == args.rows

        def parquet(run: int) -> None:
            df.write.mode("overwrite").parquet(str(work / f"parquet-{run}"))

        def noop(run: int) -> None:
            df.write.format(NOOP_FORMAT).mode("append").save()

        def quorumlog(kind: str, exactly_once: bool = False):
            def write(run: int) -> None:
                topic = f"bench-{kind}{'-eos' if exactly_once else ''}-{run}"
                create_topic(bootstrap, topic, args.partitions)
                writer = df.write.format("quorumlog").mode("append")
                writer = writer.option("bootstrap.servers", bootstrap).option("topic", topic)
                for key, value in producer_options.items():
                    writer = writer.option(key, value)
                writer = writer.option("exactlyOnce", str(exactly_once).lower())
                writer.option("writer", kind).save()

            return write

        chosen = {j.strip() for j in args.jobs.split(",")}
        every = {  # --jobs name -> (report name, job)
            "parquet": ("parquet", parquet),
            "arrow": ("quorumlog arrow", quorumlog("arrow")),
            "eos": ("quorumlog arrow eos", quorumlog("arrow", exactly_once=True)),
            "row": ("quorumlog row", quorumlog("row")),
            "no-op": ("python no-op", noop),
        }
        unknown = chosen - set(every)
        if unknown:
            parser.error(f"unknown --jobs {sorted(unknown)}; known: {', '.join(every)}")
        jobs = {name: job for key, (name, job) in every.items() if key in chosen}
        if "eos" in chosen:
            warm_transactions(bootstrap)
        for job in jobs.values():  # warm up: Python workers, imports, connections
            job(-1)
        # Repeats interleaved (every job once, then again): a change of the box's load
        # during the run hits all jobs alike instead of whichever ran then.
        best = dict.fromkeys(jobs, float("inf"))
        load = dict.fromkeys(jobs, 0.0)  # the 1-minute load average after the best run
        cpu: dict[str, dict[str, float]] = {}  # per job: its leanest run's CPU by kind
        idle_rate = _idle_node_cpu_rate()
        for run in range(args.repeat):
            for name, job in jobs.items():
                before = process_cpu.snapshot()
                seconds = timed(lambda j=job, r=run: j(r))
                used = process_cpu.difference(before, process_cpu.snapshot())
                used["nodes"] = max(0.0, used.get("nodes", 0.0) - idle_rate * seconds)
                if seconds < best[name]:
                    best[name], load[name] = seconds, os.getloadavg()[0]
                if name not in cpu or sum(used.values()) < sum(cpu[name].values()):
                    cpu[name] = used
        session.stop()
    finally:
        if cluster is not None:
            cluster.stop_all()
        shutil.rmtree(work, ignore_errors=True)

    keys = "no keys" if args.no_keys else "16-byte keys (murmur2 partitions)"
    print(f"\n{args.rows} rows x {VALUE_BYTES}-byte values, {keys}, {args.master}, "
          f"{args.partitions} partitions (RF 1, 3 nodes), best of {args.repeat}")  # fmt: skip
    print(
        f"| {'job':<20} | {'seconds':>8} | {'rows/s':>10} | {'MB/s':>6} | {'vs parquet':>10} "
        f"| {'load':>5} |"
    )
    print(
        "|"
        + "|".join(
            ["-" * 22, "-" * 9 + ":", "-" * 11 + ":", "-" * 7 + ":", "-" * 11 + ":", "-" * 6 + ":"]
        )
        + "|"
    )
    emit("spark_write", [
        {"job": name, "rows": args.rows, "seconds": seconds, "rows_per_s": args.rows / seconds,
         "mb_per_s": args.rows * VALUE_BYTES / seconds / 1e6,
         "vs_parquet": best.get("parquet", 0) / seconds, "load_average": load[name],
         "cpu_seconds": {kind: round(used, 3) for kind, used in sorted(cpu[name].items())}}
        for name, seconds in best.items()
    ])  # fmt: skip
    for name, seconds in best.items():
        rate = args.rows / seconds
        print(
            f"| {name:<20} | {seconds:>8.2f} | {rate:>10,.0f} | "
            f"{rate * VALUE_BYTES / 1e6:>6.1f} | {best.get('parquet', 0) / seconds:>10.2f} "
            f"| {load[name]:>5.1f} |"
        )

    per_million = 1e6 / args.rows
    print(f"\nCPU seconds per 1 M rows (each job's leanest run; nodes less their idle "
          f"{idle_rate:.2f} s/s)")  # fmt: skip
    kinds = ["jvm", "python workers", "nodes", "driver"]
    print("| " + " | ".join([f"{'job':<20}", *(f"{k:>14}" for k in kinds), f"{'total':>6}"]) + " |")
    print("|" + "|".join(["-" * 22, *("-" * 15 + ":" for _ in kinds), "-" * 7 + ":"]) + "|")
    for name, used in cpu.items():
        cells = [f"{used.get(k, 0.0) * per_million:>14.2f}" for k in kinds]
        total = sum(used.values()) * per_million
        print("| " + " | ".join([f"{name:<20}", *cells, f"{total:>6.2f}"]) + " |")


if __name__ == "__main__":
    main()
