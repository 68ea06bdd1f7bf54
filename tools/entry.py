"""The `quorumlog` program's entry point: SIGINT handling first (tools/interrupt.py), then the
click group, whose import alone takes most of a command's first 0.1 s."""

from __future__ import annotations


def run() -> None:
    from tools.interrupt import exit_at_once_on_sigint

    exit_at_once_on_sigint()
    from tools.cli import main

    main()
