"""The architecture, checked: which package may import which, and which modules are sans-IO.

Direction (shared/DESIGN.md, "the house is built bottom up"): each package of ours may import
only the packages listed for it in ALLOWED, so an arrow pointing up (the quorum importing the
server, the record format importing the wire protocol, a coordinator importing a request
handler) fails here. Every import counts, also those inside functions and under
TYPE_CHECKING: a deferred import is still a dependency.

Purity (STYLE.md rule 1): protocol parsing, storage index and retention rules, partition/ISR
state, the producer's accumulator and partitioner, and the metadata image/controller decisions
are plain synchronous code. They import no I/O, clock, threads or Raft library, and take
randomness only as an injected `random.Random`. The drivers around them are not listed and
may import what they need.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("log", "quorum", "producer", "spark", "tools", "bench")

# package -> the packages of ours it may import (besides itself). Bottom floor first.
COMMON = {"log.common"}
ALLOWED: dict[str, set[str]] = {
    "log.common": set(),
    "log.records": COMMON,
    "log.protocol": COMMON | {"log.records"},
    "log.storage": COMMON | {"log.records"},
    "log.security": COMMON,  # TLS contexts, SASL mechanisms, principals
    "quorum": COMMON | {"log.records", "log.protocol"},
    "log.replication": COMMON
    | {"log.records", "log.protocol", "log.storage", "log.security", "quorum"},
    "log.coordinator": COMMON
    | {"log.records", "log.protocol", "log.storage", "log.replication", "quorum"},
    "log.server": COMMON
    | {"log.records", "log.protocol", "log.storage", "log.replication", "log.coordinator"}
    | {"log.security", "quorum"},
    "producer": COMMON | {"log.records", "log.protocol"},
    "spark": COMMON | {"log.records", "log.protocol", "producer"},
    "tools": {"log.common", "log.records", "log.protocol", "log.storage", "log.replication"}
    | {"log.coordinator", "log.server", "log.security", "quorum", "producer", "spark"},
    "bench": {"log.common", "log.records", "log.protocol", "log.storage", "log.replication"}
    | {"log.coordinator", "log.server", "log.security", "quorum", "producer", "spark", "tools"},
}

IO_MODULES = {"trio", "socket", "time", "os", "threading", "asyncio", "selectors", "pysyncobj"}
IO_MODULES |= {"pickle"}  # state is encoded with our own codecs, never pickled
SANS_IO = [
    "log/common/errors.py",
    "log/common/acl.py",
    "log/records/*.py",
    "log/protocol/*.py",
    "log/storage/retention.py",
    "log/storage/append_origin.py",
    "log/storage/cleaner.py",
    "log/storage/cleaner_manager.py",
    "log/replication/partition_state.py",
    "log/replication/follower_state.py",
    "log/replication/fetch_session.py",
    "log/replication/fetch_session_handler.py",
    "log/replication/fetch_fill_order.py",
    "log/replication/replica_log.py",
    "log/coordinator/group_state.py",
    "log/coordinator/group_coordinator.py",
    "log/coordinator/records.py",
    "log/coordinator/consumer_protocol.py",
    "log/coordinator/consumer_group_state.py",
    "log/coordinator/consumer_group_records.py",
    "log/coordinator/assignors.py",
    "log/coordinator/topic_regex.py",
    "log/coordinator/append_errors.py",
    "log/coordinator/transaction_log.py",
    "log/coordinator/transaction_state.py",
    "log/coordinator/transaction_coordinator.py",
    "log/security/principal.py",
    "log/security/jaas.py",
    "log/security/sasl_exchange.py",
    "log/security/plain.py",
    "log/security/scram.py",
    "log/security/credentials.py",
    "log/security/authenticator.py",
    "log/security/authorizer.py",
    "quorum/records.py",
    "quorum/features.py",
    "quorum/acls.py",
    "quorum/image.py",
    "quorum/controller.py",
    "quorum/broker_configs.py",
    "quorum/state_machine.py",
    "quorum/producer_id_manager.py",
    "quorum/raft_voters.py",
    "quorum/metadata_quorum.py",
    "producer/config.py",
    "producer/backoff.py",
    "producer/producer_batch.py",
    "producer/accumulator.py",
    "producer/partitioner.py",
    "producer/idempotence.py",
    "producer/cluster_view.py",
    "producer/errors.py",
    "spark/offset_ranges.py",
]
PYSYNCOBJ_ALLOWED = {
    "quorum/raft.py",
    "quorum/raft_journal.py",
    "quorum/raft_port_guard.py",
    "bench/metadata_commit.py",
}


def package_of(module: str) -> str | None:
    """`log.storage.segment` -> `log.storage`; `quorum.image` -> `quorum`; not ours: None."""
    parts = module.split(".")
    if parts[0] not in OURS:
        return None
    if parts[0] == "log" and len(parts) > 1:
        return f"log.{parts[1]}"
    return parts[0]


@functools.cache
def parsed(path: Path) -> ast.Module:
    """Each file is parsed once per run (several tests walk all of them)."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def imported_modules(path: Path) -> frozenset[str]:
    modules = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return frozenset(modules)


def our_files() -> list[Path]:
    return sorted(
        p for top in OURS for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts
    )


def sans_io_files() -> list[Path]:
    return sorted({p for pattern in SANS_IO for p in ROOT.glob(pattern)})


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_package_has_a_row():
    packages = {
        package_of(".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in our_files()
    }
    packages.discard("log.__init__")  # log/__init__.py
    assert packages <= set(ALLOWED), sorted(packages - set(ALLOWED))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down(package: str):
    """No module of `package` imports a package of ours that ALLOWED does not list for it."""
    top, _, sub = package.partition(".")
    directory = ROOT / top / sub if sub else ROOT / top
    offenders = []
    for path in sorted(directory.rglob("*.py")):
        for module in imported_modules(path):
            target = package_of(module)
            if target is not None and target != package and target not in ALLOWED[package]:
                offenders.append(f"{_rel(path)} imports {module}")
    assert offenders == []


def test_nothing_but_tests_imports_tests():
    offenders = [
        f"{_rel(path)} imports {module}"
        for path in our_files()
        for module in imported_modules(path)
        if module.split(".")[0] == "tests"
    ]
    assert offenders == []


def test_the_sans_io_list_names_real_files():
    assert len(sans_io_files()) >= 40
    for pattern in SANS_IO:
        assert list(ROOT.glob(pattern)), f"{pattern} matches nothing"


@pytest.mark.parametrize("path", sans_io_files(), ids=_rel)
def test_sans_io_core_imports_no_io(path: Path):
    roots = {module.split(".")[0] for module in imported_modules(path)}
    assert not roots & IO_MODULES


@pytest.mark.parametrize("path", sans_io_files(), ids=_rel)
def test_sans_io_core_randomness_is_injected(path: Path):
    """`random` may appear as the type of an injected `random.Random`, never as a global source."""
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "random":
                assert node.attr == "Random", f"{path.name} uses random.{node.attr}"


def test_only_the_raft_binding_imports_pysyncobj():
    offenders = [
        _rel(path)
        for path in our_files()
        if _rel(path) not in PYSYNCOBJ_ALLOWED
        and "pysyncobj" in {m.split(".")[0] for m in imported_modules(path)}
    ]
    assert offenders == []


def test_quorum_checkpoints_touch_files_but_never_pickle_or_read_clocks():
    roots = {m.split(".")[0] for m in imported_modules(ROOT / "quorum" / "checkpoint.py")}
    assert not roots & (IO_MODULES - {"os"})
