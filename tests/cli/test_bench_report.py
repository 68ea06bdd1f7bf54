"""bench/report.py: REPORT.md tables and PNG plots from the rows the benchmarks emit."""

from __future__ import annotations

import json

from bench.__main__ import read_sections
from bench.report import write_report
from bench.rows import ENV_VAR, emit


def test_report_from_emitted_rows(tmp_path, monkeypatch):
    rows_path = tmp_path / "rows.jsonl"
    monkeypatch.setenv(ENV_VAR, str(rows_path))
    emit("broker_produce", [
        {"server": "limit", "records_per_s": 200000.0, "mb_per_s": 20.0, "vs_limit": 1.0},
        {"server": "broker", "records_per_s": 100000.0, "mb_per_s": 10.0, "vs_limit": 0.5},
    ])  # fmt: skip
    emit("replication_failover", [{"kill_to_first_ack_s": [1.5, 2.5, 2.0]}])
    rows_path.open("a").write(json.dumps({"section": "metadata_failover", "rows": [
        {"elected_s": [0.5], "committed_s": [0.75]}]}) + "\n")  # fmt: skip
    report = write_report(read_sections(rows_path), tmp_path / "results", quick=True)
    text = report.read_text()
    assert "| broker | 100,000 | 10.0 | 0.50 |" in text
    assert "median 2,000 ms, max 2,500 ms (n=3)" in text
    assert "controller kill -9 -> first metadata commit | median 750 ms" in text
    assert "| nproc |" in text and "| Python |" in text
    assert (tmp_path / "results" / "broker_produce.png").stat().st_size > 1000
    assert "Spark" not in text  # a benchmark that did not run leaves its section out
