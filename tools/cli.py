"""The `quorumlog` command line: one click group, one module per command family.

A command's module is imported when that command runs (or when --help lists the commands), not
every command's at start-up: all of them together pull in the node, the clients and the storage
layer (0.6 s of CPU per invocation), while `quorumlog cluster-id`, `format` or
`metadata-quorum describe` need 0.2-0.3 s. click's pattern for lazily loaded subcommands:
`list_commands` names them, `get_command` imports one on demand."""

from __future__ import annotations

import importlib
import sys
from collections.abc import MutableMapping
from typing import Any

import click

from tools.interrupt import EXIT_INTERRUPTED, MESSAGE, caused_by_interrupt, restore_default_sigint

# command name -> "module:attribute" of its click command, in the order they were added
COMMANDS = {
    "dump-log": "tools.dump_log:dump_log",
    "up": "tools.up:up",
    "node": "tools.node_cmd:node",
    "metadata": "tools.metadata_cmd:metadata",
    "perf": "tools.perf_cmd:perf",
    "topics": "tools.topics_cmd:topics",
    "produce": "tools.produce_cmd:produce",
    "consume": "tools.consume_cmd:consume_command",
    "status": "tools.status_cmd:status",
    "demo": "tools.demo:demo",
    "groups": "tools.groups_cmd:groups",
    "transactions": "tools.transactions_cmd:transactions",
    "features": "tools.features_cmd:features",
    "nemesis": "tools.nemesis_cmd:nemesis",
    "users": "tools.users_cmd:users",
    "acls": "tools.acls_cmd:acls",
    "cluster-id": "tools.format_cmd:cluster_id",
    "format": "tools.format_cmd:format_command",
    "metadata-quorum": "tools.metadata_quorum_cmd:metadata_quorum",
}


def _load(name: str) -> click.Command:
    module_name, attribute = COMMANDS[name].split(":")
    command = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(command, click.Command) and command.name == name, (name, command)
    if name == "perf":  # `perf consume` lives in a module of its own
        from tools.perf_consume import consume

        assert isinstance(command, click.Group)
        command.add_command(consume)
    return command


class LazyGroup(click.Group):
    """A group whose COMMANDS are imported on first use, then kept in `commands`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            self.add_command(_load(cmd_name))
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """The command, with Python's SIGINT handling back (tools/interrupt.py): Ctrl-C in it
        exits 130 with one line, not click's "Aborted!" and exit code 1."""
        restore_default_sigint()
        try:
            return super().invoke(ctx)
        except (SystemExit, click.exceptions.Exit, click.ClickException):
            raise
        except BaseException as exc:
            if not caused_by_interrupt(exc):
                raise
        click.echo(MESSAGE, err=True)
        sys.exit(EXIT_INTERRUPTED)

    def load_all(self) -> MutableMapping[str, click.Command]:
        """Every command, imported (what tools walking the whole tree need)."""
        for name in COMMANDS:
            self.get_command(click.Context(self), name)
        return self.commands


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="quorumlog")
def main() -> None:
    """quorumlog: a Kafka-compatible, Raft-based log service."""
