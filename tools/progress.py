"""Progress bars for long commands, on stderr and only on a terminal (stdout stays data).

`polled_progress(description, total, completed)` shows a rich bar while its block runs
(`maybe_progress(show, ...)`: only when `show`),
polling `completed()` every POLL_INTERVAL_S from a helper thread: the work being measured
(a benchmark's send loop) pays one counter increment per item, never a rich call. `CountedValues`
is such a counter: a list that records how many of its items were handed out, by iteration
or by slicing (the bulk path sends slices).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, SupportsIndex

POLL_INTERVAL_S = 0.1


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


class CountedValues(list):
    """A list whose `handed_out` counts the items iterated or sliced out so far."""

    handed_out = 0

    def __iter__(self) -> Iterator[Any]:
        for self.handed_out, value in enumerate(super().__iter__(), 1):  # noqa: B020, B007
            yield value

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            stop = len(self) if index.stop is None else min(index.stop, len(self))
            self.handed_out = max(self.handed_out, stop)
        return super().__getitem__(index)


def maybe_progress(
    show: bool, description: str, total: int, completed: Callable[[], int]
) -> AbstractContextManager[None]:
    """polled_progress when `show`, else a block that shows nothing."""
    return polled_progress(description, total, completed) if show else nullcontext()


@contextmanager
def polled_progress(description: str, total: int, completed: Callable[[], int]) -> Iterator[None]:
    """A transient rich progress bar on stderr for the duration of the block."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    done = threading.Event()
    progress = Progress(
        TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )  # fmt: skip
    task = progress.add_task(description, total=total)

    def poll() -> None:
        while not done.wait(POLL_INTERVAL_S):
            progress.update(task, completed=completed())

    with progress:
        poller = threading.Thread(target=poll, name="progress-poll", daemon=True)
        poller.start()
        try:
            yield
        finally:
            done.set()
            poller.join()
