"""The replication cores stay sans-IO: no clocks, sockets, files, threads or async frameworks."""

import ast
from pathlib import Path

import pytest

import log.replication

FORBIDDEN = {"trio", "socket", "time", "os", "threading", "asyncio", "pysyncobj", "random"}
# The I/O drivers around the cores (trio tasks); everything else in the package is a core.
DRIVERS = {"fetcher_manager.py", "replica_fetcher.py", "isr_manager.py"}
CORES = sorted(
    p for p in Path(log.replication.__file__).parent.glob("*.py") if p.name not in DRIVERS
)


@pytest.mark.parametrize("path", CORES, ids=lambda p: p.name)
def test_core_imports_no_io(path: Path):
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, f"{path.name} imports {sorted(imported & FORBIDDEN)}"
