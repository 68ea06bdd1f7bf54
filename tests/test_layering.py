"""The architecture, checked: sans-IO cores import no I/O, clock or threads; only the Raft
binding imports pysyncobj.

STYLE.md rule 1: protocol parsing, storage index and retention rules, partition/ISR state, the
producer's accumulator and partitioner, and the metadata image/controller decisions are plain
synchronous code. A driver module that needs sockets, files, clocks or threads is listed
nowhere here and may import them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IO_MODULES = {"trio", "socket", "time", "os", "threading", "pysyncobj", "asyncio"}

# Globs of sans-IO core modules (relative to the repository root).
SANS_IO = [
    "log/records/*.py",
    "log/protocol/*.py",
    "log/storage/retention.py",
    "log/replication/partition_state.py",
    "log/replication/follower_state.py",
    "log/replication/purgatory.py",
    "quorum/records.py",
    "quorum/image.py",
    "quorum/controller.py",
    "quorum/state_machine.py",
    "quorum/producer_id_manager.py",
    "producer/accumulator.py",
    "producer/partitioner.py",
    "producer/producer_batch.py",
    "producer/idempotence.py",
    "producer/config.py",
    "spark/offset_ranges.py",
    "log/coordinator/group_state.py",
    "log/coordinator/group_coordinator.py",
    "log/coordinator/records.py",
    "log/coordinator/consumer_protocol.py",
    "log/storage/cleaner.py",
    "log/storage/cleaner_manager.py",
]
PYSYNCOBJ_ALLOWED = {
    "quorum/raft.py",
    "quorum/raft_journal.py",
    "quorum/raft_port_guard.py",
    "bench/metadata_commit.py",
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def sans_io_files() -> list[Path]:
    return sorted({p for pattern in SANS_IO for p in ROOT.glob(pattern)})


def test_the_sans_io_list_names_real_files():
    assert len(sans_io_files()) >= 20


@pytest.mark.parametrize("path", sans_io_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_sans_io_core_imports_no_io(path: Path):
    assert not imported_roots(path) & IO_MODULES


@pytest.mark.parametrize("path", sans_io_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_sans_io_core_randomness_is_injected(path: Path):
    """`random` may appear as the type of an injected `random.Random`, never as a global source."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "random":
                assert node.attr == "Random", f"{path.name} uses random.{node.attr}"


def test_only_the_raft_binding_imports_pysyncobj():
    offenders = []
    for path in ROOT.glob("**/*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".venv/", "tests/", "build/")) or rel in PYSYNCOBJ_ALLOWED:
            continue
        if "pysyncobj" in imported_roots(path):
            offenders.append(rel)
    assert offenders == []
