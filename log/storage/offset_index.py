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
segment. Files are exact-sized rather than preallocated (see index_file.py); loading,
truncation and the file belong to AbstractIndex (abstract_index.py).
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right

from log.storage.abstract_index import U32_MAX, AbstractIndex, CorruptIndexError, IndexField

ENTRY_BYTES = 8
assert array("I").itemsize == 4


def parse_entries(data: bytes, entry_bytes: int = ENTRY_BYTES) -> tuple[array, array]:
    """Split big-endian (u32, u32) entries into two arrays; raise CorruptIndexError if torn."""
    if len(data) % entry_bytes:
        raise CorruptIndexError(f"index length {len(data)} is not a multiple of {entry_bytes}")
    words = array("I")
    words.frombytes(data)
    if sys.byteorder == "little":
        words.byteswap()
    return words[0::2], words[1::2]


class OffsetIndex(AbstractIndex):
    """In-memory sparse offset index backed by an exact-sized `.index` file."""

    ENTRY = struct.Struct(">II")
    FIELDS = (
        IndexField("relative_offsets", "I", strictly_increasing=True),
        IndexField("positions", "I", strictly_increasing=True),
    )
    positions: array

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        assert max_index_bytes >= ENTRY_BYTES
        super().__init__(path, base_offset, max_index_bytes // ENTRY_BYTES)

    def parse(self, data: bytes) -> tuple[array, array]:
        return parse_entries(data)  # both fields u32: one array, byte-swapped, split

    # -- queries ------------------------------------------------------------------------------

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
        self._append_entry(relative, position)
