"""Formatting one node's directory: the `node.toml` that `quorumlog node` runs.

`node_properties` builds a node's configuration from what an operator decides per host (its id,
the cluster id, the controllers, its listeners, the shared secret); `format_node` validates it
(log/common/node_config.py) and writes `DIR/node.toml` (mode 0600: it holds the secret). Both
`quorumlog format` (one host at a time) and `quorumlog up` (every node of a local cluster,
tools/cluster_layout.py) go through them.

Roles: a node listed in the controllers is a combined controller+broker; any other node is a
broker only. A controller node gets a CONTROLLER listener on its controller port, bound to the
host of its first listener (so `PLAINTEXT://0.0.0.0:9092` binds the controller listener to every
address too); peers reach it at the address the controllers list gives. The Raft transport
binds the address its voter entry names (`controller.quorum.raft.voters`), which must therefore
be one of the host's own addresses.

Refusals (`FormatError`, nothing written): a directory whose `node.toml` belongs to another
cluster or another node id, or a directory holding files but no `node.toml` (data of unknown
origin). Formatting a node of the same cluster and id again rewrites its `node.toml` and keeps
its data: that is how an operator changes a node's addresses (a node that comes back with a new
IP registers its new endpoints, as a new incarnation replaces the old registration).
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from log.common.node_config import (
    NODE_CONFIG_FILE,
    ConfigError,
    NodeConfig,
    Voter,
    parse_listeners,
    to_toml,
)

CONTROLLER_LISTENER = "CONTROLLER"
DEFAULT_RAFT_PORT_OFFSET = 100  # `up`'s layout: Raft port = controller port + 100
SECRET_BYTES = 16


class FormatError(Exception):
    """The directory or the options cannot be formatted; the message is one line."""


def new_cluster_id() -> str:
    """A fresh cluster id (what `quorumlog cluster-id` prints)."""
    return uuid.uuid4().hex


def new_secret() -> str:
    return secrets.token_hex(SECRET_BYTES)


def raft_voters_for(controllers: Sequence[Voter], offset: int) -> tuple[Voter, ...]:
    """Each controller's Raft endpoint: its controller host, its controller port + offset."""
    voters = tuple(Voter(v.node_id, v.host, v.port + offset) for v in controllers)
    for voter in voters:
        if not 0 < voter.port < 65536:
            raise FormatError(f"Raft port {voter.port} of node {voter.node_id} is out of range")
    return voters


def _voters_text(voters: Sequence[Voter]) -> str:
    return ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in voters)


def node_properties(
    *,
    node_id: int,
    cluster_id: str,
    secret: str,
    listeners: str,
    controllers: Sequence[Voter],
    raft_voters: Sequence[Voter],
    advertised_listeners: str = "",
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The properties of node `node_id`; a controller if `controllers` lists it."""
    try:
        endpoints = parse_listeners(listeners)
    except ConfigError as exc:
        raise FormatError(str(exc)) from None
    if any(e.listener == CONTROLLER_LISTENER for e in endpoints):
        raise FormatError("--listeners: the CONTROLLER listener comes from --controllers")
    if not endpoints:
        raise FormatError("--listeners: at least one listener is required")
    mine = [v for v in controllers if v.node_id == node_id]
    all_listeners = listeners
    if mine:
        all_listeners += f",{CONTROLLER_LISTENER}://{endpoints[0].host}:{mine[0].port}"
    props: dict[str, object] = {
        "node.id": node_id,
        "process.roles": "broker,controller" if mine else "broker",
        "cluster.id": cluster_id,
        "listeners": all_listeners,
    }
    if advertised_listeners:
        props["advertised.listeners"] = advertised_listeners
    props |= {
        "controller.quorum.voters": _voters_text(controllers),
        "controller.quorum.raft.voters": _voters_text(raft_voters),
        "controller.quorum.password": secret,
        **(extra or {}),
    }
    return props


def format_node(node_dir: Path, props: Mapping[str, object]) -> NodeConfig:
    """Validate `props` and write `node_dir/node.toml` (see the module docstring's refusals)."""
    try:
        config = NodeConfig.from_properties(node_dir, props)
    except ConfigError as exc:
        raise FormatError(str(exc)) from None
    check_formattable(node_dir, config.props["cluster.id"], config.node_id)
    node_dir.mkdir(parents=True, exist_ok=True)
    path = node_dir / NODE_CONFIG_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(to_toml({name: config.props[name] for name in props}))  # typed: "2" -> 2
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return NodeConfig.load(node_dir)


def check_formattable(node_dir: Path, cluster_id: str, node_id: int) -> None:
    """Raise FormatError unless `node_dir` is absent, empty or this very node's directory."""
    path = node_dir / NODE_CONFIG_FILE
    if path.exists():
        try:
            existing = NodeConfig.load(node_dir)
        except ConfigError as exc:
            raise FormatError(f"{node_dir} holds a node.toml that does not load: {exc}") from None
        if existing.props["cluster.id"] != cluster_id:
            raise FormatError(
                f"{node_dir} belongs to cluster {existing.props['cluster.id']}, "
                f"not {cluster_id}; use another directory"
            )
        if existing.node_id != node_id:
            raise FormatError(
                f"{node_dir} is node {existing.node_id}'s directory, not node {node_id}'s"
            )
        return
    if node_dir.is_dir() and _holds_files(node_dir):
        raise FormatError(
            f"{node_dir} is not empty and has no {NODE_CONFIG_FILE}: data of an unknown "
            "cluster; use an empty directory"
        )
    if node_dir.exists() and not node_dir.is_dir():
        raise FormatError(f"{node_dir} is not a directory")


def _holds_files(node_dir: Path) -> bool:
    """Whether any file lies below `node_dir`: empty directories (a log disk mounted at
    node-N/kafka-logs, a fresh file system's lost+found) hold no other cluster's data."""
    return any(
        p.is_file() or p.is_symlink()
        for p in node_dir.rglob("*")
        if "lost+found" not in p.relative_to(node_dir).parts
    )


def read_or_create_secret(path: Path) -> tuple[str, bool]:
    """The shared secret in `path`; a new one (written mode 0600) if the file does not exist.
    Returns (secret, created)."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        secret = new_secret()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise FormatError(f"--secret-file {path}: {exc.strerror}") from None
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
        return secret, True
    except OSError as exc:
        raise FormatError(f"--secret-file {path}: {exc.strerror}") from None
    if not text or any(c.isspace() for c in text):
        raise FormatError(f"--secret-file {path}: expected one line holding the secret")
    return text, False
