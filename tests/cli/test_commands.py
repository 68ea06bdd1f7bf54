"""The client commands against a real 3-node cluster: topics, produce, consume, status, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import run_cli
from cluster_harness import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _json(result) -> object:
    return json.loads(result.stdout)


def _lines(result) -> list[str]:
    return result.stdout.splitlines()


def _one_line_error(result, needle: str) -> None:
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and needle in errors[0], result.output


def test_topics_round_trip(bootstrap):
    b = ["--bootstrap", bootstrap]
    created = _json(run_cli(["topics", "create", *b, "-t", "orders", "-p", "3",
                             "--config", "retention.ms=60000", "--json"]))  # fmt: skip
    assert created["created"] is True and created["partitions"] == 3
    assert "orders" in _json(run_cli(["topics", "list", *b, "--json"]))
    (topic,) = _json(run_cli(["topics", "describe", *b, "-t", "orders", "--json"]))
    assert topic["name"] == "orders" and topic["partition_count"] == 3
    assert topic["replication_factor"] == 1
    assert topic["configs"] == {"retention.ms": "60000"}
    leaders = set()
    for p in topic["partitions"]:
        assert p["replicas"] == [p["leader"]] and p["isr"] == p["replicas"]
        assert p["high_watermark"] == 0
        leaders.add(p["leader"])
    assert leaders <= {1, 2, 3} and len(leaders) == 3  # spread over the brokers
    text = run_cli(["topics", "describe", *b, "-t", "orders"]).stdout
    assert "PartitionCount: 3" in text and "retention.ms=60000" in text

    altered = _json(run_cli(["topics", "alter-config", *b, "-t", "orders", "--config",
                             "segment.bytes=1048576", "--delete-config", "retention.ms",
                             "--json"]))  # fmt: skip
    assert altered["configs"] == {"segment.bytes": "1048576"}
    run_cli(["topics", "add-partitions", *b, "-t", "orders", "-p", "4"])
    (topic,) = _json(run_cli(["topics", "describe", *b, "-t", "orders", "--json"]))
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2, 3]
    assert topic["configs"] == {"segment.bytes": "1048576"}

    again = run_cli(["topics", "create", *b, "-t", "orders"], exit_code=1)
    _one_line_error(again, "TOPIC_ALREADY_EXISTS")
    run_cli(["topics", "create", *b, "-t", "orders", "--if-not-exists"])
    run_cli(["topics", "delete", *b, "-t", "orders"])
    assert "orders" not in _json(run_cli(["topics", "list", *b, "--json"]))
    gone = run_cli(["topics", "describe", *b, "-t", "orders"], exit_code=1)
    _one_line_error(gone, "UNKNOWN_TOPIC_OR_PARTITION")
    run_cli(["topics", "delete", *b, "-t", "orders", "--if-exists"])


def test_produce_then_consume_each_format(bootstrap):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "lines", "-p", "2"])
    summary = _json(run_cli(["produce", *b, "-t", "lines", "-p", "1", "--json"],
                            input="alpha\nbeta\ngamma\n"))  # fmt: skip
    assert summary["records"] == 3
    assert summary["partitions"] == {"1": {"records": 3, "first_offset": 0, "last_offset": 2}}
    # unkeyed lines over both partitions: every line comes back exactly once
    run_cli(["produce", *b, "-t", "lines"], input="".join(f"n{i}\n" for i in range(20)))

    values = _lines(run_cli(["consume", *b, "-t", "lines"]))
    assert sorted(values) == sorted(["alpha", "beta", "gamma"] + [f"n{i}" for i in range(20)])
    assert _lines(run_cli(["consume", *b, "-t", "lines", "-p", "1", "-n", "3"])) == [
        "alpha", "beta", "gamma"]  # fmt: skip
    assert _lines(run_cli(["consume", *b, "-t", "lines", "-p", "1", "-n", "2",
                           "--format", "key-value", "--key-separator", "|"])) == [
        "|alpha", "|beta"]  # fmt: skip
    records = [json.loads(line) for line in _lines(
        run_cli(["consume", *b, "-t", "lines", "-p", "1", "-n", "3", "--format", "json"]))]  # fmt: skip
    assert [(r["partition"], r["offset"], r["key"], r["value"], r["headers"]) for r in records] == [
        (1, 0, None, "alpha", {}), (1, 1, None, "beta", {}), (1, 2, None, "gamma", {})]  # fmt: skip
    assert all(isinstance(r["timestamp"], int) and r["timestamp"] > 0 for r in records)
    assert run_cli(["consume", *b, "-t", "lines", "-o", "latest"]).stdout == ""


def test_key_separator_and_headers(bootstrap):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "keyed", "-p", "3"])
    run_cli(["produce", *b, "-t", "keyed", "-p", "0", "-K", ":", "-H", "source=cli", "-H", "n=1"],
            input="user1:clicked\nuser2:a:b\n:empty-key\n")  # fmt: skip
    records = [
        json.loads(line) for line in _lines(run_cli(["consume", *b, "-t", "keyed", "--json"]))
    ]
    assert [(r["key"], r["value"]) for r in records] == [
        ("user1", "clicked"), ("user2", "a:b"), ("", "empty-key")]  # fmt: skip
    assert all(r["headers"] == {"source": "cli", "n": "1"} for r in records)
    pairs = _lines(run_cli(["consume", *b, "-t", "keyed", "--format", "key-value"]))
    assert pairs == ["user1\tclicked", "user2\ta:b", "\tempty-key"]
    # keyed without --partition: the key decides the partition (same key, same partition)
    summary = _json(run_cli(["produce", *b, "-t", "keyed", "-K", "=", "--json"],
                            input="same=1\nsame=2\nsame=3\n"))  # fmt: skip
    assert len(summary["partitions"]) == 1 and summary["records"] == 3
    bad = run_cli(["produce", *b, "-t", "keyed", "-K", ":"], input="no separator here\n",
                  exit_code=1)  # fmt: skip
    _one_line_error(bad, "line 1 has no key separator")


def test_consume_from_offset_and_timestamp(bootstrap):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "timed", "-p", "1"])
    run_cli(["produce", *b, "-t", "timed"], input="a\nb\nc\n")
    run_cli(["produce", *b, "-t", "timed"], input="d\ne\n")  # a later run: later timestamps
    assert _lines(run_cli(["consume", *b, "-t", "timed", "--offset", "3"])) == ["d", "e"]
    assert _lines(run_cli(["consume", *b, "-t", "timed", "--offset", "99"])) == []
    records = [
        json.loads(line) for line in _lines(run_cli(["consume", *b, "-t", "timed", "--json"]))
    ]
    assert [r["offset"] for r in records] == [0, 1, 2, 3, 4]
    later = records[3]["timestamp"]
    assert later > records[2]["timestamp"]
    expected = [r["value"] for r in records if r["timestamp"] >= later]
    assert _lines(run_cli(["consume", *b, "-t", "timed", "--timestamp", str(later)])) == expected
    assert _lines(run_cli(["consume", *b, "-t", "timed", "--timestamp", str(later + 10**9)])) == []
    assert _lines(run_cli(["consume", *b, "-t", "timed", "--from-beginning", "-n", "2"])) == [
        "a",
        "b",
    ]


def test_unknown_topic_and_unreachable_cluster_are_one_line_errors(bootstrap):
    b = ["--bootstrap", bootstrap]
    for args in (
        ["consume", *b, "-t", "missing"],
        ["produce", *b, "-t", "missing"],
        ["topics", "describe", *b, "-t", "missing"],
        ["topics", "alter-config", *b, "-t", "missing", "--config", "retention.ms=1"],
        ["topics", "delete", *b, "-t", "missing"],
    ):
        result = run_cli(args, input="x\n", exit_code=1)
        _one_line_error(result, "UNKNOWN_TOPIC_OR_PARTITION")
    # consuming or producing never auto-created it
    assert "missing" not in _json(run_cli(["topics", "list", *b, "--json"]))
    run_cli(["topics", "create", *b, "-t", "two", "-p", "2"])
    _one_line_error(run_cli(["consume", *b, "-t", "two", "-p", "5"], exit_code=1), "no partition 5")
    for args in (["topics", "list"], ["status"], ["consume", "-t", "x"]):
        result = run_cli([*args, "--bootstrap", "127.0.0.1:1"], exit_code=1)
        _one_line_error(result, "cannot connect")
    # as a user runs it: stderr is exactly one line, the exit code non-zero
    process = subprocess.run(
        [sys.executable, "-m", "tools", "topics", "describe", "-t", "missing", "-b", bootstrap],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert process.returncode == 1
    assert process.stderr.strip().count("\n") == 0 and "does not exist" in process.stderr
    bad = run_cli(["topics", "create", *b, "-t", "x", "--config", "novalue"], exit_code=2)
    assert "expected key=value" in bad.output


def test_status_json_shows_nodes_and_controller(bootstrap):
    run_cli(["topics", "create", "--bootstrap", bootstrap, "-t", "st", "-p", "3"])
    run_cli(["produce", "--bootstrap", bootstrap, "-t", "st", "-p", "2"], input="1\n2\n")
    state = _json(run_cli(["status", "--bootstrap", bootstrap, "--json"]))
    assert [n["node_id"] for n in state["nodes"]] == [1, 2, 3]
    assert state["controller_id"] in (1, 2, 3)
    assert state["under_replicated_partitions"] == [] and state["offline_partitions"] == []
    (st,) = [t for t in state["topics"] if t["name"] == "st"]
    assert [p["high_watermark"] for p in st["partitions"]] == [0, 0, 2]
    text = run_cli(["status", "--bootstrap", bootstrap]).stdout
    assert "controller (active)" in text and "under-replicated partitions: none" in text


def test_consume_follow_waits_for_new_records(bootstrap):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "live", "-p", "2"])
    run_cli(["produce", *b, "-t", "live", "-p", "0"], input="before\n")
    follower = subprocess.Popen(
        [sys.executable, "-m", "tools", "consume", *b, "-t", "live", "--follow", "-n", "3"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        run_cli(["produce", *b, "-t", "live", "-p", "1"], input="after1\nafter2\n")
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    assert sorted(out.splitlines()) == ["after1", "after2", "before"]
    assert "Processed a total of 3 records" in err


def test_metadata_online_proves_the_cluster_secret(cli_cluster, tmp_path):
    """`quorumlog metadata --bootstrap` speaks to a CONTROLLER listener, which serves only
    peers holding the cluster secret: given a node's node.toml it prints the image; a wrong
    secret is a one-line error; no --secret-file is a usage error."""
    controller = f"127.0.0.1:{cli_cluster.layout.controller_port(1)}"
    node_toml = cli_cluster.layout.node_dir(1) / "node.toml"
    image = _json(run_cli(["metadata", "--bootstrap", controller, "--secret-file",
                           str(node_toml), "--json"]))  # fmt: skip
    assert sorted(b["broker_id"] for b in image["brokers"]) == [1, 2, 3], image["brokers"]
    wrong = tmp_path / "secret"
    wrong.write_text("not-the-secret\n")
    result = run_cli(["metadata", "--bootstrap", controller, "--secret-file", str(wrong)],
                     exit_code=1)  # fmt: skip
    _one_line_error(result, "handshake")
    result = run_cli(["metadata", "--bootstrap", controller], exit_code=2)
    assert "--secret-file" in result.output
