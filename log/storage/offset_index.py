"""OffsetIndex: the sparse `.index` file mapping offsets to byte positions in a segment's `.log`.

Layout (Kafka's, big-endian), one 8-byte entry per indexed batch::

    offset  size  field
         0     4  relative_offset  u32  batch's last offset - segment base offset
         4     4  position         u32  byte position of that batch in the .log file

The segment adds an entry for a batch when more than `index.interval.bytes` of log were
appended since the previous entry, so the index is sparse: `lookup(offset)` returns the entry
with the largest offset <= the target (binary search over an in-memory `array('I')`), and the
segment scans batch headers forward from that position. Entries strictly increase in both
fields; a file that breaks that, or has a torn tail, is rejected by `parse_entries` and the
segment rebuilds it. The index is full at `segment.index.bytes // 8` entries, which rolls the
segment. Files are exact-sized rather than preallocated (see index_file.py).
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right

from log.common.errors import KafkaStorageError
from log.storage.index_file import IndexFile

ENTRY_BYTES = 8
_ENTRY = struct.Struct(">II")
U32_MAX = (1 << 32) - 1
assert array("I").itemsize == 4


class CorruptIndexError(KafkaStorageError):
    """An index file that cannot be trusted; the segment rebuilds it from the log."""


def parse_entries(data: bytes, entry_bytes: int = ENTRY_BYTES) -> tuple[array, array]:
    """Split big-endian (u32, u32) entries into two arrays; raise CorruptIndexError if torn."""
    if len(data) % entry_bytes:
        raise CorruptIndexError(f"index length {len(data)} is not a multiple of {entry_bytes}")
    words = array("I")
    words.frombytes(data)
    if sys.byteorder == "little":
        words.byteswap()
    return words[0::2], words[1::2]


def check_increasing(values: array, *, strict: bool) -> bool:
    """True when `values` increase (strictly or not); one pass, no per-pair Python objects."""
    if len(values) < 2:
        return True
    pairs = zip(values, values[1:], strict=False)
    if strict:
        return all(a < b for a, b in pairs)
    return all(a <= b for a, b in pairs)


class OffsetIndex:
    """In-memory sparse offset index backed by an exact-sized `.index` file."""

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        assert max_index_bytes >= ENTRY_BYTES
        self.base_offset = base_offset
        self.max_entries = max_index_bytes // ENTRY_BYTES
        self.relative_offsets = array("I")
        self.positions = array("I")
        self.file = IndexFile(path, ENTRY_BYTES)

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file; raise CorruptIndexError when missing, torn or not increasing."""
        data = self.file.read_all()
        if data is None:
            raise CorruptIndexError(f"{self.file.path} missing")
        relative_offsets, positions = parse_entries(data)
        if not (
            check_increasing(relative_offsets, strict=True)
            and check_increasing(positions, strict=True)
        ):
            raise CorruptIndexError(f"{self.file.path} entries not increasing")
        if len(relative_offsets) > self.max_entries:
            raise CorruptIndexError(f"{self.file.path} holds more than {self.max_entries}")
        self.relative_offsets = relative_offsets
        self.positions = positions

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self.relative_offsets = array("I")
        self.positions = array("I")
        self.file.reset()

    # -- queries ------------------------------------------------------------------------------

    @property
    def entry_count(self) -> int:
        return len(self.relative_offsets)

    @property
    def is_full(self) -> bool:
        return len(self.relative_offsets) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return len(self.relative_offsets) * ENTRY_BYTES

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self.relative_offsets:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[-1], self.positions[-1]

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the entry with the largest offset <= `offset`, else (base, 0)."""
        relative = offset - self.base_offset
        if relative < 0 or not self.relative_offsets:
            return self.base_offset, 0
        slot = bisect_right(self.relative_offsets, min(relative, U32_MAX)) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[slot], self.positions[slot]

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= U32_MAX

    # -- mutation -----------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        assert not self.is_full, "append to a full offset index (the segment must roll)"
        assert 0 <= relative <= U32_MAX and 0 <= position <= U32_MAX
        if self.relative_offsets:
            assert relative > self.relative_offsets[-1] and position > self.positions[-1]
        self.relative_offsets.append(relative)
        self.positions.append(position)
        self.file.append(_ENTRY.pack(relative, position))

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset`."""
        if offset <= self.base_offset:
            keep = 0
        else:
            keep = bisect_right(self.relative_offsets, min(offset - self.base_offset - 1, U32_MAX))
        if keep < len(self.relative_offsets):
            del self.relative_offsets[keep:]
            del self.positions[keep:]
            self.file.truncate_entries(keep)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def delete(self) -> None:
        self.file.delete()
