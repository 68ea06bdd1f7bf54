"""The command line as a whole (issue 9): every command has --help with examples, every read
command has --json, bad arguments are usage errors (exit 2, one line) and an unreachable
cluster is a one-line error within seconds, never a hang or a traceback."""

from __future__ import annotations

import time

import click
import pytest
from cli_helpers import run_cli

from tools.cli import main

READ_COMMANDS = [
    "topics list", "topics describe", "status", "metadata", "groups list", "groups describe",
    "consume", "dump-log", "perf produce", "perf consume", "transactions list",
    "transactions describe", "features describe",
]  # fmt: skip
UNREACHABLE = "127.0.0.1:1"  # nobody listens on port 1
UNREACHABLE_LIMIT_S = 10


def leaf_commands(group: click.Group, prefix: str = "") -> list[str]:
    out = []
    commands = main.load_all() if group is main else group.commands  # main's load lazily
    for name, command in sorted(commands.items()):
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            out += leaf_commands(command, path + " ")
        else:
            out.append(path)
    return out


def test_the_command_tree_is_complete():
    leaves = set(leaf_commands(main))
    assert set(READ_COMMANDS) <= leaves
    assert {"up", "node", "produce", "demo", "topics create", "topics delete"} <= leaves


@pytest.mark.parametrize("path", leaf_commands(main))
def test_every_command_has_help_with_examples(path):
    text = run_cli([*path.split(), "--help"]).stdout
    assert "Example" in text, text


@pytest.mark.parametrize("path", READ_COMMANDS)
def test_every_read_command_has_json(path):
    assert "--json" in run_cli([*path.split(), "--help"]).stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["consume", "-t", "x", "--offset", "soon"], "--offset"),
        (["consume", "-t", "x", "--timestamp", "yesterday"], "--timestamp"),
        (["consume", "-t", "x", "--group", "g", "--partition", "1"], "--group"),
        (["consume", "-t", "x", "--group", "g", "--timestamp", "5"], "--group"),
        (["consume", "-t", "x", "--group", ""], "--group"),
        (["consume", "-t", "x", "-n", "0"], "--max-records"),
        (["consume"], "--topic"),
        (["produce", "-t", "x", "-H", "noequals"], "key=value"),
        (["topics", "create", "-t", "x", "-p", "0"], "--partitions"),
        (["groups", "reset-offsets", "g", "-t", "x"], "exactly one"),
        (["metadata"], "exactly one"),
        (["up", "--nodes", "0"], "--nodes"),
        (["node", "--data-dir", "/nonexistent", "--parent-pipe-fd", "-1"], "--parent-pipe-fd"),
        (["perf", "produce", "--bootstrap", "b", "--topic", "t", "--records", "0"], "--records"),
    ],
)
def test_bad_arguments_are_usage_errors(args, needle):
    result = run_cli(args, input="", exit_code=2)
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and needle in errors[0], result.output


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "args",
    [
        ["groups", "list", "-b", UNREACHABLE],
        ["transactions", "describe", "t", "-b", UNREACHABLE],
        ["consume", "-t", "x", "--group", "g", "-b", UNREACHABLE],
        ["perf", "produce", "--bootstrap", UNREACHABLE, "--topic", "t", "--records", "10"],
        ["perf", "consume", "--bootstrap", UNREACHABLE, "--topic", "t"],
        ["produce", "-t", "x", "-b", UNREACHABLE],
    ],
    ids=lambda args: " ".join(args[:3]),
)
def test_unreachable_cluster_fails_fast_in_one_line(args):
    started_s = time.monotonic()
    result = run_cli(args, input="x\n", exit_code=1)
    assert time.monotonic() - started_s < UNREACHABLE_LIMIT_S
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "cannot connect" in result.stderr


def test_node_refuses_a_parent_pipe_fd_that_is_not_open(tmp_path):
    result = run_cli(["node", "--data-dir", str(tmp_path), "--parent-pipe-fd", "987"], exit_code=2)
    assert "--parent-pipe-fd 987" in result.stderr
