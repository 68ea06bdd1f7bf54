"""`quorumlog dump-log` on real segment, index and state files, good and corrupt."""

from __future__ import annotations

import struct

import crc32c
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from log.records.batch_header import read_header
from log.records.builder import Header, Record, assemble_batch, build_batch
from log.records.compression import CompressionType
from log.storage.checkpoint_file import OffsetCheckpointFile
from log.storage.leader_epoch_cache import LeaderEpochFileCache
from log.storage.producer_state import ProducerStateManager
from tools.cli import main

SEGMENT = "00000000000000000100.log"


def make_segment(tmp_path):
    """Three batches at offsets 100.., as a leader would have written them."""
    batches = [
        build_batch(
            [Record(b"hello", key=b"k1", timestamp_ms=1000), Record(b"world", timestamp_ms=1001)],
            base_offset=100,
            partition_leader_epoch=3,
        ),
        build_batch(
            [
                Record(
                    b"\x00\xff\x10",
                    key=None,
                    headers=(Header("trace", b"abc"), Header("nul", None)),
                    timestamp_ms=2000,
                )
            ],
            base_offset=102,
            compression_type=CompressionType.GZIP,
            producer_id=77,
            producer_epoch=1,
            base_sequence=5,
            partition_leader_epoch=3,
        ),
        build_batch(
            [Record(f"v{i}".encode(), timestamp_ms=3000 + i) for i in range(3)],
            base_offset=103,
            compression_type=CompressionType.ZSTD,
            partition_leader_epoch=4,
        ),
    ]
    path = tmp_path / SEGMENT
    path.write_bytes(b"".join(batches))
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    return path, batches, positions


def run(*args):
    result = CliRunner().invoke(main, ["dump-log", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_dump_segment_one_line_per_batch(tmp_path):
    path, batches, positions = make_segment(tmp_path)
    result = run(path)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 100"
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batch_lines) == 3
    first, second, third = batch_lines
    assert "baseOffset: 100 lastOffset: 101 count: 2 " in first
    assert "partitionLeaderEpoch: 3" in first and "compresscodec: none" in first
    assert "position: 0 CreateTime: 1001 " in first and "isvalid: true" in first
    assert f"size: {len(batches[0])} " in first
    assert "producerId: 77 producerEpoch: 1" in second and "baseSequence: 5" in second
    assert "compresscodec: gzip" in second and f"position: {positions[1]} " in second
    assert "compresscodec: zstd" in third and "partitionLeaderEpoch: 4" in third
    assert not any(line.startswith("|") for line in lines)


def test_dump_segment_records(tmp_path):
    path, _, _ = make_segment(tmp_path)
    result = run(path, "--records")
    assert result.exit_code == 0, result.output
    records = [line for line in result.stdout.splitlines() if line.startswith("| offset:")]
    assert len(records) == 6
    assert records[0] == (
        "| offset: 100 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: [] "
        "key: k1 payload: hello"
    )
    assert "offset: 101" in records[1] and "key: null payload: world" in records[1]
    assert "sequence: 5" in records[2] and "payload: 0x00ff10" in records[2]
    assert "headerKeys: [trace,nul]" in records[2]
    assert "headers: [trace=abc,nul=null]" in records[2]
    assert [r.split()[2] for r in records[3:]] == ["103", "104", "105"]
    assert "payload: v2" in records[5]


def test_control_batch_shows_end_txn_marker(tmp_path):
    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, 9)
    batch = build_batch(
        [Record(value, key=key, timestamp_ms=5)],
        base_offset=0,
        producer_id=3,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(batch)
    result = run(path, "--records")
    assert result.exit_code == 0, result.output
    assert "isTransactional: true isControl: true" in result.stdout
    assert "endTxnMarker: COMMIT coordinatorEpoch: 9" in result.stdout


def test_crc_mismatch_reported_and_exit_nonzero(tmp_path):
    path, _, positions = make_segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[positions[1] + 70] ^= 0xFF  # inside the second batch's records: CRC breaks
    path.write_bytes(bytes(data))
    result = run(path, "--records")
    assert result.exit_code == 1
    batch_lines = [line for line in result.stdout.splitlines() if line.startswith("baseOffset")]
    assert [line.endswith("isvalid: true") for line in batch_lines] == [True, False, True]
    assert "1 batch(es) failed the CRC check" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("cut", [-1, -40, 30])
def test_truncated_segment_clean_error(tmp_path, cut):
    path, _, _ = make_segment(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    result = run(path)
    assert result.exit_code == 1
    assert f"Error: {path}:" in result.stderr
    assert "truncated" in result.stderr
    assert "Traceback" not in result.output


def test_garbage_segment_clean_error(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 4)
    result = run(path)
    assert result.exit_code == 1 and "Error:" in result.stderr
    assert "Traceback" not in result.output


def test_corrupt_compressed_records_clean_error(tmp_path):
    """A batch whose CRC is right but whose compressed records are garbage."""
    batch = assemble_batch(
        b"not gzip at all",
        record_count=1,
        base_offset=0,
        base_timestamp_ms=0,
        max_timestamp_ms=0,
    )
    data = bytearray(batch)
    data[22] = CompressionType.GZIP  # attributes low byte; then fix the CRC
    data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    assert run(path).exit_code == 0  # headers alone are fine
    result = run(path, "--records")
    assert result.exit_code == 1 and "cannot decode records" in result.stderr


def write_offset_index(path, base_offset, entries, preallocated_entries=10):
    raw = b"".join(struct.pack(">II", offset - base_offset, pos) for offset, pos in entries)
    path.write_bytes(raw + bytes(8 * (preallocated_entries - len(entries))))


def test_offset_index_entries_padding_and_verification(tmp_path):
    log_path, batches, positions = make_segment(tmp_path)
    index = tmp_path / "00000000000000000100.index"
    write_offset_index(index, 100, [(101, positions[0]), (105, positions[2])])
    result = run(index, "--verify-index")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()[1:]
    assert lines == ["offset: 101 position: 0", f"offset: 105 position: {positions[2]}"]

    write_offset_index(index, 100, [(101, positions[0]), (103, positions[1] + 1)])
    result = run(index, "--verify-index")
    assert result.exit_code == 1 and "is not a batch boundary" in result.stderr
    write_offset_index(index, 100, [(101, positions[0]), (102, positions[2])])
    result = run(index, "--verify-index")
    assert result.exit_code == 1 and "holds offsets 103..105" in result.stderr
    assert run(index).exit_code == 0  # without --verify-index only the shape is checked


def test_offset_index_first_zero_entry_is_real_and_shape_errors(tmp_path):
    make_segment(tmp_path)
    index = tmp_path / "00000000000000000100.index"
    write_offset_index(index, 100, [(100, 0)])
    result = run(index, "--verify-index")
    assert result.exit_code == 0 and "offset: 100 position: 0" in result.stdout
    index.write_bytes(bytes(13))
    result = run(index)
    assert result.exit_code == 1 and "not a multiple of 8-byte entries" in result.stderr
    write_offset_index(index, 100, [(103, 200), (102, 300)])
    result = run(index)
    assert result.exit_code == 1 and "not increasing" in result.stderr


def test_verify_index_without_segment_is_an_error(tmp_path):
    index = tmp_path / "00000000000000000000.index"
    write_offset_index(index, 0, [(0, 0)])
    result = run(index, "--verify-index")
    assert result.exit_code == 1 and "no sibling segment" in result.stderr


def test_time_index_entries_and_verification(tmp_path):
    _, _, positions = make_segment(tmp_path)
    time_index = tmp_path / "00000000000000000100.timeindex"
    entries = [(1001, 1), (3002, 5)]
    raw = b"".join(struct.pack(">qI", ts, rel) for ts, rel in entries)
    time_index.write_bytes(raw + bytes(12 * 4))
    result = run(time_index, "--verify-index")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == [
        "timestamp: 1001 offset: 101",
        "timestamp: 3002 offset: 105",
    ]

    time_index.write_bytes(struct.pack(">qI", 1500, 1) + bytes(12))
    result = run(time_index, "--verify-index")
    assert result.exit_code == 1 and "has maxTimestamp 1001" in result.stderr
    time_index.write_bytes(struct.pack(">qI", 1500, 50))
    result = run(time_index, "--verify-index")
    assert result.exit_code == 1 and "not in the segment" in result.stderr


def test_state_files(tmp_path):
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(0, 0)
    cache.assign(4, 103)
    OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").write({("t", 2): 57})
    manager = ProducerStateManager(tmp_path)
    _, batches, _ = make_segment(tmp_path)
    for batch in batches:
        manager.on_batch_appended(read_header(batch))
    snapshot = manager.take_snapshot()
    result = run(
        tmp_path / "leader-epoch-checkpoint", tmp_path / "replication-offset-checkpoint", snapshot
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "leaderEpoch: 0 startOffset: 0\nleaderEpoch: 4 startOffset: 103\n" in out
    assert "topic: t partition: 2 offset: 57" in out
    assert "producerId: 77 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: -1" in out
    assert "firstSequence: 5 lastSequence: 5 lastOffset: 102 offsetDelta: 0" in out


def test_bad_state_files_and_unknown_paths(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n1 1\n")
    snapshot = tmp_path / "00000000000000000005.snapshot"
    snapshot.write_bytes(b"\x00\x01\x00\x00")
    (tmp_path / "notes.txt").write_text("hi")
    good, _, _ = make_segment(tmp_path)
    result = run(
        tmp_path / "leader-epoch-checkpoint",
        snapshot,
        tmp_path / "notes.txt",
        tmp_path / "missing.log",
        good,
    )
    assert result.exit_code == 1
    assert "expected 2 entries but found 1" in result.stderr
    assert "00000000000000000005.snapshot: " in result.stderr and "truncated" in result.stderr
    assert "unknown file type" in result.stderr
    assert "missing.log: no such file" in result.stderr
    assert "baseOffset: 100" in result.stdout  # the good file after the bad ones still dumps
    assert "Traceback" not in result.output


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mutated_segments_never_crash(tmp_path_factory, data):
    """Random byte flips, cuts and splices: exit 0 or 1 with a message, never an exception."""
    tmp_path = tmp_path_factory.mktemp("fuzz")
    path, _, _ = make_segment(tmp_path)
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    path.write_bytes(bytes(raw[:cut]))
    result = CliRunner().invoke(main, ["dump-log", "--records", str(path)])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if result.exit_code == 1:
        assert f"Error: {path}:" in result.stderr


def test_partition_directory_dumps_every_known_file(tmp_path):
    partition_dir = tmp_path / "orders-0"
    partition_dir.mkdir()
    make_segment(partition_dir)
    write_offset_index(partition_dir / "00000000000000000100.index", 100, [(101, 0)])
    LeaderEpochFileCache(partition_dir / "leader-epoch-checkpoint").assign(3, 100)
    (partition_dir / "partition.metadata").write_text("version: 0\n")
    result = run(partition_dir, "--verify-index")
    assert result.exit_code == 0, result.output
    dumped = [
        line.split("/")[-1] for line in result.stdout.splitlines() if line.startswith("Dumping")
    ]
    assert dumped == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "leader-epoch-checkpoint",
    ]


def test_txn_index_entries_from_a_real_log(tmp_path):
    from log.records.control import ControlRecordType, build_control_batch
    from log.storage.append_origin import AppendOrigin
    from log.storage.config import LogConfig
    from log.storage.log_loader import load_log

    log = load_log(str(tmp_path / "txn-0"), LogConfig())
    for sequence, producer_id in ((0, 5), (0, 6), (1, 5)):
        log.append_as_leader(
            build_batch([Record(b"x", timestamp_ms=10)], producer_id=producer_id,
                        producer_epoch=0, base_sequence=sequence, is_transactional=True),
            0, 10,
        )  # fmt: skip
        if sequence == 0 and producer_id == 6:
            continue
        marker = build_control_batch(
            ControlRecordType.ABORT,
            producer_id=producer_id,
            producer_epoch=0,
            coordinator_epoch=4,
            timestamp_ms=10,
        )
        log.append_as_leader(marker, 0, 10, AppendOrigin.COORDINATOR)  # fmt: skip
    log.close()
    path = tmp_path / "txn-0" / "00000000000000000000.txnindex"
    result = run(path)
    assert result.exit_code == 0, result.output
    # 0: 5's data, 1: its ABORT (nothing else open: LSO 2), 2: 6's data (left open), 3: 5's
    # second transaction, 4: its ABORT (LSO then: 6's open transaction at 2).
    assert result.stdout.splitlines()[1:] == [
        "version: 0 producerId: 5 firstOffset: 0 lastOffset: 1 lastStableOffset: 2",
        "version: 0 producerId: 5 firstOffset: 3 lastOffset: 4 lastStableOffset: 2",
    ]
    result = run(path.parent, "--records")
    assert "endTxnMarker: ABORT coordinatorEpoch: 4" in result.stdout
    assert "00000000000000000000.txnindex" in result.stdout

    path.write_bytes(path.read_bytes()[:40])
    result = run(path)
    assert result.exit_code == 1
    assert "6 trailing bytes (a torn entry)" in result.stderr
