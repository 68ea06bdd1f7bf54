"""The sans-IO cores import no clock, randomness, threads, sockets or Raft library."""

import ast
from pathlib import Path

import pytest

QUORUM = Path(__file__).resolve().parents[2] / "quorum"
FORBIDDEN = {"time", "random", "socket", "threading", "trio", "pysyncobj", "pickle", "os"}
PURE = ["records.py", "image.py", "controller.py", "state_machine.py", "producer_id_manager.py"]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("name", PURE)
def test_pure_core_has_no_io_imports(name):
    assert not (_imports(QUORUM / name) & FORBIDDEN)


def test_checkpoint_touches_files_but_never_pickles_or_clocks():
    assert not (_imports(QUORUM / "checkpoint.py") & (FORBIDDEN - {"os"}))
