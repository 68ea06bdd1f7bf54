"""ProducerStateManager: per-partition idempotence state (duplicate and sequence checks).

For every producer id that wrote to the partition we remember its producer_epoch, the metadata
of its last NUM_BATCHES_TO_RETAIN (5) batches, and its ongoing transaction. The leader calls
`check_append(header, now_ms)` before appending a client batch:

- a batch whose producer_epoch is below the known one -> InvalidProducerEpochError (fenced);
- same producer_epoch and (base_sequence, last_sequence) equal to one of the 5 cached batches ->
  a DUPLICATE: the cached BatchMetadata is returned and the log answers with the original
  offsets without appending (a producer may have up to 5 requests in flight, so a retry can
  only ever duplicate one of the last 5);
- a higher producer_epoch must start at sequence 0 (else OutOfOrderSequenceError); the new
  epoch then replaces the cached batches;
- same producer_epoch: base_sequence must be the last cached last_sequence + 1, where
  sequences wrap from 2**31 - 1 to 0 (else OutOfOrderSequenceError);
- a producer id we hold no state for (new, or expired after producer.id.expiration.ms) is
  accepted at any sequence. That is Kafka's behaviour since KIP-360 (2.5): the state may have
  been removed by retention or expiry, and refusing would wedge an otherwise healthy producer.

After the log has assigned offsets, `on_batch_appended(header)` records the batch. Followers and
log recovery call only `on_batch_appended` (no validation: the leader already decided).
Batches must be checked and recorded one at a time, in log order.

Transactions (Kafka's ProducerAppendInfo / ProducerStateManager). A producer's first
transactional batch opens its transaction (`current_txn_first_offset`); while it is open a
non-transactional batch from it is INVALID_TXN_STATE. A transaction marker (a control batch the
transaction coordinator has the leader append, `check_end_txn_marker`: a producer epoch below the
producer's -> INVALID_PRODUCER_EPOCH, a coordinator epoch below the one recorded for the producer
-> TRANSACTION_COORDINATOR_FENCED) closes it and yields a CompletedTxn. A completed transaction
still bounds the *first unstable offset* until the high watermark has passed its marker
(`on_high_watermark_updated`): before that a consumer could read the transaction's data without
the marker that says whether it was aborted. So

    first_unstable_offset = min(first offset of every ongoing transaction,
                                first offset of every completed, not yet replicated one)

and the log's last stable offset is min(first_unstable_offset, high watermark).

Transaction verification (KIP-890 part 1, Kafka's VerificationGuard). Before a producer's first
transactional batch of a transaction is appended, the leader asks the transaction coordinator
whether the partition is in the transaction; `maybe_start_verification` hands out the guard held
meanwhile (None when the transaction is already open here). A marker or a new epoch of the
producer appended while it waits voids the guard (`verification_holds` is False), so a batch
verified for a transaction that ended meanwhile cannot open a transaction the coordinator never
hears of (a hanging transaction holding the LSO forever).

Snapshots. `take_snapshot()` writes the state as of `map_end_offset` to
`<map_end_offset:020d>.snapshot` in the partition directory; on restart `load()` reads the
newest valid snapshot at or below the log end offset (skipping and deleting corrupt ones) and
the log replays its batches from `map_end_offset`. Kafka's snapshot keeps only the last batch
of each producer, so after a load the duplicate window is that one batch (as in Kafka).
The snapshot layout (Kafka's ProducerStateManager format, version 1, big-endian)::

    offset  size  field
         0     2  version                       = 1
         2     4  crc                           uint32 CRC-32C of bytes 6 .. end
         6     4  producer_entries count        int32
        10    46  producer entry, repeated:
                    0  8  producer_id               int64
                    8  2  epoch (producer_epoch)    int16
                   10  4  last_sequence             int32 (-1: no batch)
                   14  8  last_offset               int64 (-1: no batch)
                   22  4  offset_delta              int32 (last_offset - first_offset)
                   26  8  timestamp                 int64 (ms, of the last batch)
                   34  4  coordinator_epoch         int32 (-1: none)
                   38  8  current_txn_first_offset  int64 (-1: no ongoing transaction)
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import construct
import crc32c

from log.common.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from log.common.files import fsync_directory
from log.records.batch_header import NO_SEQUENCE, BatchHeader
from log.records.control import ControlRecordType, EndTransactionMarker
from log.storage.checkpoint_file import atomic_write_bytes

NUM_BATCHES_TO_RETAIN = 5  # max.in.flight.requests.per.connection with idempotence
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms (1 day)
MAX_SEQUENCE = (1 << 31) - 1  # Int32 max; the next sequence after it is 0
SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1
# A snapshot holds ~46 bytes per producer; larger files are not ours.
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024
NO_COORDINATOR_EPOCH = -1
NO_OFFSET = -1

_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
_CRC_COVERS_FROM = 6  # version (2) + crc (4): the CRC covers the producer entries

ProducerSnapshotEntryStruct = construct.Struct(
    "producer_id" / construct.Int64sb,
    "epoch" / construct.Int16sb,
    "last_sequence" / construct.Int32sb,
    "last_offset" / construct.Int64sb,
    "offset_delta" / construct.Int32sb,
    "timestamp" / construct.Int64sb,
    "coordinator_epoch" / construct.Int32sb,
    "current_txn_first_offset" / construct.Int64sb,
)
ProducerSnapshotStruct = construct.Struct(
    "version" / construct.Int16sb,
    "crc" / construct.Int32ub,
    "producer_entries" / construct.PrefixedArray(construct.Int32sb, ProducerSnapshotEntryStruct),
    construct.Terminated,
)
assert ProducerSnapshotEntryStruct.sizeof() == 46


class CorruptSnapshotError(KafkaStorageError):
    """A producer snapshot file that is truncated, has a bad CRC, or an unknown version."""


def next_sequence(sequence: int, increment: int = 1) -> int:
    """`sequence + increment` with Kafka's wrap from Int32 max to 0."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


def in_sequence(last_sequence: int, next_seq: int) -> bool:
    return next_seq == last_sequence + 1 or (next_seq == 0 and last_sequence == MAX_SEQUENCE)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction whose marker was just appended (Kafka's CompletedTxn).

    `last_offset` is the marker's offset; `last_stable_offset` is where the partition was
    stable when it completed (the first offset of the next other ongoing transaction, else
    last_offset + 1), which the transaction index records for an aborted one."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


@dataclass(frozen=True, eq=False)
class VerificationGuard:
    """A transaction verification under way for a producer (compared by identity)."""

    producer_id: int
    producer_epoch: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp_ms: int = -1
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int | None = None

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        """A different producer_epoch starts a fresh sequence space: forget the cached batches."""
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()


def snapshot_path(partition_dir: Path, offset: int) -> Path:
    return Path(partition_dir) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: list[ProducerStateEntry]) -> bytes:
    rows = []
    for entry in sorted(entries, key=lambda e: e.producer_id):
        last = entry.batches[-1] if entry.batches else None
        rows.append(
            {
                "producer_id": entry.producer_id,
                "epoch": entry.producer_epoch,
                "last_sequence": last.last_seq if last else NO_SEQUENCE,
                "last_offset": last.last_offset if last else NO_OFFSET,
                "offset_delta": last.offset_delta if last else 0,
                "timestamp": entry.last_timestamp_ms,
                "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_first_offset": (
                    NO_OFFSET
                    if entry.current_txn_first_offset is None
                    else entry.current_txn_first_offset
                ),
            }
        )
    data = bytearray(
        ProducerSnapshotStruct.build(
            {"version": PRODUCER_SNAPSHOT_VERSION, "crc": 0, "producer_entries": rows}
        )
    )
    crc = crc32c.crc32c(bytes(data[_CRC_COVERS_FROM:]))
    data[2:_CRC_COVERS_FROM] = crc.to_bytes(4, "big")
    return bytes(data)


def decode_snapshot(data: bytes, source: str = "snapshot") -> list[ProducerStateEntry]:
    """Parse and verify a snapshot; raise CorruptSnapshotError on anything wrong."""
    if len(data) < _CRC_COVERS_FROM + 4:
        raise CorruptSnapshotError(f"{source}: truncated ({len(data)} bytes)")
    try:
        parsed = ProducerSnapshotStruct.parse(data)
    except construct.ConstructError as exc:
        raise CorruptSnapshotError(f"{source}: cannot parse: {exc}") from None
    if parsed.version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{source}: unknown snapshot version {parsed.version}")
    computed = crc32c.crc32c(data[_CRC_COVERS_FROM:])
    if computed != parsed.crc:
        raise CorruptSnapshotError(
            f"{source}: CRC mismatch (stored {parsed.crc:#010x}, computed {computed:#010x})"
        )
    entries = []
    for row in parsed.producer_entries:
        entry = ProducerStateEntry(
            producer_id=row.producer_id,
            producer_epoch=row.epoch,
            last_timestamp_ms=row.timestamp,
            coordinator_epoch=row.coordinator_epoch,
            current_txn_first_offset=(
                None if row.current_txn_first_offset < 0 else row.current_txn_first_offset
            ),
        )
        if row.last_sequence >= 0 and row.last_offset >= 0:
            if row.offset_delta < 0 or row.offset_delta > row.last_offset:
                raise CorruptSnapshotError(f"{source}: bad offset_delta {row.offset_delta}")
            entry.batches.append(
                BatchMetadata(
                    first_seq=next_sequence(row.last_sequence, -row.offset_delta),
                    last_seq=row.last_sequence,
                    first_offset=row.last_offset - row.offset_delta,
                    last_offset=row.last_offset,
                    timestamp_ms=row.timestamp,
                )
            )
        entries.append(entry)
    return entries


def read_snapshot_file(path: Path) -> list[ProducerStateEntry]:
    try:
        size_bytes = path.stat().st_size
        if size_bytes > MAX_SNAPSHOT_BYTES:
            raise CorruptSnapshotError(f"{path}: {size_bytes} bytes, limit {MAX_SNAPSHOT_BYTES}")
        data = path.read_bytes()
    except OSError as exc:
        raise KafkaStorageError(f"cannot read producer snapshot {path}: {exc}") from exc
    return decode_snapshot(data, str(path))


class ProducerStateManager:
    """Producer state of one partition; `partition_dir=None` keeps it in memory only."""

    def __init__(
        self,
        partition_dir: Path | None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        if producer_id_expiration_ms <= 0:
            raise ValueError("producer.id.expiration.ms must be positive")
        self.partition_dir = Path(partition_dir) if partition_dir is not None else None
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # first offset -> producer id of every open transaction, in first-offset order (they
        # are opened in log order; a snapshot load inserts them sorted).
        self._ongoing_txns: dict[int, int] = {}
        # first offset -> completed transactions whose marker is not yet below the HW.
        self._unreplicated_txns: dict[int, CompletedTxn] = {}
        self._map_end_offset = 0
        self._last_snapshot_offset = 0
        # producer id -> (producer epoch, guard) of a transaction verification under way
        # (KIP-890 part 1, Kafka's VerificationStateEntry); never snapshotted.
        self._verifications: dict[int, tuple[int, VerificationGuard]] = {}

    # -- transaction verification (KIP-890 part 1) ---------------------------------------------

    def maybe_start_verification(
        self, producer_id: int, producer_epoch: int
    ) -> VerificationGuard | None:
        """Before a transactional batch is appended as leader: None when the producer already
        has a transaction open here at this epoch (nothing to verify); else the guard to hold
        while the transaction coordinator is asked whether the partition is in the
        transaction. Concurrent requests of one producer and epoch share one guard."""
        entry = self._producers.get(producer_id)
        if (
            entry is not None
            and entry.producer_epoch == producer_epoch
            and entry.current_txn_first_offset is not None
        ):
            return None
        current = self._verifications.get(producer_id)
        if current is not None and current[0] == producer_epoch:
            return current[1]
        guard = VerificationGuard(producer_id, producer_epoch)
        self._verifications[producer_id] = (producer_epoch, guard)
        return guard

    def verification_holds(self, guard: VerificationGuard) -> bool:
        """True when no marker or newer epoch of the producer was appended since `guard` was
        handed out (or its transaction is already open here: a concurrent request opened it):
        the verified batch may be appended."""
        entry = self._producers.get(guard.producer_id)
        if (
            entry is not None
            and entry.producer_epoch == guard.producer_epoch
            and entry.current_txn_first_offset is not None
        ):
            return True
        current = self._verifications.get(guard.producer_id)
        return current is not None and current[1] is guard

    def _end_verification(self, producer_id: int) -> None:
        self._verifications.pop(producer_id, None)

    # -- queries -------------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The log offset up to which (exclusive) batches have been applied to this state."""
        return self._map_end_offset

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open or whose marker is not yet
        replicated (bounds the last stable offset); None when there is none."""
        first = next(iter(self._ongoing_txns), None)
        if self._unreplicated_txns:
            unreplicated = min(self._unreplicated_txns)
            first = unreplicated if first is None else min(first, unreplicated)
        return first

    @property
    def ongoing_txn_count(self) -> int:
        return len(self._ongoing_txns)

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """first offset -> producer id of every open transaction, oldest first."""
        return dict(self._ongoing_txns)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below the high watermark stop bounding the
        first unstable offset."""
        self._remove_unreplicated_txns(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_txns(log_start_offset)

    def _remove_unreplicated_txns(self, offset: int) -> None:
        if self._unreplicated_txns:
            for first_offset, txn in list(self._unreplicated_txns.items()):
                if txn.last_offset < offset:
                    del self._unreplicated_txns[first_offset]

    def is_producer_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp_ms >= self.producer_id_expiration_ms
        )

    # -- the append path -----------------------------------------------------------------------

    def check_append(self, header: BatchHeader, now_ms: int) -> BatchMetadata | None:
        """Validate a client batch as leader: the duplicate's metadata, or None to append it.

        `now_ms` is accepted for the log's convenience but deliberately not used to expire
        state here: producer expiry compares against the batches' own (client) timestamps, so a
        producer replaying old CreateTime data would otherwise lose its duplicate window on
        every append. Expiry happens only in remove_expired_producers, as in Kafka. Raises
        InvalidProducerEpochError, OutOfOrderSequenceError or InvalidRecordError.
        """
        if not header.has_producer_id:
            return None
        del now_ms  # see the docstring: expiry is remove_expired_producers' job alone
        entry = self._producers.get(header.producer_id)
        if entry is None:
            self._check_sequence_present(header)
            return None
        if not header.is_control:
            duplicate = entry.find_duplicate_batch(header)
            if duplicate is not None:
                return duplicate
        if header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id}: epoch {header.producer_epoch} is older than "
                f"the current epoch {entry.producer_epoch}"
            )
        if header.is_control:
            return None
        self._check_sequence_present(header)
        if header.producer_epoch != entry.producer_epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id}: new epoch {header.producer_epoch} must "
                    f"start at sequence 0, got {header.base_sequence}"
                )
        elif not in_sequence(entry.last_seq, header.base_sequence):
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} epoch {header.producer_epoch}: expected "
                f"sequence {next_sequence(entry.last_seq)}, got {header.base_sequence}"
            )
        if entry.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(
                f"producer {header.producer_id}: a non-transactional batch while its "
                f"transaction from offset {entry.current_txn_first_offset} is open"
            )
        return None

    def check_coordinator_append(self, header: BatchHeader) -> None:
        """Validate a data batch a coordinator appends (a transactional offset commit): no
        duplicate or sequence checks (it carries no sequence), but a producer epoch below the
        producer's -> InvalidProducerEpochError, and INVALID_TXN_STATE as for clients."""
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id}: epoch {header.producer_epoch} is older than "
                f"the current epoch {entry.producer_epoch}"
            )
        if entry.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(
                f"producer {header.producer_id}: a non-transactional batch while its "
                f"transaction from offset {entry.current_txn_first_offset} is open"
            )

    def check_end_txn_marker(self, header: BatchHeader, marker: EndTransactionMarker) -> None:
        """Validate a transaction marker the coordinator has the leader append (Kafka's
        appendEndTxnMarker, origin COORDINATOR): no sequence checks, but a producer epoch
        below the producer's -> InvalidProducerEpochError, a coordinator epoch below the one
        recorded for the producer -> TransactionCoordinatorFencedError."""
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id}: marker epoch {header.producer_epoch} is older "
                f"than the current epoch {entry.producer_epoch}"
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"producer {header.producer_id}: coordinator epoch {marker.coordinator_epoch} "
                f"is older than {entry.coordinator_epoch}"
            )

    @staticmethod
    def _check_sequence_present(header: BatchHeader) -> None:
        if not header.is_control and header.base_sequence < 0:
            raise InvalidRecordError(
                f"producer {header.producer_id}: batch has a producer id but no base sequence"
            )

    def on_batch_appended(
        self, header: BatchHeader, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Record a batch now in the log (final base_offset); leader, follower and recovery.

        Also advances map_end_offset past the batch. `marker` is a control batch's decoded
        end-transaction marker (None for an empty control batch: the cleaner removed it, it
        changes nothing). Returns the transaction a marker completed, if it held data.
        """
        assert header.base_offset >= self._map_end_offset, (
            f"batch at {header.base_offset} below map end offset {self._map_end_offset}: "
            "batches must be applied once, in log order"
        )
        self._map_end_offset = max(self._map_end_offset, header.next_offset)
        if not header.has_producer_id or (header.is_control and marker is None):
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
            self._producers[header.producer_id] = entry
        # A marker or a new epoch ends the verified transaction; a data batch opens it here
        # (then `verification_holds` sees the open transaction): the guard is done either way.
        self._end_verification(header.producer_id)
        entry.maybe_update_producer_epoch(header.producer_epoch)
        entry.last_timestamp_ms = header.max_timestamp
        if marker is not None:
            return self._complete_txn(entry, header.base_offset, marker)
        entry.batches.append(
            BatchMetadata(
                first_seq=header.base_sequence,
                last_seq=header.last_sequence,
                first_offset=header.base_offset,
                last_offset=header.last_offset,
                timestamp_ms=header.max_timestamp,
            )
        )
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = header.base_offset
            self._ongoing_txns[header.base_offset] = header.producer_id
        return None

    def _complete_txn(
        self, entry: ProducerStateEntry, marker_offset: int, marker: EndTransactionMarker
    ) -> CompletedTxn | None:
        """The marker at `marker_offset` ends the entry's transaction (Kafka: only a
        transaction that holds data yields a CompletedTxn)."""
        entry.coordinator_epoch = marker.coordinator_epoch
        first_offset = entry.current_txn_first_offset
        if first_offset is None:
            return None
        entry.current_txn_first_offset = None
        self._ongoing_txns.pop(first_offset, None)
        next_other = next(iter(self._ongoing_txns), None)  # the producer's own one is gone
        completed = CompletedTxn(
            producer_id=entry.producer_id,
            first_offset=first_offset,
            last_offset=marker_offset,
            is_aborted=marker.control_type == ControlRecordType.ABORT,
            last_stable_offset=marker_offset + 1 if next_other is None else next_other,
        )
        self._unreplicated_txns[first_offset] = completed
        return completed

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    def advance_map_end_offset(self, offset: int) -> None:
        """Raise map_end_offset to `offset` if below: a batch without a producer id was
        appended (it changes no producer's state)."""
        if offset > self._map_end_offset:
            self._map_end_offset = offset

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms with no open transaction."""
        expired = [pid for pid, e in self._producers.items() if self.is_producer_expired(e, now_ms)]
        for pid in expired:
            del self._producers[pid]
        return expired

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        if self.partition_dir is None:
            return []
        try:
            names = [p.name for p in self.partition_dir.iterdir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise KafkaStorageError(f"cannot list {self.partition_dir}: {exc}") from exc
        return sorted(int(m.group(1)) for n in names if (m := _SNAPSHOT_NAME.match(n)))

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def oldest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[0] if offsets else None

    def take_snapshot(self) -> Path | None:
        """Write `<map_end_offset>.snapshot` unless one at or past it was already taken."""
        if self.partition_dir is None or self._map_end_offset <= self._last_snapshot_offset:
            return None
        path = snapshot_path(self.partition_dir, self._map_end_offset)
        atomic_write_bytes(path, encode_snapshot(list(self._producers.values())))
        self._last_snapshot_offset = self._map_end_offset
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot_offset in self.snapshot_offsets():
            if snapshot_offset < offset:
                self._delete_snapshot(snapshot_offset)

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None) -> None:
        """Restore from the newest valid snapshot at or below log_end_offset.

        Newer snapshots are deleted; corrupt ones are deleted and the next older one is tried.
        Afterwards map_end_offset says where the log must replay its batches from (the
        snapshot's offset, or log_start_offset if that is later or no snapshot exists).
        Producers already expired at `now_ms` are not loaded.
        """
        for snapshot_offset in self.snapshot_offsets():
            if snapshot_offset > log_end_offset:
                self._delete_snapshot(snapshot_offset)
        self._clear()
        self._load_from_snapshot(log_start_offset, now_ms)

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> None:
        """After the log was truncated: drop out-of-range snapshots and reload if needed.

        Like Kafka, snapshots past log_end_offset or at/below log_start_offset are deleted; if
        the state no longer ends at log_end_offset it is rebuilt from the newest remaining
        snapshot (the log then replays from map_end_offset).
        """
        for snapshot_offset in self.snapshot_offsets():
            if snapshot_offset > log_end_offset or snapshot_offset <= log_start_offset:
                self._delete_snapshot(snapshot_offset)
        if log_end_offset != self._map_end_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        elif self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset

    def start_empty_at(self, offset: int) -> None:
        """A new partition directory (it holds no snapshot): no producers, the map ends at
        `offset`; what `load` gives there, without listing the directory."""
        self._clear()
        self._last_snapshot_offset = self._map_end_offset = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The log was emptied and restarts at `offset`: no producers, no snapshots."""
        self._clear()
        for snapshot_offset in self.snapshot_offsets():
            self._delete_snapshot(snapshot_offset)
        self._last_snapshot_offset = 0
        self._map_end_offset = offset

    def _clear(self) -> None:
        self._verifications.clear()
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int | None) -> None:
        for snapshot_offset in reversed(self.snapshot_offsets()):
            assert self.partition_dir is not None
            try:
                entries = read_snapshot_file(snapshot_path(self.partition_dir, snapshot_offset))
            except CorruptSnapshotError:
                self._delete_snapshot(snapshot_offset)  # Kafka deletes it and tries the next
                continue
            for entry in entries:
                if now_ms is None or not self.is_producer_expired(entry, now_ms):
                    self._producers[entry.producer_id] = entry
            open_txns = sorted(
                (e.current_txn_first_offset, e.producer_id)
                for e in self._producers.values()
                if e.current_txn_first_offset is not None
            )
            self._ongoing_txns = dict(open_txns)
            self._last_snapshot_offset = snapshot_offset
            self._map_end_offset = max(snapshot_offset, log_start_offset)
            return
        self._last_snapshot_offset = log_start_offset
        self._map_end_offset = log_start_offset

    def _delete_snapshot(self, offset: int) -> None:
        assert self.partition_dir is not None
        try:
            snapshot_path(self.partition_dir, offset).unlink(missing_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete snapshot {offset}: {exc}") from exc
        fsync_directory(self.partition_dir)
