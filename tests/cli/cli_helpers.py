"""run_cli: invoke the `quorumlog` group in-process; no command may end in a traceback."""

from __future__ import annotations

from click.testing import CliRunner, Result

from tools.cli import main


def run_cli(args: list[str], input: str | None = None, exit_code: int = 0) -> Result:
    result = CliRunner().invoke(main, args, input=input)
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == exit_code, result.output
    return result
