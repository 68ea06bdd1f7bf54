"""GcTuning: CPython's cyclic garbage collector tuned while at least one Producer is open.

Theory of operation. Per-record sends keep a few GC-tracked objects alive per record until
its batch is acknowledged (the record's handle, the caller's callback and its closure). With
CPython's default thresholds (700, 10, 10) that in-flight backlog (thousands of records at
acks=all) makes a young collection run every few hundred records, each one walking the whole
backlog and promoting it; every 100th young collection is then a full collection walking the
entire heap (30-40 ms with trio loaded). Measured on 100,000 100-byte records: 0.6-0.8 us of
the producer's ~4 us per record, and most of the client CPU difference between acks=all
(bigger backlog) and acks=1.

While producers are open (reference counted, process-wide, thread-safe):

1. the objects alive when the first producer opens are frozen (`gc.freeze`: moved to the
   permanent generation, which no collection walks), and unfrozen when the last producer
   closes, so any garbage among them becomes collectable again;
2. the young-generation threshold is raised to `YOUNG_THRESHOLD` (a larger one the
   application set is kept), restored when the last producer closes unless the application
   changed it meanwhile.

Nothing is done when the collector is disabled or the application froze objects itself
(`gc.get_freeze_count() > 0`: unfreezing at close would undo its freeze); an application that
calls `gc.freeze()` while a producer is open has its freeze undone when the last producer
closes. Cost: cyclic garbage among the frozen start-up objects waits for that close, and up
to YOUNG_THRESHOLD young objects (a few MB) wait for a collection. `Producer(...,
gc_tuning=False)` opts out.
"""

from __future__ import annotations

import gc
import threading

# Young collections every 10,000 net allocations instead of 700: the in-flight backlog of a
# busy producer (about 3 tracked objects per unacknowledged record) then rarely outlives a
# collection, so it is neither walked again and again nor promoted towards full collections.
YOUNG_THRESHOLD = 10_000


class GcTuning:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active_count = 0
        self._tuned = False
        self._froze = False
        self._saved_thresholds: tuple[int, int, int] | None = None

    @property
    def active_count(self) -> int:
        return self._active_count

    def enter(self) -> None:
        """A producer opens: tune if it is the first one (see the module docstring)."""
        with self._lock:
            self._active_count += 1
            if self._active_count > 1 or not gc.isenabled():
                return
            self._tuned = True
            if gc.get_freeze_count() == 0:
                gc.freeze()
                self._froze = True
            thresholds = gc.get_threshold()
            if thresholds[0] < YOUNG_THRESHOLD:
                self._saved_thresholds = thresholds
                gc.set_threshold(YOUNG_THRESHOLD, *thresholds[1:])

    def exit(self) -> None:
        """A producer closed: undo the tuning if it was the last one."""
        with self._lock:
            assert self._active_count > 0, "exit without enter"
            self._active_count -= 1
            if self._active_count > 0 or not self._tuned:
                return
            self._tuned = False
            if self._froze:
                gc.unfreeze()
                self._froze = False
            saved = self._saved_thresholds
            self._saved_thresholds = None
            if saved is not None and gc.get_threshold()[0] == YOUNG_THRESHOLD:
                gc.set_threshold(*saved)


GC_TUNING = GcTuning()  # the process's one instance: the collector is process-wide
