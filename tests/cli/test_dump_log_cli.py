"""`quorumlog dump-log`: the timestamp type of each batch (as Kafka labels it) and --json."""

from __future__ import annotations

import json

from cli_helpers import run_cli

from log.records.builder import Header, Record, build_batch
from log.storage.checkpoint_file import OffsetCheckpointFile


def test_batch_and_records_carry_their_timestamp_type(tmp_path):
    created = build_batch([Record(b"a", timestamp_ms=10), Record(b"b", timestamp_ms=12)])
    appended = build_batch(
        [Record(b"c", timestamp_ms=20), Record(b"d", timestamp_ms=21)],
        base_offset=2,
        base_timestamp_ms=20,
        log_append_time=True,
    )
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(created + appended)
    lines = run_cli(["dump-log", "--records", str(path)]).stdout.splitlines()
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert " CreateTime: 12 " in batches[0] and "LogAppendTime" not in batches[0]
    assert " LogAppendTime: 21 " in batches[1] and "CreateTime" not in batches[1]
    records = [line.split()[2:5] for line in lines if line.startswith("| offset:")]
    # a LogAppendTime batch stamps every record with the batch's max timestamp
    assert records == [
        ["0", "CreateTime:", "10"],
        ["1", "CreateTime:", "12"],
        ["2", "LogAppendTime:", "21"],
        ["3", "LogAppendTime:", "21"],
    ]


def test_json_lines_for_batches_records_and_entries(tmp_path):
    batch = build_batch(
        [Record(b"\xff\x00", key=b"k", headers=(Header("h", b"v"),), timestamp_ms=7)],
        base_offset=5,
        log_append_time=True,
        base_timestamp_ms=9,
    )
    segment = tmp_path / "00000000000000000005.log"
    segment.write_bytes(batch)
    OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").write({("t", 0): 6})
    result = run_cli(["dump-log", "--records", "--json", str(tmp_path)])
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["type"] for o in objects] == ["batch", "record", "checkpoint_entry"]
    batch_object, record, checkpoint = objects
    assert batch_object["file"] == str(segment)
    assert batch_object["base_offset"] == 5 and batch_object["timestamp_type"] == "LogAppendTime"
    assert batch_object["is_valid"] is True and batch_object["compression"] == "none"
    assert record["offset"] == 5 and record["timestamp_type"] == "LogAppendTime"
    assert (
        record["key"] == "k" and record["value"] == "/wA=" and record["value_encoding"] == "base64"
    )
    assert record["headers"] == [{"key": "h", "value": "v"}]
    assert checkpoint == {"file": str(tmp_path / "replication-offset-checkpoint"),
                          "type": "checkpoint_entry", "topic": "t", "partition": 0, "offset": 6}  # fmt: skip
