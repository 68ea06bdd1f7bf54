"""Control records: the transaction markers (COMMIT / ABORT) a transaction coordinator writes.

A control batch has the control attribute bit set (and, for markers, the transactional bit and
the transaction's producer id/epoch) and holds exactly one record whose key and value are::

    key:   version int16 (0)   type int16 (0 = ABORT, 1 = COMMIT; KRaft uses 2.. for its own)
    value: version int16 (0)   coordinatorEpoch int32

Consumers in read_committed use the marker to drop an aborted transaction's records; the log
uses it to end the producer's open transaction. Newer versions may append fields, so a version
above 0 is parsed as version 0 and its extra bytes ignored, like Kafka does; a version-0 key or
value with extra bytes, a negative version or a short key/value is CorruptRecordError.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from construct import ConstructError, GreedyBytes, Int16sb, Int32sb, Struct

from log.common.errors import CorruptRecordError
from log.records.batch_header import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE
from log.records.builder import Record, build_batch
from log.records.reader import iter_records

CONTROL_KEY = Struct("version" / Int16sb, "type" / Int16sb, "extra" / GreedyBytes)
END_TXN_MARKER_VALUE = Struct(
    "version" / Int16sb, "coordinator_epoch" / Int32sb, "extra" / GreedyBytes
)
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType
    coordinator_epoch: int


def _parse(definition: Struct, data: bytes | None, what: str):
    if data is None:
        raise CorruptRecordError(f"control record {what} is null")
    try:
        parsed = definition.parse(bytes(data))
    except ConstructError as exc:
        raise CorruptRecordError(f"control record {what} too short: {exc}") from exc
    if parsed.version < 0 or (parsed.version == 0 and parsed.extra):
        raise CorruptRecordError(f"control record {what}: bad version {parsed.version} or size")
    return parsed


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type) of a control record key; the type may be one this module doesn't know."""
    parsed = _parse(CONTROL_KEY, key, "key")
    return parsed.version, parsed.type


def parse_control_record(key: bytes | None, value: bytes | None) -> EndTransactionMarker:
    """The transaction marker in a control record; CorruptRecordError if it is not one."""
    _, control_type = parse_control_key(key)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"control record type {control_type} is not a marker")
    parsed = _parse(END_TXN_MARKER_VALUE, value, "value")
    return EndTransactionMarker(ControlRecordType(control_type), parsed.coordinator_epoch)


def read_end_txn_marker(
    batch: bytes | bytearray | memoryview, position: int = 0
) -> EndTransactionMarker | None:
    """The end-transaction marker of the control batch at `position`; None when the batch is
    empty (the cleaner removed its marker) or holds another control type (KRaft's own).
    CorruptRecordError for a marker that cannot be parsed. The CRC is the caller's business
    (every path that gets here validated the batch already)."""
    for record in iter_records(batch, position, check_crc=False):
        _, control_type = parse_control_key(record.key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        return parse_control_record(record.key, record.value)
    return None


def build_control_key(control_type: ControlRecordType) -> bytes:
    return CONTROL_KEY.build(
        {"version": CURRENT_CONTROL_KEY_VERSION, "type": int(control_type), "extra": b""}
    )


def build_control_value(coordinator_epoch: int) -> bytes:
    return END_TXN_MARKER_VALUE.build(
        {
            "version": CURRENT_END_TXN_MARKER_VERSION,
            "coordinator_epoch": coordinator_epoch,
            "extra": b"",
        }
    )


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = True,
) -> bytes:
    """A control batch with one end-transaction marker, as the coordinator's WriteTxnMarkers does.

    Markers carry no sequence (baseSequence -1): they are not part of the idempotent stream.
    """
    assert producer_id >= 0, "a transaction marker belongs to a producer id"
    marker = Record(
        build_control_value(coordinator_epoch),
        key=build_control_key(control_type),
        timestamp_ms=timestamp_ms,
    )
    return build_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
        is_control=True,
    )
