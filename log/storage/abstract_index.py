"""AbstractIndex: what the offset index and the time index share (Kafka's AbstractIndex).

Both are sparse indexes of one segment, with fixed-size big-endian entries of two fields in an
exact-sized file (index_file.py), and keep those fields in memory as two parallel arrays for
binary search. One of the fields is `relative_offsets` (u32: an offset minus the segment's base
offset), so truncating by offset is the same for both. The base loads a file (rejecting a
missing, torn, disordered or overfull one with CorruptIndexError, so the segment rebuilds it
from its log), counts entries, says when the index is full, appends an entry to the arrays and
the file, truncates, and passes flush, close and delete to the file. A subclass declares its
entry layout (`ENTRY`, `FIELDS`) and keeps its own lookups and append rules.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from typing import ClassVar, NamedTuple

from log.common.errors import KafkaStorageError
from log.storage.index_file import IndexFile

U32_MAX = (1 << 32) - 1


class CorruptIndexError(KafkaStorageError):
    """An index file that cannot be trusted; the segment rebuilds it from the log."""


class IndexField(NamedTuple):
    """One field of an entry: the attribute holding its array, the array's typecode, and
    whether its values must strictly increase from entry to entry (else never decrease)."""

    name: str
    typecode: str
    strictly_increasing: bool


def check_increasing(values: array, *, strict: bool) -> bool:
    """True when `values` increase (strictly or not); one pass, no per-pair Python objects."""
    if len(values) < 2:
        return True
    pairs = zip(values, values[1:], strict=False)
    if strict:
        return all(a < b for a, b in pairs)
    return all(a <= b for a, b in pairs)


class AbstractIndex:
    """Two parallel arrays backed by an exact-sized file; see the module docstring."""

    ENTRY: ClassVar[struct.Struct]  # one entry's layout, its fields in FIELDS order
    FIELDS: ClassVar[tuple[IndexField, IndexField]]
    # Entries a loaded file may hold beyond max_entries (the time index's closing entry).
    EXTRA_ENTRIES_ON_LOAD: ClassVar[int] = 0

    relative_offsets: array

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.file = IndexFile(path, self.ENTRY.size)
        self._set_columns(tuple(array(f.typecode) for f in self.FIELDS))

    def _columns(self) -> tuple[array, ...]:
        return tuple(getattr(self, f.name) for f in self.FIELDS)

    def _set_columns(self, columns: tuple[array, ...]) -> None:
        for field, column in zip(self.FIELDS, columns, strict=True):
            setattr(self, field.name, column)

    # -- loading -------------------------------------------------------------------------------

    def parse(self, data: bytes) -> tuple[array, ...]:
        """The file's bytes as one array per field (the length is a whole number of entries)."""
        columns = tuple(array(f.typecode) for f in self.FIELDS)
        for entry in self.ENTRY.iter_unpack(data):
            for column, value in zip(columns, entry, strict=True):
                column.append(value)
        return columns

    def load(self) -> None:
        """Read the file; raise CorruptIndexError when missing, torn, disordered or overfull."""
        data = self.file.read_all()
        if data is None:
            raise CorruptIndexError(f"{self.file.path} missing")
        if len(data) % self.ENTRY.size:
            raise CorruptIndexError(
                f"{self.file.path} length {len(data)} is not a multiple of {self.ENTRY.size}"
            )
        columns = self.parse(data)
        if not all(
            check_increasing(column, strict=field.strictly_increasing)
            for field, column in zip(self.FIELDS, columns, strict=True)
        ):
            raise CorruptIndexError(f"{self.file.path} entries not increasing")
        if len(columns[0]) > self.max_entries + self.EXTRA_ENTRIES_ON_LOAD:
            raise CorruptIndexError(f"{self.file.path} holds more than {self.max_entries}")
        self._set_columns(columns)

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self._set_columns(tuple(array(f.typecode) for f in self.FIELDS))
        self.file.reset()

    # -- queries ------------------------------------------------------------------------------

    @property
    def entry_count(self) -> int:
        return len(self.relative_offsets)

    @property
    def is_full(self) -> bool:
        return len(self.relative_offsets) >= self.max_entries

    # -- mutation -----------------------------------------------------------------------------

    def _append_entry(self, *entry: int) -> None:
        """Add one entry (fields in FIELDS order) to the arrays and the file; the subclass has
        checked it."""
        for column, value in zip(self._columns(), entry, strict=True):
            column.append(value)
        self.file.append(self.ENTRY.pack(*entry))

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset`."""
        if offset <= self.base_offset:
            keep = 0
        else:
            keep = bisect_left(self.relative_offsets, min(offset - self.base_offset, U32_MAX + 1))
        if keep < len(self.relative_offsets):
            for column in self._columns():
                del column[keep:]
            self.file.truncate_entries(keep)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def delete(self) -> None:
        self.file.delete()
