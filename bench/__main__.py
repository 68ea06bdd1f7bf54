"""`make bench`: run every benchmark in sequence, print their tables, write the report.

Each benchmark is its own script (run it alone for more options); this runs them one after
another with sizes that finish in a few minutes on a 2-core machine. `--quick` shrinks them
further. Each script also hands its rows over as data (bench/rows.py, through the file named
by QUORUMLOG_BENCH_JSON), from which bench/report.py writes bench/results/REPORT.md and PNG
plots (git-ignored). Benchmarks compare against a peer measured in the same run, so the
ratios are what to read, not the absolute numbers (which move with the machine's load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import write_report
from bench.rows import ENV_VAR

RESULTS_DIR = Path(__file__).resolve().parent / "results"
BENCHMARKS = [
    ("log append/read vs plain file", ["-m", "bench.log_throughput", "--total-mb", "50"]),
    ("metadata commits vs raw pysyncobj", ["bench/metadata_commit.py"]),
    ("broker ingest vs protocol-only limit", ["-m", "bench.broker_produce", "--count", "200000"]),
    ("broker ingest, 2 producer processes",
     ["-m", "bench.broker_produce", "--count", "200000", "--repeat", "1", "--producers", "2"]),
    ("broker ingest, 4 producer processes",
     ["-m", "bench.broker_produce", "--count", "200000", "--repeat", "1", "--producers", "4"]),
    ("producer clients", ["-m", "bench.producer_clients", "--records", "100000"]),
    ("replication: acks=all vs acks=1",
     ["-m", "bench.replication", "--count", "50000"]),
    ("fail-over on quorumlog up defaults", ["-m", "bench.failover", "--kills", "10"]),
    ("fail-over of the active controller",
     ["-m", "bench.failover", "--kills", "6", "--victim", "controller"]),
    ("Spark write", ["-m", "bench.spark_write", "--rows", "1000000", "--repeat", "2"]),
    ("partition scale",
     ["-m", "bench.partition_scale", "--partitions", "1000", "5000", "10000"]),
    ("end-to-end latency, acks=all RF 3", ["-m", "bench.e2e_latency", "--seconds", "10"]),
    ("consume throughput vs produce", ["-m", "bench.consume_throughput", "--count", "500000"]),
    ("restart: 1 M metadata records, a 10 GB partition log", ["-m", "bench.restart"]),
]  # fmt: skip
QUICK_ARGS = {
    "bench.log_throughput": ["--total-mb", "10", "--repeat", "1"],
    "bench/metadata_commit.py": ["--quick"],
    "bench.broker_produce": ["--count", "50000", "--repeat", "1"],
    "bench.producer_clients": ["--records", "20000"],
    "bench.replication": ["--count", "10000"],
    "bench.failover": ["--kills", "3"],
    "bench.spark_write": ["--rows", "20000", "--repeat", "1"],
    "bench.partition_scale": ["--partitions", "1000"],
    "bench.e2e_latency": ["--seconds", "3", "--peak-count", "20000", "--shares", "0.1"],
    "bench.consume_throughput": ["--count", "100000"],
    "bench.restart": [
        "--metadata-records",
        "100000",
        "--tail-records",
        "0",
        "50000",
        "--log-gb",
        "1",
        "--unflushed-mb",
        "100",
    ],
}


def read_sections(path: Path) -> dict[str, list[dict]]:
    sections: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            sections.setdefault(entry["section"], []).extend(entry["rows"])
    return sections


def compat_section(path: Path) -> dict[str, list[dict]]:
    """The last `make compat` run's rows (bench/compat.py), if there was one."""
    if not path.exists():
        return {}
    last = json.loads(path.read_text())
    return {"compat": [{**row, "date": last["date"]} for row in last["rows"]]}


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    failures = 0
    with tempfile.TemporaryDirectory(prefix="quorumlog-bench-") as tmp:
        rows_path = Path(tmp) / "rows.jsonl"
        rows_path.touch()
        env = {**os.environ, ENV_VAR: str(rows_path)}
        for title, command in BENCHMARKS:
            target = command[1] if command[0] == "-m" else command[0]
            args = command[: 2 if command[0] == "-m" else 1]
            args += QUICK_ARGS[target] if quick else command[len(args) :]
            for kept in ("--producers", "--victim"):  # the quick run keeps what a row is about
                if quick and kept in command:
                    args += command[command.index(kept) : command.index(kept) + 2]
            print(f"\n## {title}\n", flush=True)
            start = time.monotonic()
            code = subprocess.call([sys.executable, *args], env=env)
            print(f"\n({time.monotonic() - start:.0f} s, exit {code})", flush=True)
            failures += code != 0
        sections = read_sections(rows_path)
        sections |= compat_section(RESULTS_DIR / "compat.json")
        report = write_report(sections, RESULTS_DIR, quick=quick)
    print(f"\nreport: {report}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
