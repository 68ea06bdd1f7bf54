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
rejected and rebuilt by the segment.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left

from log.storage.index_file import IndexFile
from log.storage.offset_index import U32_MAX, CorruptIndexError, check_increasing

ENTRY_BYTES = 12
_ENTRY = struct.Struct(">qI")
assert array("q").itemsize == 8


class TimeIndex:
    """In-memory sparse time index backed by an exact-sized `.timeindex` file."""

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // ENTRY_BYTES)
        self.timestamps = array("q")
        self.relative_offsets = array("I")
        self.file = IndexFile(path, ENTRY_BYTES)

    def load(self) -> None:
        data = self.file.read_all()
        if data is None:
            raise CorruptIndexError(f"{self.file.path} missing")
        if len(data) % ENTRY_BYTES:
            raise CorruptIndexError(f"{self.file.path} length {len(data)} torn")
        count = len(data) // ENTRY_BYTES
        timestamps = array("q")
        relative_offsets = array("I")
        for timestamp, relative in _ENTRY.iter_unpack(data):
            timestamps.append(timestamp)
            relative_offsets.append(relative)
        if not (
            check_increasing(timestamps, strict=True)
            and check_increasing(relative_offsets, strict=False)
        ):
            raise CorruptIndexError(f"{self.file.path} entries not increasing")
        if count > self.max_entries + 1:
            raise CorruptIndexError(f"{self.file.path} holds more than {self.max_entries}")
        self.timestamps = timestamps
        self.relative_offsets = relative_offsets

    def reset(self) -> None:
        self.timestamps = array("q")
        self.relative_offsets = array("I")
        self.file.reset()

    @property
    def entry_count(self) -> int:
        return len(self.timestamps)

    @property
    def is_full(self) -> bool:
        return len(self.timestamps) >= self.max_entries

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
        self.timestamps.append(timestamp)
        self.relative_offsets.append(relative)
        self.file.append(_ENTRY.pack(timestamp, relative))
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset`."""
        if offset <= self.base_offset:
            keep = 0
        else:
            keep = bisect_left(self.relative_offsets, min(offset - self.base_offset, U32_MAX + 1))
        if keep < len(self.timestamps):
            del self.timestamps[keep:]
            del self.relative_offsets[keep:]
            self.file.truncate_entries(keep)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def delete(self) -> None:
        self.file.delete()
