"""`make bench`: run every benchmark in sequence and print their tables.

Each benchmark is its own script (run it alone for more options); this runs them one after
another with sizes that finish in a few minutes on a 2-core machine. `--quick` shrinks them
further. Benchmarks compare against a peer measured in the same run, so the ratios are what to
read, not the absolute numbers (which move with the machine's load).
"""

from __future__ import annotations

import subprocess
import sys
import time

BENCHMARKS = [
    ("log append/read vs plain file", ["-m", "bench.log_throughput", "--total-mb", "50"]),
    ("metadata commits vs raw pysyncobj", ["bench/metadata_commit.py"]),
    ("broker ingest vs protocol-only limit", ["-m", "bench.broker_produce", "--count", "200000"]),
    ("producer clients", ["-m", "bench.producer_clients", "--records", "100000"]),
]
QUICK_ARGS = {
    "bench.log_throughput": ["--total-mb", "10", "--repeat", "1"],
    "bench/metadata_commit.py": ["--quick"],
    "bench.broker_produce": ["--count", "50000", "--repeat", "1"],
    "bench.producer_clients": ["--records", "20000"],
}


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    failures = 0
    for title, command in BENCHMARKS:
        target = command[1] if command[0] == "-m" else command[0]
        args = command[: 2 if command[0] == "-m" else 1]
        args += QUICK_ARGS[target] if quick else command[len(args) :]
        print(f"\n## {title}\n", flush=True)
        start = time.monotonic()
        code = subprocess.call([sys.executable, *args])
        print(f"\n({time.monotonic() - start:.0f} s, exit {code})", flush=True)
        failures += code != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
