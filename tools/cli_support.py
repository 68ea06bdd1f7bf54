"""What every client command shares: --bootstrap/--command-config/--json options, errors as one
line, tables.

`--command-config FILE` (env QUORUMLOG_COMMAND_CONFIG) reaches the command as a ClientSecurity
(tools/client_security.py): pass `security.connector` to our clients, `confluent_admin` or
`security.confluent` to confluent-kafka's.

`run_client(main, *args)` runs an async command body under trio and turns what can go wrong
for a user (a broker's KafkaError, an unreachable cluster, a bad value, a closed pipe, Ctrl-C)
into one line on stderr and a non-zero exit code, never a traceback. Tables are rich tables
on a terminal and tab-separated plain text when piped, so `| cut -f2` works.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import trio

from log.common.errors import KafkaError
from log.common.node_config import ConfigError
from tools.client_security import PLAINTEXT, ClientSecurity, client_security, read_properties
from tools.interrupt import EXIT_INTERRUPTED, MESSAGE, caused_by_interrupt

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "QUORUMLOG_BOOTSTRAP"
EXIT_ERROR = 1  # a command failed (click.ClickException exits with 1 as well)

bootstrap_option = click.option(
    "--bootstrap",
    "-b",
    envvar=BOOTSTRAP_ENV,
    default=DEFAULT_BOOTSTRAP,
    show_default=True,
    show_envvar=True,
    help="host:port[,host:port...] of any broker(s)",
)
COMMAND_CONFIG_ENV = "QUORUMLOG_COMMAND_CONFIG"


def _client_security(ctx: click.Context, param: click.Parameter, path: Path | None) -> Any:
    if path is None:
        return PLAINTEXT
    try:
        return client_security(read_properties(path))
    except (ValueError, ConfigError) as exc:
        raise click.BadParameter(f"{path}: {exc}", ctx, param) from None


command_config_option = click.option(
    "--command-config",
    "security",
    envvar=COMMAND_CONFIG_ENV,
    show_envvar=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    callback=_client_security,
    help="client properties file (security.protocol, ssl.*, sasl.*), as Kafka's tools take",
)


def confluent_admin(bootstrap: str, security: ClientSecurity) -> Any:
    """confluent-kafka's AdminClient for `bootstrap` with the --command-config settings."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, **security.confluent})


json_option = click.option("--json", "as_json", is_flag=True, help="print JSON instead of text")


class CommandError(Exception):
    """An expected failure with a message for the user (exit code 1)."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, KafkaError):
        name = exc.error_code.name
        return text if text.startswith(name) else f"{name}: {text}"
    return text


def first_leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def run_client(main: Callable[..., Any], *args: Any) -> Any:
    """trio.run(main, *args) with user-facing errors as one line and exit code 1."""
    return run_guarded(trio.run, main, *args)


def run_guarded(function: Callable[..., Any], *args: Any) -> Any:
    """function(*args) (synchronous) with user-facing errors as one line and exit code 1."""
    try:
        return function(*args)
    except BaseException as raised:  # noqa: BLE001 - sorted below; the rest re-raised
        if caused_by_interrupt(raised):
            click.echo(MESSAGE, err=True)
            sys.exit(EXIT_INTERRUPTED)
        exc = first_leaf(raised)
        if isinstance(exc, BrokenPipeError):
            # the reader went away (`| head`): stop quietly, as Unix tools do
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)
        if isinstance(exc, (click.ClickException, SystemExit)):
            raise exc from None
        if isinstance(exc, (KafkaError, CommandError, ValueError, OSError)):
            raise click.ClickException(_one_line(exc)) from None
        if isinstance(exc, trio.TooSlowError):
            raise click.ClickException("timed out waiting for the cluster") from None
        raise


def parse_key_values(pairs: Sequence[str], what: str) -> dict[str, str]:
    """["k=v", ...] -> {k: v}; a pair without '=' is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint=what)
        out[key] = value
    return out


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=None, sort_keys=False))


def is_terminal() -> bool:
    return sys.stdout.isatty()


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """A rich table on a terminal; a header line and tab-separated rows otherwise."""
    if is_terminal():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title or None, title_justify="left")
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(str(cell) for cell in row))
        Console().print(table)
        return
    if title:
        click.echo(title)
    click.echo("\t".join(columns))
    for row in rows:
        click.echo("\t".join(str(cell) for cell in row))


def node_list(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes) or "-"
