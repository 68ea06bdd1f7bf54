"""CPU seconds of this process's descendants, by kind, read from /proc (Linux).

A benchmark on a shared box cannot trust wall time: other jobs' load moves it by tens of
percent. The CPU time each process used moves far less. `snapshot()` reads user + system
time of this process ("driver") and of every live descendant (each with its waited-for
children, so a worker that exits between two snapshots is not lost), keyed by pid with a
kind from its command line; `difference(before, after)` sums each kind's use in between.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# kind of a process from its command line; the first match wins
KINDS: list[tuple[str, Callable[[str], bool]]] = [
    ("jvm", lambda cmd: cmd.split(" ", 1)[0].endswith("/java")),
    ("nodes", lambda cmd: "tools node" in cmd),
    ("python workers", lambda cmd: "pyspark" in cmd),
]


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (state first); OSError if gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds these processes used so far (not their children's)."""
    ticks = 0
    for pid in pids:
        fields = _stat_fields(pid)
        ticks += int(fields[11]) + int(fields[12])  # utime stime
    return ticks / CLOCK_TICKS


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its waited-for children)."""
    try:
        fields = _stat_fields(pid)
    except OSError:
        return None
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return int(fields[1]), ticks / CLOCK_TICKS


def _kind(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "other"
    for kind, matches in KINDS:
        if matches(cmd):
            return kind
    return "other"


def snapshot() -> dict[int, tuple[str, float]]:
    """{pid: (kind, CPU seconds)} for every descendant of this process."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents[int(entry)], cpu[int(entry)] = stat
    root = os.getpid()
    own = os.times()
    out: dict[int, tuple[str, float]] = {root: ("driver", own.user + own.system)}
    for pid in cpu:
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1, root):
            ancestor = parents.get(ancestor)
        if ancestor == root:
            out[pid] = (_kind(pid), cpu[pid])
    return out


def difference(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds used per kind between two snapshots (processes started in between
    count from zero; one that ended and was not waited for is lost: rare for a benchmark's
    long-lived processes)."""
    used: dict[str, float] = {}
    for pid, (kind, seconds) in after.items():
        start = before.get(pid, (kind, 0.0))[1]
        used[kind] = used.get(kind, 0.0) + max(0.0, seconds - start)
    return used
