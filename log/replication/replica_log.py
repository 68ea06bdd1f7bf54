"""What the replication cores need from a partition's log, and nothing more.

The replication cores (`partition_state`, `follower_state`) read the log through this Protocol
and tell their driver what to change; they never append records themselves (appending needs the
bytes, which only the driver holds). `log/storage/log.py`'s `UnifiedLog` is meant to satisfy it;
the tests use a small in-memory reference log.

Leader-epoch vocabulary (Kafka's `LeaderEpochFileCache`):

- `latest_epoch` is the leader epoch of the newest epoch-cache entry, `UNDEFINED_EPOCH` (-1) when
  the cache is empty (no epoch information: the follower falls back to the high watermark).
- `end_offset_for_epoch(e)` answers OffsetsForLeaderEpoch: `(largest known epoch <= e, start
  offset of the first epoch > e)`, `(latest_epoch, log_end_offset)` when `e == latest_epoch`, and
  `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` when `e` is newer than every known epoch. When `e`
  is older than every known epoch the answer is `(e, start offset of the first epoch)`.
"""

from __future__ import annotations

from typing import Protocol

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
# A follower's log end offset as the leader knows it before the follower's first fetch.
UNKNOWN_OFFSET = -1


class ReplicaLog(Protocol):
    """The read side and the metadata mutations of one partition's local log."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def latest_epoch(self) -> int: ...

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """`(leader_epoch, end_offset)` as described in the module docstring."""
        ...

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]; return it."""
        ...

    def maybe_increment_log_start_offset(self, offset: int) -> None: ...

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that `leader_epoch` starts at `start_offset` (a new leader does this at LEO)."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above `offset` and every epoch entry starting there.

        Even when `offset >= log_end_offset` (nothing to drop), epoch entries starting at the log
        end offset must go, as Kafka does: a deposed leader that assigned its epoch's start but
        appended nothing keeps such an entry, and with Fetch v12 `last_fetched_epoch` it would
        be told to diverge again and again (the simulation found this livelock)."""
        ...

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything; the log restarts empty at `offset`."""
        ...
