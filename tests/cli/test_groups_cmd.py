"""`quorumlog groups` against the shared real 3-node cluster: a group commits through
confluent-kafka, then list / describe (offsets and lag) / reset-offsets (dry run, execute)."""

from __future__ import annotations

import json
import time

import pytest
from cli_helpers import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "session.timeout.ms": 6000,
         "heartbeat.interval.ms": 200, "fetch.wait.max.ms": 100}
    )  # fmt: skip
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < count and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            got += 1
            if got == count:
                consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    assert got == count


def test_groups_list_describe_reset(bootstrap):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "gtopic", "-p", "1"])
    run_cli(["produce", *b, "-t", "gtopic"], input="".join(f"v{i}\n" for i in range(10)))
    _consume_and_commit(bootstrap, "gtopic", "cli-group", 4)

    listed = json.loads(run_cli(["groups", "list", *b, "--json"]).stdout)
    assert "cli-group" in [g["group"] for g in listed]
    described = json.loads(run_cli(["groups", "describe", *b, "cli-group", "--json"]).stdout)
    assert described["state"] == "Empty" and described["members"] == []
    assert described["offsets"] == [
        {"topic": "gtopic", "partition": 0, "committed_offset": 4, "high_watermark": 10,
         "lag": 6}
    ]  # fmt: skip

    dry = run_cli(["groups", "reset-offsets", *b, "cli-group", "-t", "gtopic", "--to-earliest"])
    assert "dry run" in dry.stdout
    described = json.loads(run_cli(["groups", "describe", *b, "cli-group", "--json"]).stdout)
    assert described["offsets"][0]["committed_offset"] == 4
    run_cli(["groups", "reset-offsets", *b, "cli-group", "-t", "gtopic", "--to-offset", "1",
             "--execute"])  # fmt: skip
    described = json.loads(run_cli(["groups", "describe", *b, "cli-group", "--json"]).stdout)
    assert described["offsets"][0]["committed_offset"] == 1
    run_cli(["groups", "reset-offsets", *b, "cli-group", "-t", "gtopic"], exit_code=2)


def test_groups_describe_a_kip848_consumer_group(bootstrap):
    """A group of the new protocol (group.protocol=consumer): ConsumerGroupDescribe's view."""
    from confluent_kafka import Consumer

    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "cgtopic", "-p", "2"])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-cg",
                         "group.protocol": "consumer", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.subscribe(["cgtopic"])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline
            consumer.poll(0.1)
        listed = json.loads(run_cli(["groups", "list", *b, "--json"]).stdout)
        assert [g["protocol_type"] for g in listed if g["group"] == "cli-cg"] == ["consumer"]
        described = json.loads(run_cli(["groups", "describe", *b, "cli-cg", "--json"]).stdout)
        member_id = consumer.memberid()
    finally:
        consumer.close()
    assert (described["state"], described["protocol"]) == ("Stable", "uniform")
    [member] = described["members"]
    assert member["member_id"] == member_id
    assert member["assignment"] == ["cgtopic-0", "cgtopic-1"]
