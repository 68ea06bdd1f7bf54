"""bench/report.py: REPORT.md tables and PNG plots from the rows the benchmarks emit."""

from __future__ import annotations

import json

from bench.__main__ import read_sections
from bench.failover import summary as failover_summary
from bench.log_throughput import ROW_KEYS
from bench.report import write_report
from bench.rows import ENV_VAR, emit


def test_report_from_emitted_rows(tmp_path, monkeypatch):
    rows_path = tmp_path / "rows.jsonl"
    monkeypatch.setenv(ENV_VAR, str(rows_path))
    emit("broker_produce", [
        {"server": "limit", "records_per_s": 200000.0, "mb_per_s": 20.0, "vs_limit": 1.0},
        {"server": "broker", "records_per_s": 100000.0, "mb_per_s": 10.0, "vs_limit": 0.5},
    ])  # fmt: skip
    emit("restart", [
        {"part": "metadata", "records": 1000101, "tail_records": 100000, "build_s": 90.0,
         "first_start_s": 12.5, "after_kill9_s": 12.25, "after_clean_stop_s": 12.0},
        {"part": "log", "log_gb": 10.0, "case": "after kill -9", "unflushed_mb": 1000,
         "ready_s": 6.5, "recovery_s": 4.25},
    ])  # fmt: skip
    # the rows bench/failover.py emits, made by its own summary from its rounds
    rounds = [
        {
            "victim_was_controller": False,
            "elected_s": elected,
            "first_ack_s": {"confluent-kafka": ack, "quorumlog": 0.2},
        }
        for elected, ack in ((0.115, 1.621), (0.127, 1.704), (0.110, 0.15))
    ]
    rounds.append(
        {
            "victim_was_controller": True,
            "controller_s": 0.8,
            "elected_s": 0.9,
            "first_ack_s": {"confluent-kafka": 0.95, "quorumlog": 0.94},
        }
    )
    emit("failover", failover_summary(rounds))  # fmt: skip
    # `--victim controller`: the active controller each round, a follower of the partition here
    controller_rounds = [
        {"victim_was_controller": True, "victim_led": False, "controller_s": 0.35,
         "elected_s": 0.36, "first_ack_s": {"confluent-kafka": 0.4, "quorumlog": 0.41}},
    ]  # fmt: skip
    emit("failover", [{**row, "killed": "controller"}
                      for row in failover_summary(controller_rounds)])  # fmt: skip
    log_row = (1070, "append", 50, 100.0, 400.0, 200.0)
    emit("log_throughput", [dict(zip(ROW_KEYS, log_row, strict=True))])
    emit("producer_clients", [
        {"acks": "1", "client": name, "records_per_s": rate, "p50_ms": 5.0, "p99_ms": 9.0,
         "cpu_us_per_record": cpu}
        for name, rate, cpu in (("quorumlog", 300000.0, 3.0), ("aiokafka", 100000.0, 10.0),
                                ("kafka-python", 30000.0, 40.0), ("confluent", 300000.0, 3.0))
    ])  # fmt: skip
    rows_path.open("a").write(json.dumps({"section": "metadata_failover", "rows": [
        {"elected_s": [0.5], "committed_s": [0.75]}]}) + "\n")  # fmt: skip
    emit("partition_scale", [
        {"partitions": 1000, "create_s": 2.5, "isr_full_s": 0.1, "first_ack_p50_ms": 1500.0,
         "first_ack_p99_ms": 2900.0, "first_ack_max_ms": 3000.0, "all_acked_s": 3.1,
         "idle_cpu_pct": 9.0},
        {"partitions": 10000, "skipped": "needs ~30,500 file descriptors per node"},
    ])  # fmt: skip
    emit("e2e_latency", [{"load": "10% of peak", "rate_per_s": 18000.0, "peak_per_s": 180000.0,
                          "received": 10, "sent": 10, "p50_ms": 16.1, "p99_ms": 44.1,
                          "p999_ms": 59.9, "nodes_cpu_pct": 61.0, "client_cpu_pct": 70.0},
                         {"load": "1,000/s", "rate_per_s": 1000.0, "peak_per_s": 180000.0,
                          "received": 10, "sent": 10, "p50_ms": 2.1, "p99_ms": 4.9,
                          "p999_ms": 6.0, "ack_p50_ms": 1.5, "ack_p99_ms": 4.0,
                          "nodes_cpu_pct": 20.0, "nodes_cpu_ms_per_record": 1.4,
                          "client_cpu_pct": 9.0, "linger_ms": 0.5, "rtt_p50_ms": 1.2,
                          "rtt_p99_ms": 6.5, "queue_p99_ms": 7.0,
                          "load_avg_1m": 2.5}])  # fmt: skip
    emit("consume_throughput", [
        {"side": "produce (confluent-kafka, acks=all)", "records_per_s": 700000.0,
         "vs_produce": 1.0},
        {"side": "consume (our FetchClient)", "records_per_s": 350000.0, "vs_produce": 0.5},
    ])  # fmt: skip
    report = write_report(read_sections(rows_path), tmp_path / "results", quick=True)
    text = report.read_text()
    assert "| broker | 1 | 100,000 | 10.0 | 0.50 |" in text
    assert ("| 1,000,101 metadata records, 100,000 after the checkpoint | clean stop / kill -9 / "
            "first start | 12.0 / 12.2 / 12.5 s |") in text  # fmt: skip
    assert ("| 10 GB partition log, 1,000 MB written since the last clean start | after kill -9 "
            "| 6.5 s (log recovery 4.2 s) |") in text  # fmt: skip
    assert (tmp_path / "results" / "restart.png").stat().st_size > 1000
    assert (tmp_path / "results" / "e2e_latency.png").stat().st_size > 1000
    assert (tmp_path / "results" / "consume_throughput.png").stat().st_size > 1000
    assert "controller kill -9 -> first metadata commit | median 750 ms" in text
    assert ("| partition leader kill -9 (leader only, n=3) -> new leader (or ISR without it) "
            "committed | median 115 ms, max 127 ms |") in text  # fmt: skip
    assert ("| active controller kill -9 (active controller, a follower, n=1) -> new controller "
            "active | median 350 ms, max 350 ms |") in text  # fmt: skip
    assert ("(leader only, n=3) -> first acks=all ack, confluent-kafka | median 1,621 ms, "
            "max 1,704 ms |") in text  # fmt: skip
    assert "(leader only, n=3) -> first acks=all ack, quorumlog | median 200 ms" in text
    assert ("(leader and active controller, n=1) -> new controller active | median 800 ms, "
            "max 800 ms |") in text  # fmt: skip
    assert "(all kills, n=4) -> new controller active" not in text
    assert "| nproc |" in text and "| Python |" in text
    assert "| 1070 | append | 50 | 100 | 400 | 0.25 | 200 | 0.50 |" in text
    assert "| 1 | quorumlog | 300,000 | 5.0 | 9.0 | 3.00 | 3.00x | 10.00x | 1.00x |" in text
    assert "| 1 | aiokafka | 100,000 | 5.0 | 9.0 | 10.00 |  |  |  |" in text
    assert (
        "| 10% of peak (peak 180,000/s) | - | 18,000 | 16.1 | 44.1 | 59.9 | - | - | - / - | - | 61 | - "
        "| 70 | - |" in (text)
    )
    assert (
        "| 1,000/s | 0.5 | 1,000 | 2.1 | 4.9 | 6.0 | 1.5 | 4.0 | 1.2 / 6.5 | 7.0 | 20 | 1.40 | 9 "
        "| 2.5 |"
    ) in text
    assert "| 10,000 | skipped: needs ~30,500 file descriptors per node |" in text
    assert "| 1,000 | 2.5 | 0.1 | 1,500 | 2,900 | 3,000 | 3.1 | 9 |" in text
    assert (tmp_path / "results" / "broker_produce.png").stat().st_size > 1000
    assert "| consume (our FetchClient) | 350,000 | 0.50x |" in text
    assert "Spark" not in text  # a benchmark that did not run leaves its section out


def test_report_includes_the_last_compat_run(tmp_path):
    from bench.__main__ import compat_section

    assert compat_section(tmp_path / "compat.json") == {}
    (tmp_path / "compat.json").write_text(json.dumps({"date": "2026-11-26 06:00 UTC", "rows": [
        {"suite": "librdkafka 2.0.2 test-runner", "passed": 90, "failed": 10, "skipped": 40,
         "not_run": "", "seconds": 900, "failures": [], "detail": {}},
        {"suite": "confluent-kafka-python", "passed": 0, "failed": 0, "skipped": 0,
         "not_run": "tests missing", "seconds": 0, "failures": [], "detail": {}},
    ]}))  # fmt: skip
    report = write_report(compat_section(tmp_path / "compat.json"), tmp_path, quick=False)
    text = report.read_text()
    assert "| librdkafka 2.0.2 test-runner | 90 | 10 | 40 | 90% |" in text
    assert "not run: tests missing" in text and "2026-11-26 06:00 UTC" in text


def test_spark_section_states_both_ratios_against_their_targets():
    from bench.report import _spark

    rows = [{"job": job, "rows": 10, "seconds": 1.0, "rows_per_s": 10.0, "mb_per_s": 0.001,
             "vs_parquet": ratio}
            for job, ratio in (("parquet", 1.0), ("quorumlog arrow", 0.93),
                               ("quorumlog arrow eos", 0.71))]  # fmt: skip
    text = _spark(rows)
    assert "exactlyOnce off: 0.93x Parquet (target >= 1.0x)" in text
    assert "exactlyOnce on: 0.71x Parquet (target >= 0.8x)" in text
    assert "| quorumlog arrow eos |" in text


def test_spark_section_gives_cpu_seconds_per_million_rows_by_kind():
    from bench.report import _spark

    cpu = {"jvm": 0.3, "python workers": 0.25, "nodes": 0.1, "driver": 0.05}
    rows = [{"job": "quorumlog arrow", "rows": 500_000, "seconds": 1.0, "rows_per_s": 5e5,
             "mb_per_s": 50.0, "vs_parquet": 0.9, "cpu_seconds": cpu}]  # fmt: skip
    assert "| 0.60 / 0.50 / 0.20 (1.40) |" in _spark(rows)
