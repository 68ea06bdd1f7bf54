"""bench/results/REPORT.md and its PNG plots, from the rows the benchmarks emitted.

`write_report(sections, out_dir)` takes `{section: rows}` (bench/rows.py: each script's rows
as data) and writes REPORT.md -- one Markdown table per benchmark plus the machine it ran
on -- and one PNG bar chart per comparison (matplotlib, the `bench` extra; skipped with a
note when it is missing). A benchmark that failed or did not run leaves its section out.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

Rows = list[dict]


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages / 2**30:.1f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = "unknown"
    return {
        "nproc": str(os.cpu_count()),
        "CPU": cpu,
        "memory": memory,
        "Python": sys.version.split()[0],
        "OS": f"{platform.system()} {platform.release()}",
    }


def _numeric(cell: object) -> bool:
    """A number, a ratio ("3.1x"), or an empty/"-" cell: right-aligned columns."""
    text = str(cell).replace(",", "").replace(".", "", 1).removesuffix("x")
    return text.isdigit() or text in ("-", "")


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table; columns of numbers are right-aligned."""
    aligns = [
        "---:" if rows and all(_numeric(row[i]) for row in rows) else "---"
        for i in range(len(headers))
    ]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _n(value: object, digits: int = 0) -> str:
    if value is None or value == "":
        return "-"
    try:
        return f"{float(value):,.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def _ms_list(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    ms = [s * 1000 for s in seconds]
    return f"median {statistics.median(ms):,.0f} ms, max {max(ms):,.0f} ms (n={len(ms)})"


def _broker(rows: Rows) -> str:
    return table(["server", "producer processes", "records/s", "MB/s", "vs protocol-only limit"],
                 [[r["server"], str(r.get("producers", 1)), _n(r["records_per_s"]),
                   _n(r["mb_per_s"], 1), _n(r["vs_limit"], 2)] for r in rows])  # fmt: skip


CLIENT_PEERS = ("aiokafka", "kafka-python", "confluent")


def _clients(rows: Rows) -> str:
    """Records/s (median of the rounds), latency, client CPU per record, and our per-record
    and bulk sends as multiples of each peer's records/s at the same acks."""
    rates = {(r.get("acks"), r.get("client")): r.get("records_per_s") for r in rows}
    body = []
    for r in rows:
        if "error" in r:
            body.append([r.get("acks"), r.get("client"), f"failed: {r['error']}"] + [""] * 7)
            continue
        ours = str(r.get("client")).startswith("quorumlog")
        ratios = []
        for peer in CLIENT_PEERS:
            peer_rate = rates.get((r.get("acks"), peer))
            ratios.append(_n(r["records_per_s"] / peer_rate, 2) + "x" if ours and peer_rate else "")
        body.append([r.get("acks"), r.get("client"), _n(r.get("records_per_s")),
                     _n(r.get("p50_ms"), 1), _n(r.get("p99_ms"), 1),
                     _n(r.get("cpu_us_per_record"), 2), *ratios])  # fmt: skip
    return table(["acks", "client", "records/s", "p50 ms", "p99 ms", "client CPU us/record",
                  *(f"ours vs {peer}" for peer in CLIENT_PEERS)], body)  # fmt: skip


def _replication(rows: Rows) -> str:
    return table(["setup", "records/s", "MB/s", "1-record latency p50 ms", "p99 ms"],
                 [[r["setup"], _n(r["records_per_s"]), _n(r["mb_per_s"], 1),
                   _n(r.get("latency_p50_ms"), 2), _n(r.get("latency_p99_ms"), 2)]
                  for r in rows])  # fmt: skip


def _partition_scale(rows: Rows) -> str:
    return table(["partitions (RF 3)", "create s", "until every ISR full s",
                  "first acks=all p50 ms", "p99 ms", "max ms", "all acked s",
                  "idle CPU % (3 nodes)"],
                 [[_n(r["partitions"]), f"skipped: {r['skipped']}", "", "", "", "", "", ""]
                  if "skipped" in r else
                  [_n(r["partitions"]), _n(r["create_s"], 1), _n(r["isr_full_s"], 1),
                   _n(r["first_ack_p50_ms"]), _n(r["first_ack_p99_ms"]),
                   _n(r["first_ack_max_ms"]), _n(r["all_acked_s"], 1), _n(r["idle_cpu_pct"])]
                  for r in rows])  # fmt: skip


def _e2e_latency(rows: Rows) -> str:
    peak = f" (peak {_n(rows[0]['peak_per_s'])}/s)" if rows else ""
    return table(["load", "linger.ms", "records/s", "p50 ms", "p99 ms", "p99.9 ms",
                  "acked p50 ms", "acked p99 ms", "request rtt p50 / p99 ms", "queue p99 ms",
                  "nodes CPU (% of a core)", "nodes CPU ms/record", "client CPU", "load avg"],
                 [[r["load"] + (peak if "peak" in r["load"] else ""),
                   "-" if r.get("linger_ms") is None else f"{r['linger_ms']:g}",
                   _n(r["rate_per_s"]),
                   _n(r["p50_ms"], 1), _n(r["p99_ms"], 1), _n(r["p999_ms"], 1),
                   _n(r.get("ack_p50_ms"), 1), _n(r.get("ack_p99_ms"), 1),
                   f"{_n(r.get('rtt_p50_ms'), 1)} / {_n(r.get('rtt_p99_ms'), 1)}",
                   _n(r.get("queue_p99_ms"), 1), _n(r.get("nodes_cpu_pct")),
                   _n(r.get("nodes_cpu_ms_per_record"), 2),
                   _n(r.get("client_cpu_pct")),
                   _n(r.get("load_avg_1m"), 1)]
                  for r in rows])  # fmt: skip


def _consume(rows: Rows) -> str:
    return table(["side", "records/s", "vs produce"],
                 [[r["side"], _n(r["records_per_s"]), f"{r['vs_produce']:.2f}x"]
                  for r in rows])  # fmt: skip


def _failover(sections: dict[str, Rows]) -> str:
    body = []
    for row in sections.get("failover", []):
        killed = "active controller" if row.get("killed") == "controller" else "partition leader"
        kill = f"{killed} kill -9 ({row['case']}, n={row['kills']})"
        body.append([f"{kill} -> new leader (or ISR without it) committed",
                     f"median {row['elected_median_s'] * 1000:,.0f} ms, "
                     f"max {row['elected_max_s'] * 1000:,.0f} ms"])  # fmt: skip
        if "controller_median_s" in row:
            body.append([f"{kill} -> new controller active",
                         f"median {row['controller_median_s'] * 1000:,.0f} ms, "
                         f"max {row['controller_max_s'] * 1000:,.0f} ms"])  # fmt: skip
        for client, (median_s, max_s) in row["first_ack_s"].items():
            body.append(
                [
                    f"{kill} -> first acks=all ack, {client}",
                    f"median {median_s * 1000:,.0f} ms, max {max_s * 1000:,.0f} ms",
                ]
            )
    for row in sections.get("metadata_failover", []):
        body.append(["controller kill -9 -> new Raft leader", _ms_list(row["elected_s"])])
        body.append(["controller kill -9 -> first metadata commit", _ms_list(row["committed_s"])])
    return table(["fail-over", "time"], body)


def _restart(rows: Rows) -> str:
    body = []
    for r in rows:
        if r["part"] == "metadata":
            body.append([f"{_n(r['records'])} metadata records, {_n(r['tail_records'])} after "
                         "the checkpoint", "clean stop / kill -9 / first start",
                         f"{r['after_clean_stop_s']:.1f} / {r['after_kill9_s']:.1f} / "
                         f"{r['first_start_s']:.1f} s"])  # fmt: skip
        else:
            body.append([f"{r['log_gb']:g} GB partition log, {_n(r['unflushed_mb'])} MB written "
                         "since the last clean start", r["case"],
                         f"{r['ready_s']:.1f} s (log recovery {r['recovery_s']:.1f} s)"])  # fmt: skip
    return table(["node", "restart", "to READY"], body)


def _metadata(rows: Rows) -> str:
    return table(["case", "records/s", "p50 ms", "p99 ms", "commits"],
                 [[r["case"], _n(r.get("records_per_s")), _n(r.get("p50_ms"), 1),
                   _n(r.get("p99_ms"), 1), _n(r.get("proposals"))] for r in rows])  # fmt: skip


SPARK_TARGETS = (("quorumlog arrow", "exactlyOnce off", 1.0),
                 ("quorumlog arrow eos", "exactlyOnce on", 0.8))  # issue 17  # fmt: skip


def _spark_cpu(row: dict) -> str:
    """The job's CPU seconds per 1 M rows by kind (bench/process_cpu.py), '' if not taken."""
    cpu = row.get("cpu_seconds")
    if not cpu:
        return ""
    per = 1e6 / row["rows"]
    kinds = [cpu.get(kind, 0.0) * per for kind in ("jvm", "python workers", "nodes")]
    return " / ".join(f"{k:.2f}" for k in kinds) + f" ({sum(cpu.values()) * per:.2f})"


def _spark(rows: Rows) -> str:
    ratios = {r["job"]: r["vs_parquet"] for r in rows if r.get("vs_parquet")}
    summary = [f"Arrow writer, {label}: {ratios[job]:.2f}x Parquet (target >= {target}x)"
               for job, label, target in SPARK_TARGETS if job in ratios]  # fmt: skip
    body = table(["job", "rows", "seconds", "rows/s", "MB/s", "vs parquet", "load average",
                  "CPU s per 1 M rows: JVM / Python / nodes (total)"],
                 [[r["job"], _n(r["rows"]), _n(r["seconds"], 2), _n(r["rows_per_s"]),
                   _n(r["mb_per_s"], 1), _n(r["vs_parquet"], 2),
                   _n(r.get("load_average"), 1), _spark_cpu(r)]
                  for r in rows])  # fmt: skip
    return "\n".join(f"- {line}" for line in summary) + ("\n\n" if summary else "") + body


def _log(rows: Rows) -> str:
    body = []
    for r in rows:
        log, buffered, syscall = r["log_mb_per_s"], r["buffered_mb_per_s"], r["os_write_mb_per_s"]
        body.append([r["batch_bytes"], r["op"], _n(r["mb"]), _n(log), _n(buffered),
                     _n(log / buffered, 2), _n(syscall), _n(log / syscall, 2)])  # fmt: skip
    return table(["batch bytes", "op", "MB", "log MB/s", "buffered file MB/s", "log / buffered",
                  "one os.write per batch MB/s", "log / os.write"], body)  # fmt: skip


# (title, sections needed, Markdown builder taking the sections)
def _compat(rows: Rows) -> str:
    """`make compat`'s last run (bench/compat.py): pass rates of peers' own test suites."""
    lines = []
    for r in rows:
        ran = r["passed"] + r["failed"]
        rate = f"{100 * r['passed'] / ran:.0f}%" if ran else "-"
        state = f"not run: {r['not_run']}" if r["not_run"] else rate
        lines.append([r["suite"], r["passed"], r["failed"], r["skipped"], state])
    date = rows[0].get("date", "") if rows else ""
    return (f"From `make compat` ({date}); skipped = the suite's own filter (mock-cluster, "
            "local-only, SSL/SASL tests).\n\n" +
            table(["suite", "passed", "failed", "skipped", "pass rate"], lines))  # fmt: skip


SECTIONS: list[tuple[str, tuple[str, ...], Callable[[dict[str, Rows]], str]]] = [
    ("Broker ingest vs protocol-only limit (confluent-kafka, acks=1)", ("broker_produce",),
     lambda s: _broker(s["broker_produce"])),
    ("acks=all (RF 3) vs acks=1 (RF 1), one confluent-kafka producer", ("replication_throughput",),
     lambda s: _replication(s["replication_throughput"])),
    ("Producer clients against a quorumlog broker", ("producer_clients",),
     lambda s: _clients(s["producer_clients"])),
    ("Partition scale: one topic of N partitions, RF 3, `quorumlog up` defaults",
     ("partition_scale",), lambda s: _partition_scale(s["partition_scale"])),
    ("End-to-end latency: produce (acks=all, RF 3) to consume, confluent-kafka both sides",
     ("e2e_latency",), lambda s: _e2e_latency(s["e2e_latency"])),
    ("Consume throughput beside the produce rate of the same run (3 nodes, RF 3, defaults)",
     ("consume_throughput",), lambda s: _consume(s["consume_throughput"])),
    ("Fail-over times (`failover` rows: 3 nodes on `quorumlog up` defaults, confluent-kafka "
     "defaults but acks=all)", ("failover", "metadata_failover"),
     _failover),
    ("Restart: a one-node cluster on `quorumlog up` defaults, seconds until READY",
     ("restart",), lambda s: _restart(s["restart"])),
    ("Metadata commit latency (quorum.raft vs raw pysyncobj)", ("metadata_commit",),
     lambda s: _metadata(s["metadata_commit"])),
    ("Spark write throughput (quorumlog data source vs Parquet)", ("spark_write",),
     lambda s: _spark(s["spark_write"])),
    ("Log append/read vs plain file writes", ("log_throughput",),
     lambda s: _log(s["log_throughput"])),
    ("Peers' own test suites against a 3-node cluster (`make compat`)", ("compat",),
     lambda s: _compat(s["compat"])),
]  # fmt: skip


def _bar(out_dir: Path, name: str, title: str, labels: list[str], values: list[float],
         unit: str) -> str | None:  # fmt: skip
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(7, 0.5 * len(labels) + 1.5))
    axes.barh(labels, values, color="#4a7ab5")
    axes.invert_yaxis()
    axes.set_xlabel(unit)
    axes.set_title(title)
    figure.tight_layout()
    figure.savefig(out_dir / f"{name}.png", dpi=100)
    plt.close(figure)
    return f"{name}.png"


def plots(sections: dict[str, Rows], out_dir: Path) -> list[str]:
    made = []
    specs = [
        ("broker_produce", "broker ingest", lambda r: r["server"], "records_per_s"),
        ("replication_throughput", "acks=all RF3 vs acks=1 RF1", lambda r: r["setup"],
         "records_per_s"),
        ("producer_clients", "producer clients", lambda r: f"{r['client']} acks={r['acks']}",
         "records_per_s"),
        ("spark_write", "Spark write", lambda r: r["job"], "rows_per_s"),
        ("log_throughput", "log vs plain file", lambda r: f"{r['op']} {r['batch_bytes']} B",
         "log_mb_per_s"),
        ("e2e_latency", "end-to-end latency p99, acks=all RF 3",
         lambda r: f"{r['load']} linger {r.get('linger_ms', 0):g}", "p99_ms"),
        ("consume_throughput", "consume vs produce", lambda r: r["side"], "records_per_s"),
    ]  # fmt: skip
    restart = sections.get("restart", [])
    if restart:
        made.append(_bar(out_dir, "restart", "restart to READY", [
            f"meta {r['records']:,} tail {r['tail_records']:,} kill -9" if r["part"] == "metadata"
            else f"log {r['log_gb']:g} GB +{r['unflushed_mb']} MB {r['case']}" for r in restart
        ], [r["after_kill9_s"] if r["part"] == "metadata" else r["ready_s"] for r in restart],
            "seconds"))  # fmt: skip
    for section, title, label, key in specs:
        rows = [r for r in sections.get(section, []) if r.get(key) is not None]
        if rows:
            unit = ("MB/s" if key.endswith("mb_per_s") else "ms" if key.endswith("_ms")
                    else key.replace("_per_s", "/s"))  # fmt: skip
            made.append(_bar(out_dir, section, title, [label(r) for r in rows],
                             [float(r[key]) for r in rows], unit))  # fmt: skip
    return [m for m in made if m]


def write_report(sections: dict[str, Rows], out_dir: Path, *, quick: bool) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = ["# quorumlog benchmark report", ""]
    parts.append("Run by `make bench` (`python -m bench" + (" --quick`" if quick else "`") +
                 "). Peers are measured in the same run on the same machine: read the ratios; "
                 "the absolute numbers move with the machine's load.")  # fmt: skip
    parts += ["", "## Machine", "", table(["", ""], [[k, v] for k, v in machine().items()])]
    for title, needed, build in SECTIONS:
        if any(name in sections for name in needed):
            have = {name: sections.get(name, []) for name in needed}
            parts += ["", f"## {title}", "", build(have)]
    images = plots(sections, out_dir)
    if images:
        parts += ["", "## Plots", ""] + [f"![{name}]({name})" for name in images]
    else:
        parts += ["", "(no plots: matplotlib is not installed)"]
    path = out_dir / "REPORT.md"
    path.write_text("\n".join(parts) + "\n")
    return path
