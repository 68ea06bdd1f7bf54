"""The commands' pure parts, no cluster: line splitting, record formats, times, checks, help."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from log.records.batch import DecodedRecord
from log.records.builder import Header
from tools.cli import main
from tools.cli_support import CommandError, parse_key_values
from tools.consume_cmd import format_record, parse_timestamp_ms
from tools.demo import DemoFailedError, PartitionCheck, _verify, demo_row, fold
from tools.produce_cmd import split_line


def test_split_line():
    assert split_line(b"k:v:w", b":", 1) == (b"k", b"v:w")
    assert split_line(b":v", b":", 1) == (b"", b"v")
    assert split_line(b"plain", None, 1) == (None, b"plain")
    assert split_line(b"a::b", b"::", 1) == (b"a", b"b")
    with pytest.raises(CommandError, match="line 7 has no key separator"):
        split_line(b"nokey", b":", 7)


def test_parse_key_values():
    assert parse_key_values(["a=1", "b=x=y", "c="], "--config") == {"a": "1", "b": "x=y", "c": ""}
    for bad in (["novalue"], ["=1"]):
        with pytest.raises(click.BadParameter):
            parse_key_values(bad, "--config")


def test_format_record():
    record = DecodedRecord(5, 1700000000000, b"k", b"v", (Header("h", b"1"), Header("n", None)))
    assert format_record(2, record, "value", "\t") == "v"
    assert format_record(2, record, "key-value", "|") == "k|v"
    assert json.loads(format_record(2, record, "json", "\t")) == {
        "partition": 2, "offset": 5, "timestamp": 1700000000000, "key": "k", "value": "v",
        "headers": {"h": "1", "n": None},
    }  # fmt: skip
    binary = DecodedRecord(0, 1, None, b"\xff\x00")
    out = json.loads(format_record(0, binary, "json", "\t"))
    assert out["key"] is None and out["value"] == "/wA=" and out["value_encoding"] == "base64"
    assert format_record(0, binary, "value", "\t") == "\\xff\x00"


def test_parse_timestamp_ms():
    assert parse_timestamp_ms("1700000000000") == 1700000000000
    assert parse_timestamp_ms("2023-11-14T22:13:20+00:00") == 1700000000000
    with pytest.raises(click.BadParameter):
        parse_timestamp_ms("yesterday")


def test_demo_checks_detect_a_changed_or_missing_record():
    def checks(rows):
        out: dict[int, PartitionCheck] = {}
        for offset, (key, value) in enumerate(rows):
            fold(out.setdefault(0, PartitionCheck()), offset, key, value)
        return out

    rows = [demo_row(i) for i in range(50)]
    _verify(checks(rows), checks(rows))
    changed = rows[:10] + [(rows[10][0], rows[10][1] + b"!")] + rows[11:]
    for other in (rows[:-1], changed, rows[1:] + rows[:1]):
        with pytest.raises(DemoFailedError, match="partition 0"):
            _verify(checks(rows), checks(other))


@pytest.mark.parametrize(
    "command",
    [
        ["topics"],
        ["topics", "create"],
        ["topics", "describe"],
        ["topics", "alter-config"],
        ["produce"],
        ["consume"],
        ["status"],
        ["demo"],
    ],  # fmt: skip
)
def test_help_has_examples(command):
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0 and "Example" in result.output, result.output


def test_bad_arguments_are_usage_errors():
    runner = CliRunner()
    for args in (
        ["consume", "-t", "x", "--offset", "soon"],
        ["consume", "-t", "x", "--format", "xml"],
        ["produce", "-t", "x", "--acks", "2"],
        ["topics", "alter-config", "-t", "x"],
        ["produce", "-t", "x", "--key-separator", ""],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and "Traceback" not in result.output, (args, result.output)


def test_demo_table_shows_checksums_only_where_they_were_computed():
    """The Spark pipeline reports its own checks: no column of '-' (issue 20), and no records
    column (with exactlyOnce, high watermark - log start counts the markers too); the
    fetch-client path counts and computes a crc32 per partition and shows both."""
    import io

    from rich.console import Console

    from tools.demo import DemoResult, print_report

    def render(partitions: dict) -> str:
        out = io.StringIO()
        print_report(Console(file=out, width=200), DemoResult("p", 10, 1.0, 0.0, partitions))
        return out.getvalue()

    spark = render({0: {"leader": 1, "isr": "1,2,3", "log_start_offset": 0,
                        "high_watermark": 7}})  # fmt: skip
    assert "crc32" not in spark and "records" not in spark and "partition" in spark
    fetched = render({0: {"leader": 1, "isr": "1", "log_start_offset": 0, "high_watermark": 5,
                          "records": 5, "crc32": "0badcafe"}})  # fmt: skip
    assert "crc32" in fetched and "0badcafe" in fetched and "records" in fetched
