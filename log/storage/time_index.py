"""TimeIndex: the sparse `.timeindex` file mapping timestamps to offsets in a segment.

Layout (Kafka's, big-endian), one 12-byte entry::

    offset  size  field
         0     8  timestamp        i64  the segment's max timestamp so far (ms)
         8     4  relative_offset  u32  last offset of the batch carrying it - base offset

The segment tries an entry at the same moments as the offset index (every
`index.interval.bytes`), and one is only added when the max timestamp grew past the last
entry's, so timestamps strictly increase and offsets never decrease. `lookup_before(ts)`
returns the last entry with a timestamp strictly below `ts`: every batch up to that offset has
max timestamp < ts, so a scan for the first batch whose max timestamp >= ts may start there.
(Kafka looks up `<=`; strict `<` avoids skipping an earlier batch with an equal timestamp.)
Files are exact-sized, not preallocated (see index_file.py); a torn or disordered file is
rejected and rebuilt by the segment (loading, truncation and the file: abstract_index.py).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left

from log.storage.abstract_index import U32_MAX, AbstractIndex, IndexField

ENTRY_BYTES = 12
assert array("q").itemsize == 8


class TimeIndex(AbstractIndex):
    """In-memory sparse time index backed by an exact-sized `.timeindex` file."""

    ENTRY = struct.Struct(">qI")
    FIELDS = (
        IndexField("timestamps", "q", strictly_increasing=True),
        IndexField("relative_offsets", "I", strictly_increasing=False),
    )
    EXTRA_ENTRIES_ON_LOAD = 1  # the closing entry maybe_append lets past a full index
    timestamps: array

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max(1, max_index_bytes // ENTRY_BYTES))

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry, or None when empty."""
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def lookup_before(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry with timestamp < `timestamp`, else None."""
        slot = bisect_left(self.timestamps, timestamp) - 1
        if slot < 0:
            return None
        return self.timestamps[slot], self.base_offset + self.relative_offsets[slot]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if the timestamp grew past the last entry's; say whether.

        `skip_full_check` lets the closing entry of a segment through (Kafka does the same), so
        the segment's largest timestamp survives a restart; load allows that one extra entry.
        """
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return False
        if self.is_full and not skip_full_check:
            return False
        relative = offset - self.base_offset
        assert 0 <= relative <= U32_MAX
        if self.relative_offsets:
            assert relative >= self.relative_offsets[-1]
        self._append_entry(timestamp, relative)
        return True
