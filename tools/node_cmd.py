"""`quorumlog node --data-dir DIR/node-i`: run one node in the foreground.

Reads DIR/node-i/node.toml (log/server/config.py), runs log/server/node.py's `run_node`,
prints `READY` on stdout once the node serves (what `quorumlog up` waits for) and logs one
line per state change to stderr. SIGTERM/SIGINT stop it cleanly (exit 0). A missing or bad
configuration is a one-line error and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import trio

from log.server.config import ConfigError, NodeConfig
from log.server.logging_setup import configure_logging


def _ready() -> None:
    print("READY", flush=True)


@click.command("node")
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="the node's directory (holds node.toml)",
)
@click.option("--log-level", default="INFO", show_default=True, help="stderr log level")
def node(data_dir: Path, log_level: str) -> None:
    """Run one quorumlog node (controller and/or broker, per its node.toml)."""
    try:
        config = NodeConfig.load(data_dir)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    configure_logging(config.node_id, log_level)
    from log.server.node import run_node

    trio.run(lambda: run_node(config, ready=_ready))
