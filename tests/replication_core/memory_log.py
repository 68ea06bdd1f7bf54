"""An in-memory reference log implementing `ReplicaLog`, with a disk that loses unflushed writes.

The thing under test is the replication logic, so the log is a plain list of batches:
`Batch(base_offset, last_offset, leader_epoch, payload)`. The leader-epoch cache is a list of
`(leader_epoch, start_offset)` entries, maintained as Kafka's LeaderEpochFileCache is (assigned on
append and by a new leader at its log end offset, cut on truncation).

`crash()` models a process crash: batches past the last `flush()` are lost, the high watermark
falls back to its last checkpoint (clamped to what survived), as a restarted Kafka broker finds it.
"""

from __future__ import annotations

from typing import NamedTuple

from log.replication.replica_log import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


class Batch(NamedTuple):
    base_offset: int
    last_offset: int
    leader_epoch: int
    payload: str

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size_bytes(self) -> int:
        return 61 + len(self.payload)


class MemoryLog:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.epochs: list[tuple[int, int]] = []  # (leader_epoch, start_offset), increasing
        self._log_start_offset = 0
        self._high_watermark = 0
        self.flushed_offset = 0  # recovery point: batches below it survive a crash
        self.high_watermark_checkpoint = 0

    # ------------------------------------------------------------------ ReplicaLog
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else UNDEFINED_EPOCH

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        if leader_epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if leader_epoch == self.latest_epoch:
            return leader_epoch, self.log_end_offset
        higher = [(e, s) for e, s in self.epochs if e > leader_epoch]
        if not higher:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [(e, s) for e, s in self.epochs if e <= leader_epoch]
        floor_epoch = floor[-1][0] if floor else leader_epoch
        return floor_epoch, higher[0][1]

    def update_high_watermark(self, offset: int) -> int:
        self._high_watermark = max(self._log_start_offset, min(offset, self.log_end_offset))
        return self._high_watermark

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        offset = min(offset, self._high_watermark)
        self._log_start_offset = offset
        self.batches = [b for b in self.batches if b.last_offset >= offset]

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        if self.epochs and self.epochs[-1][0] >= leader_epoch:
            assert self.epochs[-1][0] == leader_epoch or start_offset >= self.epochs[-1][1]
            return
        assert not self.epochs or start_offset >= self.epochs[-1][1], (self.epochs, start_offset)
        self.epochs.append((leader_epoch, start_offset))

    def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            # Like Kafka: still cut epoch entries at the log end (a leader that assigned its epoch
            # start but appended nothing before losing leadership leaves such an entry behind).
            self.epochs = [(e, s) for e, s in self.epochs if s < self.log_end_offset]
            return
        assert offset >= self._log_start_offset, (offset, self._log_start_offset)
        assert all(b.base_offset >= offset or b.last_offset < offset for b in self.batches)
        self.batches = [b for b in self.batches if b.base_offset < offset]
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]
        self._high_watermark = min(self._high_watermark, offset)
        self.flushed_offset = min(self.flushed_offset, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.batches = []
        self.epochs = []
        self._log_start_offset = offset
        self._high_watermark = offset
        self.flushed_offset = offset

    # ------------------------------------------------------------------ appends and reads
    def append_as_leader(self, payload: str, record_count: int, leader_epoch: int) -> Batch:
        assert record_count > 0
        base = self.log_end_offset
        batch = Batch(base, base + record_count - 1, leader_epoch, payload)
        self._append(batch)
        return batch

    def append_as_follower(self, batches: list[Batch]) -> None:
        for batch in batches:
            assert batch.base_offset == self.log_end_offset, (batch, self.log_end_offset)
            self._append(batch)

    def _append(self, batch: Batch) -> None:
        assert batch.leader_epoch >= self.latest_epoch, (batch, self.epochs)
        self.maybe_assign_epoch_start_offset(batch.leader_epoch, batch.base_offset)
        self.batches.append(batch)

    def read(self, fetch_offset: int, max_bytes: int, upper_offset: int) -> list[Batch]:
        """Whole batches from fetch_offset below upper_offset; the first one always fits."""
        out: list[Batch] = []
        size_bytes = 0
        for batch in self.batches:
            if batch.last_offset < fetch_offset or batch.next_offset > upper_offset:
                continue
            if out and size_bytes + batch.size_bytes > max_bytes:
                break
            out.append(batch)
            size_bytes += batch.size_bytes
        return out

    def bytes_between(self, fetch_offset: int, upper_offset: int) -> int:
        return sum(b.size_bytes for b in self.read(fetch_offset, 1 << 62, upper_offset))

    def batch_at(self, base_offset: int) -> Batch | None:
        for batch in self.batches:
            if batch.base_offset == base_offset:
                return batch
        return None

    # ------------------------------------------------------------------ the disk
    def flush(self) -> None:
        self.flushed_offset = self.log_end_offset
        self.high_watermark_checkpoint = self._high_watermark

    def checkpoint_high_watermark(self) -> None:
        self.high_watermark_checkpoint = self._high_watermark

    def crash(self, lose_unflushed: bool) -> None:
        """A process crash (page cache survives) or, with `lose_unflushed`, a power failure."""
        if lose_unflushed:
            self.batches = [b for b in self.batches if b.next_offset <= self.flushed_offset]
        leo = self.log_end_offset
        self.epochs = [(e, s) for e, s in self.epochs if s < leo]
        self._high_watermark = max(self._log_start_offset, min(self.high_watermark_checkpoint, leo))
