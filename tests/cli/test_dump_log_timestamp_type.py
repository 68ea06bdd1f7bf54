"""`quorumlog dump-log` shows each batch's timestamp type, as Kafka labels it."""

from __future__ import annotations

from cli_helpers import run_cli

from log.records.builder import Record, build_batch


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
