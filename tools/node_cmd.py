"""`quorumlog node --data-dir DIR/node-i`: run one node in the foreground.

Reads DIR/node-i/node.toml (log/common/node_config.py), runs log/server/node.py's `run_node`,
prints `READY` on stdout once the node serves (what `quorumlog up` waits for) and logs one
line per state change to stderr (one per partition log recovered, with its duration); when
stderr is a terminal, a progress bar shows the log recovery too. SIGTERM/SIGINT stop it
cleanly (exit 0). A missing or bad configuration is a one-line error and exit code 2; so is a
log or metadata directory another process holds (log/storage/dir_lock.py: a second node on the
same directory is refused before it touches a file). A failed disk stops the node with a
CRITICAL line and exit code 1: its log directory went offline (an I/O error there, e.g. a
full disk: log/storage/log_dir_failure_channel.py) or its metadata journal cannot be written.

Dying with the supervisor: `quorumlog up` (and `demo`) start nodes in their own session, so
a terminal's Ctrl-C reaches only the supervisor, which stops them in order. If the supervisor
itself dies (SIGKILL, a crash) the nodes must not live on. The supervisor passes the read end
of a pipe whose write end only it holds (`--parent-pipe-fd N`); a watcher thread here blocks
reading it, and end-of-file -- the kernel closes the write end when the supervisor dies,
however it dies -- sends this process SIGTERM, i.e. the usual clean shutdown. A pipe rather
than prctl(PR_SET_PDEATHSIG): it works on every POSIX system, and PDEATHSIG fires when the
*thread* that forked exits, which is a worker thread for trio's open_process.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click
import trio

from log.common.errors import KafkaStorageError
from log.common.node_config import ConfigError, NodeConfig
from log.server.logging_setup import configure_logging
from log.storage.dir_lock import DirectoryLock, DirectoryLockedError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def _ready() -> None:
    print("READY", flush=True)


class RecoveryProgress:
    """A rich progress bar on stderr for "recovering logs", fed by LogManager's on_log_loaded
    (from the loading thread); it appears with the first log loaded and ends with the last."""

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __call__(
        self, topic: str, partition: int, elapsed_ms: float, index: int, total: int
    ) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        progress = self._progress
        if progress is None:
            progress = self._progress = Progress(
                TextColumn("recovering logs"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.description}"), console=Console(stderr=True), transient=True,
            )  # fmt: skip
            progress.start()
            self._task = progress.add_task("", total=total)
        assert self._task is not None  # added with the progress bar
        progress.update(self._task, completed=index, description=f"{topic}-{partition}")
        if index >= total:
            self.stop()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


def _exit_with_parent(fd: int) -> None:
    """SIGTERM this process once `fd` (a pipe's read end) reports end-of-file."""

    def watch() -> None:
        try:
            while os.read(fd, 1):  # the supervisor never writes; any byte is ignored
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-pipe-watch", daemon=True).start()


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    """The exceptions in `group`, nested groups (one per nursery they crossed) flattened."""
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        leaves.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return leaves


@click.command("node")
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="the node's directory (holds node.toml)",
)
@click.option("--log-level", default="INFO", show_default=True, help="stderr log level")
@click.option(
    "--parent-pipe-fd",
    type=click.IntRange(0),
    hidden=True,
    help="stop cleanly when this inherited pipe reaches end-of-file (the supervisor died)",
)
def node(data_dir: Path, log_level: str, parent_pipe_fd: int | None) -> None:
    """Run one quorumlog node (controller and/or broker, per its node.toml).

    \b
    Examples:
      quorumlog node --data-dir ./data/node-2          # restart one node of `quorumlog up`
      quorumlog node --data-dir ./data/node-1 --log-level DEBUG
    """
    if parent_pipe_fd is not None:
        try:
            os.fstat(parent_pipe_fd)
        except OSError as exc:
            click.echo(f"error: --parent-pipe-fd {parent_pipe_fd}: {exc.strerror}", err=True)
            sys.exit(2)
        _exit_with_parent(parent_pipe_fd)
    try:
        config = NodeConfig.load(data_dir)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    locks = []
    try:
        for directory in dict.fromkeys(d.resolve() for d in (config.log_dir, config.metadata_dir)):
            locks.append(DirectoryLock(directory).acquire())  # held until the process ends
    except (DirectoryLockedError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    configure_logging(config.node_id, log_level)
    from log.server.node import run_node

    progress = RecoveryProgress() if sys.stderr.isatty() else None
    try:
        trio.run(lambda: run_node(config, ready=_ready, on_log_loaded=progress))
    except* KafkaStorageError as group:  # its log directory or metadata journal failed
        for failure in _leaves(group):
            logging.getLogger("tools.node").critical("node %d stopped: %s", config.node_id,
                                                     failure)  # fmt: skip
        sys.exit(1)
    finally:
        if progress is not None:
            progress.stop()
