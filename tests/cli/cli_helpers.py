"""run_cli: invoke the `quorumlog` group in-process; no command may end in a traceback.
started_cluster: real node processes (tests/node's harness), always stopped afterwards.
start_with_default_sigint: a `quorumlog` process that Ctrl-C reaches, as from a terminal."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator

from click.testing import CliRunner, Result
from cluster_harness import Cluster, kill_started

from tools.cli import main


def run_cli(args: list[str], input: str | None = None, exit_code: int = 0) -> Result:
    result = CliRunner().invoke(main, args, input=input)
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == exit_code, result.output
    return result


@contextlib.contextmanager
def started_cluster(
    path, nodes: int = 3, shared: bool = False, extra_props: dict | None = None
) -> Iterator[Cluster]:
    """A started Cluster of node processes; every process is stopped (or killed) on exit.
    `shared`: one a fixture keeps across test files (Cluster(shared=True): other tests'
    kill_started leaves it alone). `extra_props` as Cluster takes them."""
    cluster = Cluster(path, nodes, shared=shared, extra_props=extra_props)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop_all()
        if not shared:
            kill_started()


def start_with_default_sigint(args: list[str], **kwargs) -> subprocess.Popen:
    """Popen with SIGINT at its default in the child, as a terminal's foreground job has it
    when the user presses Ctrl-C. A suite started from a background job (`nohup make test &`,
    a CI runner without job control) has SIGINT ignored, the child inherits that, and Python
    leaves an ignored SIGINT ignored: a test's SIGINT did nothing and the command ran on
    (seen in two fresh-clone runs, 2026-11-26). A handler, unlike SIG_IGN, is reset to the
    default by exec, so the parent holds Python's own for the fork."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(args, **kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)
