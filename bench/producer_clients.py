"""Producer clients side by side: quorumlog (per record and bulk) vs aiokafka, kafka-python and
confluent-kafka, on the same broker, 100-byte records, acks=1 and acks=all.

    python -m bench.producer_clients [--broker mock|quorumlog] [--bootstrap HOST:PORT]
        [--records 100000] [--repeat 3] [--warmup-records 20000] [--clients a,b] [--json]

Each client runs in its own process through `quorumlog perf produce --json` (the same
workload for all: linger.ms=5, batch.size 16 KiB, idempotence exactly with acks=all, unkeyed
records). Fairness: first every client does one discarded warm-up run of `--warmup-records`
against its own topic (topic creation, broker caches and page cache warm for everyone); then
`--repeat` rounds, each running every client once, the order rotated by one client per round
so no client always goes first or last after another; each cell is the median of its
rounds, with the spread (min-max) beside it. The machine's load average is printed before and
after, since the clients share the CPU with the broker and anything else running.

The broker: `--broker quorumlog` (default) starts our KafkaServer in a child process
(bench/broker_produce.py's `--serve broker`: one node, in-process quorum, real storage);
`--broker mock` uses librdkafka's built-in mock cluster (one broker, in C, in this process: never
the bottleneck); `--bootstrap` any running broker. A client that fails is reported with its
error. Prints a table of records/s (median and spread), MB/s, p50/p99 latency (of the median
run) and the ratio of each client's median records/s to quorumlog's per-record send and to
confluent-kafka's, and the client's CPU per record (median; the client process's CPU over
the timed window only, every thread included -- librdkafka's, kafka-python's I/O thread --
as `perf produce --json` reports it: steadier than records/s when other work shares the
machine). For the client alone, compare `--broker mock` with the default.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.rows import emit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENTS = [
    ("quorumlog", []),
    ("quorumlog-bulk", ["--bulk"]),
    ("aiokafka", []),
    ("kafka-python", []),
    ("confluent", []),
]
CLIENT_TIMEOUT_S = 600


def start_mock_broker() -> tuple[object, str]:
    import confluent_kafka

    client = confluent_kafka.Producer(
        {"test.mock.num.brokers": 1, "bootstrap.servers": "", "log_level": 0}
    )
    brokers = client.list_topics(timeout=10).brokers
    return client, ",".join(f"{b.host}:{b.port}" for b in brokers.values())


def start_quorumlog_broker(directory: str) -> tuple[subprocess.Popen, str]:
    """Our KafkaServer in a child process (bench/broker_produce.py --serve broker)."""
    port_file = os.path.join(directory, "port")
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.broker_produce", "--serve", "broker", "--dir", directory],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file) or not open(port_file).read():
        if time.monotonic() > deadline or child.poll() is not None:
            child.kill()
            raise RuntimeError("the quorumlog broker did not start")
        time.sleep(0.05)
    return child, f"127.0.0.1:{int(open(port_file).read())}"


def run_client(
    bootstrap: str, name: str, extra: list[str], records: int, acks: str
) -> dict[str, object]:
    client = "quorumlog" if name.startswith("quorumlog") else name
    command = [
        sys.executable, "-m", "tools", "perf", "produce", "--bootstrap", bootstrap,
        "--topic", f"bench-{name}-acks{acks}", "--records", str(records), "--record-size", "100",
        "--acks", acks, "--client", client, "--json", *extra,
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, cwd=ROOT, env=env
        )
    except subprocess.TimeoutExpired:
        return {"client": name, "error": f"timed out after {CLIENT_TIMEOUT_S} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        error = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"client": name, "error": error[:160]}
    result = json.loads(lines[-1])
    result["client"] = name
    return result


def median_result(runs: list[dict[str, object]]) -> dict[str, object]:
    """The run with the median records/s, annotated with the spread of all runs."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return runs[-1]
    rates = sorted(float(r["records_per_s"]) for r in good)  # type: ignore[arg-type]
    median = statistics.median_low(rates)
    chosen = dict(next(r for r in good if float(str(r["records_per_s"])) == median))
    chosen["runs_records_per_s"] = rates
    chosen["failed_runs"] = len(runs) - len(good)
    cpus = [r["cpu_us_per_record"] for r in good if "cpu_us_per_record" in r]
    if cpus:
        chosen["cpu_us_per_record"] = statistics.median_low(cpus)  # type: ignore[type-var]
    return chosen


def table(results: list[dict[str, object]]) -> str:
    rows = [
        "| acks | client | records/s (median) | spread | MB/s | p50 ms | p99 ms "
        "| vs quorumlog send | vs confluent | client CPU us/record |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for acks in sorted({str(r["acks"]) for r in results}):
        group = [r for r in results if r["acks"] == acks]
        base = {r["client"]: r.get("records_per_s") for r in group if "error" not in r}
        for r in group:
            if "error" in r:
                rows.append(f"| {acks} | {r['client']} | failed: {r['error']} | | | | | | | |")
                continue
            rate = float(r["records_per_s"])  # type: ignore[arg-type]
            runs = r.get("runs_records_per_s") or [rate]
            spread = f"{min(runs):,.0f}-{max(runs):,.0f}"  # type: ignore[type-var]
            ratios = []
            for reference in ("quorumlog", "confluent"):
                ref = base.get(reference)
                ratios.append(f"{rate / float(ref):.2f}x" if ref else "n/a")
            rows.append(
                f"| {acks} | {r['client']} | {rate:,.0f} | {spread} | {r['mb_per_s']} | "
                f"{r['p50_ms']} | {r['p99_ms']} | {ratios[0]} | {ratios[1]} | "
                f"{r.get('cpu_us_per_record', 'n/a')} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=["quorumlog", "mock"], default="quorumlog")
    parser.add_argument("--bootstrap", help="a running broker instead of starting one")
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds per client")
    parser.add_argument("--warmup-records", type=int, default=20000, help="0: no warm-up")
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--clients", default=",".join(name for name, _ in CLIENTS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    mock: object = None
    child: subprocess.Popen | None = None
    directory = tempfile.TemporaryDirectory()
    bootstrap = args.bootstrap
    broker = f"running broker at {bootstrap}"
    if bootstrap is None and args.broker == "mock":
        mock, bootstrap = start_mock_broker()
        broker = "librdkafka mock cluster (1 broker, C)"
    elif bootstrap is None:
        child, bootstrap = start_quorumlog_broker(directory.name)
        broker = "quorumlog KafkaServer (1 node, own process)"
    wanted = args.clients.split(",")
    load_before = load_average()
    results = []
    try:
        results = run_all(bootstrap, args, wanted)
    finally:
        if child is not None and child.poll() is None:
            child.terminate()
            child.wait(30)
    directory.cleanup()
    print(
        f"{args.records} records of 100 bytes, linger.ms=5, median of {args.repeat} rounds "
        f"after a {args.warmup_records}-record warm-up per client, broker: {broker}\n"
        f"load average (1/5/15 min) before: {load_before}, after: {load_average()}, "
        f"{os.cpu_count()} CPUs\n"
    )
    print(json.dumps(results, indent=1) if args.json else table(results))
    emit("producer_clients", results)
    del mock


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def run_all(bootstrap: str, args: argparse.Namespace, wanted: list[str]) -> list[dict]:
    clients = [(name, extra) for name, extra in CLIENTS if name in wanted]
    results = []
    for acks in args.acks.split(","):
        for name, extra in clients:
            if args.warmup_records > 0:
                warm = run_client(bootstrap, name, extra, args.warmup_records, acks)
                print("warm-up", json.dumps(warm), file=sys.stderr, flush=True)
        runs: dict[str, list[dict[str, object]]] = {name: [] for name, _ in clients}
        for round_index in range(args.repeat):
            shift = round_index % len(clients)
            for name, extra in clients[shift:] + clients[:shift]:
                runs[name].append(run_client(bootstrap, name, extra, args.records, acks))
                print(json.dumps(runs[name][-1]), file=sys.stderr, flush=True)
        for name, _ in clients:
            result = median_result(runs[name])
            result["acks"] = acks
            results.append(result)
    return results


if __name__ == "__main__":
    main()
