"""Start `quorumlog node` processes for the test harness from a fork server that imported the
node's modules once.

A node spends ~0.75 s of its ~1 s of CPU to READY importing its modules (measured on the 2-core
test machine), and the suite starts some 160 nodes: about two minutes of the suite's CPU. Here a
`multiprocessing` fork server (one per test worker, started on first use) imports them once; each
node is a fresh process forked from it that runs exactly what `python -m tools node --data-dir
DIR` runs (`tools.entry.run` with that argv), with the caller's environment and working directory
at the time of the start, stdout to a pipe (where the harness waits for READY) and stderr appended
to the node's log. What differs from `python -m tools node` is only that the interpreter imported
the modules before the fork; no node code ran there. `quorumlog up`, the demo and the hosts'
harness still start nodes with `python -m tools node`, so that entry point stays covered, and so
does this harness when a script (bench/) calls it: multiprocessing would run a caller's main
script again in each child.

`NodeProcess` answers the part of `subprocess.Popen` the tests use (pid, poll, wait, kill,
terminate, send_signal, returncode, stdout); its exit status is the fork server's report
(negative for a signal, as Popen's).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

_PRELOAD = ["tools.entry", "tools.cli", "tools.node_cmd", "log.server.node", "quorum.service"]
_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(_PRELOAD)


def _run_node(argv: list[str], cwd: str, env: dict[str, str], stdout, log_path: str) -> None:
    """In the forked child: the standard streams as Popen would set them, then the command."""
    os.dup2(stdout.fileno(), 1)
    stdout.close()
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["quorumlog", *argv]
    from tools.entry import run

    run()


class NodeProcess:
    """One `quorumlog node` started by `start_node`, with Popen's interface as the tests use it."""

    def __init__(self, argv: list[str], log_path: Path, cwd: Path) -> None:
        self.args = argv
        log_path.open("ab").close()  # there when start returns, as Popen's stderr file is
        read, write = _context.Pipe(duplex=False)
        self._process = _context.Process(
            target=_run_node,
            args=(argv, str(cwd), dict(os.environ), write, str(log_path)),
            daemon=True,  # a worker that exits stops what it left running (SIGTERM)
        )
        self._process.start()
        write.close()
        self.stdout = os.fdopen(os.dup(read.fileno()), "rb")
        read.close()
        self.pid: int = self._process.pid  # type: ignore[assignment]

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _main_is_a_script() -> bool:
    """Whether the caller's main module is a script file, which multiprocessing would run again
    in every child (as `__mp_main__`): a bench script or a driver, not pytest or its workers."""
    main = sys.modules["__main__"]
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return not name.endswith("__main__")
    return getattr(main, "__file__", None) is not None


def start_node(node_dir: Path, log_path: Path, cwd: Path) -> NodeProcess | subprocess.Popen:
    """`quorumlog node --data-dir node_dir`: forked from the fork server, or, when called from a
    script (bench/), exec'd as `python -m tools node` as before."""
    argv = ["node", "--data-dir", str(node_dir)]
    if not _main_is_a_script():
        return NodeProcess(argv, log_path, cwd)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tools", *argv],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
