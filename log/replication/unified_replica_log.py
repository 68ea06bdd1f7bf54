"""`UnifiedReplicaLog`: a `UnifiedLog` seen through the `ReplicaLog` protocol the cores read.

`UnifiedLog` speaks storage's dialect (no epoch is `None`, the epoch cache is an attribute, the
log start offset moves through DeleteRecords); the replication cores speak Kafka's
(`UNDEFINED_EPOCH`, `maybe_assign_epoch_start_offset`, `maybe_increment_log_start_offset`).
This adapter translates, nothing more; it holds no state of its own.
"""

from __future__ import annotations

from log.replication.replica_log import UNDEFINED_EPOCH
from log.storage.log import UnifiedLog


class UnifiedReplicaLog:
    __slots__ = ("log",)

    def __init__(self, log: UnifiedLog) -> None:
        self.log = log

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def latest_epoch(self) -> int:
        epoch = self.log.latest_epoch
        return UNDEFINED_EPOCH if epoch is None else epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        return self.log.end_offset_for_epoch(leader_epoch)

    def update_high_watermark(self, offset: int) -> int:
        return self.log.update_high_watermark(offset)

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        # A follower adopts the leader's log start offset only up to its own high watermark
        # (DeleteRecords' rule); the rest follows once the HW catches up.
        target = min(offset, self.log.high_watermark)
        if target > self.log.log_start_offset:
            self.log.delete_records_before(target)

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        self.log.leader_epoch_cache.assign(leader_epoch, start_offset)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
