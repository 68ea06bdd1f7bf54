"""run_cli: invoke the `quorumlog` group in-process; no command may end in a traceback.
started_cluster: real node processes (tests/node's harness), always stopped afterwards."""

from __future__ import annotations

import contextlib
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
def started_cluster(path, nodes: int = 3, shared: bool = False) -> Iterator[Cluster]:
    """A started Cluster of node processes; every process is stopped (or killed) on exit.
    `shared`: one a fixture keeps across test files (Cluster(shared=True): other tests'
    kill_started leaves it alone)."""
    cluster = Cluster(path, nodes, shared=shared)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop_all()
        if not shared:
            kill_started()
