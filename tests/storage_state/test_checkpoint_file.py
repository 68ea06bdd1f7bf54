"""Checkpoint files: round trip, exact text format, atomic replace, strict reading."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import ErrorCode, KafkaStorageError
from log.storage.checkpoint_file import (
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    atomic_write_bytes,
)
from log.storage.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    has_clean_shutdown_marker,
    remove_clean_shutdown_marker,
    write_clean_shutdown_marker,
)


def test_missing_file_reads_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}


def test_exact_kafka_text_format(tmp_path):
    path = tmp_path / RECOVERY_POINT_CHECKPOINT_FILE
    OffsetCheckpointFile(path).write({("orders", 1): 42, ("orders", 0): 7, ("a.b_c-d", 3): 0})
    assert path.read_text() == "0\n3\na.b_c-d 3 0\norders 0 7\norders 1 42\n"
    assert not (tmp_path / (RECOVERY_POINT_CHECKPOINT_FILE + ".tmp")).exists()


def test_reads_file_written_by_kafka(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n2\n__consumer_offsets 12 100\nt 0 5\n")
    assert OffsetCheckpointFile(path).read() == {("__consumer_offsets", 12): 100, ("t", 0): 5}


topics = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=20)
offset_maps = st.dictionaries(
    st.tuples(topics, st.integers(0, 10_000)), st.integers(-1, 2**63 - 1), max_size=30
)


@settings(max_examples=100, deadline=None)
@given(first=offset_maps, second=offset_maps)
def test_round_trip_and_replace(tmp_path_factory, first, second):
    path = tmp_path_factory.mktemp("cp") / "log-start-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write(first)
    assert checkpoint.read() == first
    checkpoint.write(second)  # a rewrite replaces, never merges
    assert checkpoint.read() == second


def test_stale_tmp_file_is_overwritten(tmp_path):
    path = tmp_path / "cp"
    (tmp_path / "cp.tmp").write_text("garbage from a crash mid-write")
    OffsetCheckpointFile(path).write({("t", 0): 1})
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1}
    assert not (tmp_path / "cp.tmp").exists()


def test_atomic_write_keeps_old_content_when_write_fails(tmp_path):
    path = tmp_path / "cp"
    OffsetCheckpointFile(path).write({("t", 0): 1})
    (tmp_path / "cp.tmp").mkdir()  # the temporary file cannot be created
    with pytest.raises(KafkaStorageError) as info:
        OffsetCheckpointFile(path).write({("t", 0): 2})
    assert info.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1}


def test_atomic_write_bytes(tmp_path):
    atomic_write_bytes(tmp_path / "f", b"\x00\x01")
    atomic_write_bytes(tmp_path / "f", b"new")
    assert (tmp_path / "f").read_bytes() == b"new"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("", 1, "missing version"),
        ("1\n0\n", 1, "unrecognised version 1"),
        ("x\n0\n", 1, "not an integer"),
        ("0\n", 2, "missing entry count"),
        ("0\n2\nt 0 1\n", 2, "expected 2 entries but found 1"),
        ("0\n1\nt 0 1\nu 0 2\n", 2, "expected 1 entries but found 2"),
        ("0\n1\nt 0\n", 3, "expected 3 fields"),
        ("0\n2\nt 0 1\nt 1 x\n", 4, "malformed entry"),
        ("0\n1\nt -1 5\n", 3, "negative partition"),
        ("0\n-1\n", 2, "out of range"),
    ],
)
def test_malformed_files_raise_naming_file_and_line(tmp_path, text, line, fragment):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(KafkaStorageError) as info:
        OffsetCheckpointFile(path).read()
    assert f"{path}:{line}" in str(info.value)
    assert fragment in str(info.value)


def test_duplicate_entries_and_binary_garbage_rejected(tmp_path):
    path = tmp_path / "cp"
    path.write_text("0\n2\nt 0 1\nt 0 2\n")
    with pytest.raises(KafkaStorageError, match="duplicate entry for t-0"):
        OffsetCheckpointFile(path).read()
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(KafkaStorageError, match="not UTF-8"):
        OffsetCheckpointFile(path).read()


def test_clean_shutdown_marker(tmp_path):
    assert not has_clean_shutdown_marker(tmp_path)
    write_clean_shutdown_marker(tmp_path)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).is_file()
    assert CLEAN_SHUTDOWN_FILE == ".kafka_cleanshutdown"
    assert has_clean_shutdown_marker(tmp_path)
    remove_clean_shutdown_marker(tmp_path)
    assert not has_clean_shutdown_marker(tmp_path)
    remove_clean_shutdown_marker(tmp_path)  # idempotent


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120) | st.text(alphabet="0123456789 -\nabc", max_size=60))
def test_random_content_reads_or_raises_storage_error(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("fuzz") / "cp"
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    try:
        result = OffsetCheckpointFile(path).read()
    except KafkaStorageError:
        return
    assert all(partition >= 0 for _, partition in result)
