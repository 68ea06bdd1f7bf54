"""The producer cores do no I/O: only the buffer pool may import trio (its waiting is async)."""

import ast
import pathlib

import pytest

PRODUCER = pathlib.Path(__file__).resolve().parents[2] / "producer"
CORES = [
    "config",
    "producer_batch",
    "accumulator",
    "partitioner",
    "idempotence",
    "cluster_view",
    "errors",
]
FORBIDDEN = {"trio", "socket", "time", "os", "threading", "asyncio", "selectors", "pysyncobj"}


def runtime_imports(path):
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:  # module level only; `if TYPE_CHECKING:` blocks are not run
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", CORES)
def test_core_modules_import_no_io(module):
    assert not runtime_imports(PRODUCER / f"{module}.py") & FORBIDDEN


def test_buffer_pool_is_the_only_trio_user():
    assert "trio" in runtime_imports(PRODUCER / "buffer_pool.py")
