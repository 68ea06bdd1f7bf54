"""`quorumlog perf produce --json` drives our producer and confluent-kafka the same way."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tools.cli import main


@pytest.mark.parametrize(
    "client, extra", [("quorumlog", []), ("quorumlog", ["--bulk"]), ("confluent", [])]
)
def test_perf_produce_json(mock_cluster, client, extra):
    args = ["perf", "produce", "--bootstrap", mock_cluster.bootstrap, "--topic", "perf"]
    args += ["--records", "2000", "--record-size", "100", "--acks", "1", "--client", client]
    result = CliRunner().invoke(main, args + extra + ["--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["acknowledged"] == 2000
    assert report["records_per_s"] > 0 and report["mb_per_s"] > 0
    assert 0 <= report["p50_ms"] <= report["p99_ms"]
    assert report["cpu_s"] > 0 and report["cpu_us_per_record"] > 0
