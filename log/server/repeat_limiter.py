"""RepeatLimiter: the same warning at most once per interval, then how many were held back.

Some lines can repeat as fast as clients or peers retry (a refused connection per accept, a
peer that keeps failing): one line per event would bury the log. Each key logs its first
event, then at most one line per `interval_s` saying how many like it were suppressed since.
Keys are bounded (the oldest is forgotten), so a stream of distinct keys costs little memory.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

MAX_KEYS = 1024


class RepeatLimiter:
    def __init__(self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.clock = clock
        self._state: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()

    def log(
        self, logger: logging.Logger, level: int, key: Hashable, msg: str, *args: object
    ) -> bool:
        """Log unless `key` logged within the interval; True when a line was written."""
        now = self.clock()
        last, suppressed = self._state.get(key, (None, 0))
        if last is not None and now - last < self.interval_s:
            self._state[key] = (last, suppressed + 1)
            return False
        if suppressed:
            assert last is not None  # lines are only suppressed behind one that was written
            msg += " (%d more like it in the last %.0f s)"
            args = (*args, suppressed, now - last)
        logger.log(level, msg, *args)
        self._state[key] = (now, 0)
        self._state.move_to_end(key)
        while len(self._state) > MAX_KEYS:
            self._state.popitem(last=False)
        return True
