"""Append and read throughput of UnifiedLog beside a plain Python file loop (the limit).

For each batch size, the same pre-built RecordBatch v2 bytes are
  * appended with `UnifiedLog.append_as_leader` (header + CRC-32C validation, offset and leader
    epoch patching, roll checks, sparse indexing, producer state, pwrite), then read back with
    `UnifiedLog.read` in 1 MiB fetches from offset 0 to the log end offset;
  * written with `f.write(batch)` in a loop to a plain file, then read back with `f.read(1 MiB)`.
Neither side fsyncs (Kafka's default flush policy), so both measure the page cache path. The
table prints MB/s (10**6 bytes) and log / plain. Target: the log reaches at least half.

    python -m bench.log_throughput [--total-mb 100] [--sizes 1024,16384,102400] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from bench.rows import emit
from log.records.builder import Record, build_batch
from log.storage.config import LogConfig
from log.storage.log_loader import load_log

READ_MAX_BYTES = 1 << 20


def make_batch(batch_bytes: int) -> bytes:
    value_bytes = min(1000, batch_bytes)
    count = max(1, batch_bytes // (value_bytes + 10))
    value = os.urandom(value_bytes)
    return build_batch([Record(value, timestamp_ms=1_700_000_000_000)] * count)


def bench_log(directory: str, batch: bytes, batch_count: int) -> tuple[float, float, int]:
    log = load_log(os.path.join(directory, "bench-0"), LogConfig())
    start = time.perf_counter()
    for i in range(batch_count):
        log.append_as_leader(batch, 0, i)
    append_s = time.perf_counter() - start
    start = time.perf_counter()
    offset = 0
    read_bytes = 0
    end = log.log_end_offset
    while offset < end:
        fetched = log.read(offset, READ_MAX_BYTES)
        read_bytes += len(fetched.records)
        assert fetched.next_fetch_offset > offset
        offset = fetched.next_fetch_offset
    read_s = time.perf_counter() - start
    log.close()
    return append_s, read_s, read_bytes


def bench_plain(directory: str, batch: bytes, batch_count: int) -> tuple[float, float, int]:
    path = os.path.join(directory, "plain.bin")
    start = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(batch_count):
            fh.write(batch)
    append_s = time.perf_counter() - start
    start = time.perf_counter()
    read_bytes = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(READ_MAX_BYTES):
            read_bytes += len(chunk)
    read_s = time.perf_counter() - start
    return append_s, read_s, read_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=100, help="MB written per batch size")
    parser.add_argument("--sizes", default="1024,16384,102400", help="batch sizes in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; best time kept")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        batch = make_batch(size)
        batch_count = max(1, args.total_mb * 1_000_000 // len(batch))
        total = batch_count * len(batch)
        best = [float("inf")] * 4  # plain append, plain read, log append, log read
        for _ in range(args.repeat):  # interleaved, best of N: the machine is shared
            directory = tempfile.mkdtemp(prefix="quorumlog-bench-")
            try:
                plain_append, plain_read, plain_bytes = bench_plain(directory, batch, batch_count)
                log_append, log_read, log_bytes = bench_log(directory, batch, batch_count)
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            assert plain_bytes == log_bytes == total
            runs = (plain_append, plain_read, log_append, log_read)
            best = [min(b, r) for b, r in zip(best, runs, strict=True)]
        plain_append, plain_read, log_append, log_read = best
        for op, log_s, plain_s in (
            ("append", log_append, plain_append),
            ("read", log_read, plain_read),
        ):
            log_mbs = total / log_s / 1e6
            plain_mbs = total / plain_s / 1e6
            rows.append((len(batch), op, total / 1e6, log_mbs, plain_mbs, log_mbs / plain_mbs))
    header = (
        f"{'batch bytes':>11} {'op':>6} {'MB':>7} {'log MB/s':>9} {'plain MB/s':>10} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for batch_bytes, op, mb, log_mbs, plain_mbs, ratio in rows:
        print(
            f"{batch_bytes:>11} {op:>6} {mb:>7.0f} {log_mbs:>9.0f} {plain_mbs:>10.0f} {ratio:>6.2f}"
        )
    keys = ("batch_bytes", "op", "mb", "log_mb_per_s", "plain_mb_per_s", "ratio")
    emit("log_throughput", [dict(zip(keys, row, strict=True)) for row in rows])


if __name__ == "__main__":
    main()
