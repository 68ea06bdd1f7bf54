"""MetadataStateMachine: what the Raft binding (quorum/raft.py) drives.

The binding calls `apply(metadata_offset, payload)` for every committed metadata entry, in log
order, on every controller; `metadata_offset` is the Raft index of the entry (strictly increasing,
gaps allowed). apply() is deterministic (no clock, no randomness, no node-local state) and NEVER
raises: a payload that does not decode, or a batch that breaks an image invariant (stale
controller epoch, producer ids going back, a stale partition epoch, ...), is rejected as a whole;
the rejection is counted and remembered (bounded), the image content stays as it was, and
`last_applied_offset` still advances (the entry has been applied, as a no-op).

An entry at or below `last_applied_offset` (the journal replayed after a checkpoint was loaded)
is skipped: counted in `skipped_count`, not as a rejection, and nothing changes.

`image` is immutable and replaced wholesale on each accepted batch, so another thread may read
`state_machine.image` (one reference load) without locking.

Checkpoints: `to_checkpoint()` is the whole state (image + last applied offset) in checkpoint.py's
CRC-checked format; a pysyncobj serializer writes these bytes (plus its own small tuple) and the
deserializer calls `from_checkpoint()`, which raises only CorruptImageError.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass

from log.common.errors import ErrorCode, KafkaError
from quorum.checkpoint import CorruptImageError, decode_checkpoint, encode_checkpoint
from quorum.image import MetadataImage, replay_batch
from quorum.records import decode_batch

MAX_REMEMBERED_REJECTIONS = 100


@dataclass(frozen=True)
class ApplyResult:
    metadata_offset: int
    accepted: bool
    proposal_id: int = -1  # -1 when the payload did not decode
    controller_epoch: int = -1
    error_code: ErrorCode = ErrorCode.NONE
    reason: str = ""


class MetadataStateMachine:
    """What the Raft binding drives. apply() is deterministic and NEVER raises."""

    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image: MetadataImage = image if image is not None else MetadataImage()
        self.rejected_count = 0
        self.skipped_count = 0
        self.rejected: collections.deque[ApplyResult] = collections.deque(
            maxlen=MAX_REMEMBERED_REJECTIONS
        )

    @property
    def last_applied_offset(self) -> int:
        return self.image.last_offset

    def apply(self, metadata_offset: int, payload: bytes) -> ApplyResult:
        proposal_id = controller_epoch = -1
        try:
            if not isinstance(metadata_offset, int) or metadata_offset <= self.image.last_offset:
                # A replayed entry (e.g. journal replay after a checkpoint): already reflected.
                self.skipped_count += 1
                return ApplyResult(
                    metadata_offset,
                    False,
                    error_code=ErrorCode.INVALID_REQUEST,
                    reason="offset already applied",
                )
            batch = decode_batch(payload)
            proposal_id, controller_epoch = batch.proposal_id, batch.controller_epoch
            self.image = replay_batch(self.image, batch, metadata_offset)
            return ApplyResult(metadata_offset, True, proposal_id, controller_epoch)
        except KafkaError as e:  # the batch breaks a rule: refused, the same way everywhere
            error_code, reason = e.error_code, str(e)
        # Anything else (a bug, memory) propagates: applying a committed batch halfway or not at
        # all on one node only would make its image diverge; the caller stops the node.
        self._advance(metadata_offset)
        return self._reject(metadata_offset, proposal_id, controller_epoch, error_code, reason)

    def _advance(self, metadata_offset: int) -> None:
        if isinstance(metadata_offset, int) and metadata_offset > self.image.last_offset:
            self.image = dataclasses.replace(self.image, last_offset=metadata_offset)

    def _reject(
        self,
        metadata_offset: int,
        proposal_id: int,
        controller_epoch: int,
        error_code: ErrorCode,
        reason: str,
    ) -> ApplyResult:
        result = ApplyResult(
            metadata_offset, False, proposal_id, controller_epoch, error_code, reason
        )
        self.rejected_count += 1
        self.rejected.append(result)
        return result

    def to_checkpoint(self) -> bytes:
        return encode_checkpoint(self.image)

    @classmethod
    def from_checkpoint(cls, data: bytes) -> MetadataStateMachine:
        """Raises CorruptImageError (never anything else) for a bad blob."""
        try:
            return cls(decode_checkpoint(data))
        except CorruptImageError:
            raise
        except Exception as e:
            raise CorruptImageError(f"unreadable checkpoint: {type(e).__name__}: {e}") from e

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetadataStateMachine) and self.image == other.image

    __hash__ = None  # type: ignore[assignment]  # unhashable (mutable); typeshed types __hash__ as a method
