"""Ctrl-C ends a command with exit code 130 and one line on stderr, whenever it comes.

Until a command's body runs (the interpreter importing click, the command's module and the
clients it needs, click parsing the arguments: 0.1-0.3 s) there is nothing to clean up, so
SIGINT ends the process at once (`exit_at_once_on_sigint`). Python's default, a
KeyboardInterrupt wherever the main thread happens to be, surfaced there as click's
"Aborted!" with exit code 1, a bare traceback, or a SystemError from confluent-kafka. The
command body gets Python's default back (trio turns it into a cancellation, clients close),
and a KeyboardInterrupt it ends with, or an error it caused (`caused_by_interrupt`), exits 130
too. A SIGINT that is ignored when we start (a background job's) stays ignored.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells report it
MESSAGE = "interrupted"


def _exit_at_once(signum: int, frame: FrameType | None) -> None:
    os.write(2, MESSAGE.encode() + b"\n")
    os._exit(EXIT_INTERRUPTED)


def exit_at_once_on_sigint() -> None:
    """SIGINT exits 130 at once, unless it is ignored or handled by someone else."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _exit_at_once)


def restore_default_sigint() -> None:
    """Python's KeyboardInterrupt again, where `exit_at_once_on_sigint` replaced it."""
    if signal.getsignal(signal.SIGINT) is _exit_at_once:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def caused_by_interrupt(exc: BaseException) -> bool:
    """A KeyboardInterrupt, or an exception it led to: one inside an exception group (trio's),
    or one raised with it as cause or context, such as the SystemError a C extension raises when
    the signal's exception is set during its call ("returned a result with an exception set",
    seen from confluent-kafka)."""
    pending, seen = [exc], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):
            return True
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        if current.__cause__ is not None:
            pending.append(current.__cause__)
        if current.__context__ is not None and not current.__suppress_context__:
            pending.append(current.__context__)
    return False
