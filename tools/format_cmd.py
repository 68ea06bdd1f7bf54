"""`quorumlog cluster-id` and `quorumlog format`: set a cluster up one host at a time.

As Kafka's `kafka-storage.sh random-uuid` / `format`: pick a cluster id once, then on each host
write that host's node directory with `format` (tools/node_format.py) and run it with
`quorumlog node --data-dir D`. The shared secret (it authenticates the controller listener and
encrypts the Raft transport) only travels in a file: the first `format` given a
`--secret-file` that does not exist creates it (mode 0600); the operator copies that file to
the other hosts. It is never an option's value, which `ps` would show.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from log.common.node_config import ConfigError, NodeConfig, Voter, parse_voters
from quorum.features import FeatureError, parse_feature_levels
from quorum.metadata_quorum import parse_endpoint
from tools.metadata_cmd import read_secret
from tools.node_format import (
    DEFAULT_RAFT_PORT_OFFSET,
    FormatError,
    check_formattable,
    format_node,
    new_cluster_id,
    node_properties,
    raft_voters_for,
    read_or_create_secret,
)


def _current_voters(
    voters: tuple[Voter, ...], raft: tuple[Voter, ...], node_id: int, secret: str
) -> tuple[tuple[Voter, ...], tuple[Voter, ...]]:
    """--join: the running quorum's voters (asked from the controllers listed besides this
    node) plus this node: its controllers and Raft voters as node.toml lists them."""
    from tools.metadata_quorum_cmd import describe_voters

    others = [v for v in voters if v.node_id != node_id]
    if not others:
        raise FormatError("--join: --controllers must name a running controller too")
    described = describe_voters(others, secret)
    if node_id in {v.voter_id for v in described}:
        raise FormatError(f"--join: node {node_id} is already a voter")
    controllers, rafts = [], []
    for v in described:
        controller, raft_endpoint = (
            parse_endpoint(v.controller_endpoint),
            parse_endpoint(v.raft_endpoint),
        )
        if v.voter_id < 0 or controller is None or raft_endpoint is None:
            raise FormatError(f"--join: the cluster does not know voter {v.raft_endpoint}'s id")
        controllers.append(Voter(v.voter_id, *controller))
        rafts.append(Voter(v.voter_id, *raft_endpoint))
    mine = [v for v in voters if v.node_id == node_id]
    my_raft = [v for v in raft if v.node_id == node_id]
    return tuple(controllers + mine), tuple(rafts + my_raft)


@click.command("cluster-id")
def cluster_id() -> None:
    """Print a new cluster id (give the same one to `format` on every host).

    \b
    Example:
      quorumlog cluster-id          # e.g. 3f0c6a4e9b7d4f7f8f2d6c1e0a9b8c7d
    """
    click.echo(new_cluster_id())


def _property(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict:
    props = {}
    for value in values:
        name, sep, setting = value.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", ctx, param)
        props[name.strip()] = setting.strip()
    return props


@click.command("format")
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(path_type=Path),
    help="the node's directory (created; must be empty or this node's own)",
)
@click.option("--node-id", required=True, type=click.IntRange(0), help="this node's id")
@click.option("--cluster-id", "cluster", required=True, help="from `quorumlog cluster-id`")
@click.option(
    "--controllers",
    required=True,
    help="every controller's id@host:port (its CONTROLLER listener, as peers reach it)",
)
@click.option(
    "--listeners",
    required=True,
    help="client listeners NAME://host:port,... (host 0.0.0.0 binds every address)",
)
@click.option(
    "--advertised-listeners",
    default="",
    help="what clients and peers are told, NAME://host:port,... [--listeners]",
)
@click.option(
    "--secret-file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="file holding the cluster's shared secret (created, mode 0600, if missing)",
)
@click.option("--broker-only", is_flag=True, help="this node is not in --controllers (a broker)")
@click.option(
    "--join",
    is_flag=True,
    help="a NEW controller for a running cluster: --controllers lists this node and any running "
    "controllers, which are asked for the current voters (then run metadata-quorum add-controller)",
)
@click.option(
    "--raft-port-offset",
    default=DEFAULT_RAFT_PORT_OFFSET,
    show_default=True,
    type=int,
    help="a controller's Raft port is its controller port plus this",
)
@click.option(
    "--feature",
    "features",
    multiple=True,
    help="NAME=LEVEL a new cluster finalizes instead of the default, e.g. transaction.version=1 "
    "(repeatable; Kafka's kafka-storage format --feature; ignored once the cluster exists)",
)
@click.option(
    "--property",
    "-p",
    "extra",
    multiple=True,
    callback=_property,
    help="any other node.toml key, KEY=VALUE (repeatable)",
)
def format_command(
    data_dir: Path,
    node_id: int,
    cluster: str,
    controllers: str,
    listeners: str,
    advertised_listeners: str,
    secret_file: Path,
    broker_only: bool,
    join: bool,
    raft_port_offset: int,
    features: tuple[str, ...],
    extra: dict,
) -> None:
    """Write one node's node.toml (run it after with `quorumlog node --data-dir D`).

    A node listed in --controllers is a controller and a broker; any other node needs
    --broker-only. Refuses (and touches nothing) a directory of another cluster or node.
    Formatting the same node again rewrites its addresses and keeps its data.

    \b
    Example (host 198.18.0.11, the first of three controllers):
      quorumlog format --data-dir /var/lib/quorumlog --node-id 1 --cluster-id $ID \\
        --controllers 1@198.18.0.11:9093,2@198.18.0.12:9093,3@198.18.0.13:9093 \\
        --listeners PLAINTEXT://0.0.0.0:9092 \\
        --advertised-listeners PLAINTEXT://198.18.0.11:9092 \\
        --secret-file /etc/quorumlog/secret
    """
    try:
        voters = parse_voters(controllers, "--controllers")
        if not voters:
            raise FormatError("--controllers: at least one controller is required")
        listed = node_id in {v.node_id for v in voters}
        if broker_only and listed:
            raise FormatError(f"--broker-only: node {node_id} is listed in --controllers")
        if not broker_only and not listed:
            raise FormatError(
                f"node {node_id} is not in --controllers: add it, or pass --broker-only"
            )
        if join and broker_only:
            raise FormatError("--join is for a new controller; a broker joins without it")
        raft = raft_voters_for(voters, raft_port_offset)
        if features:
            try:  # checked here, not only when the controller starts
                parse_feature_levels(",".join(features))
            except FeatureError as exc:
                raise FormatError(f"--feature: {exc}") from None
            extra = {**extra, "quorumlog.bootstrap.features": ",".join(features)}
        if join:
            if not secret_file.exists():
                raise FormatError(f"--join: {secret_file} is missing: copy the cluster's secret")
            voters, raft = _current_voters(voters, raft, node_id, read_secret(secret_file))

        def properties(secret: str) -> dict[str, object]:
            return node_properties(
                node_id=node_id, cluster_id=cluster, secret=secret, listeners=listeners,
                controllers=voters, raft_voters=raft, advertised_listeners=advertised_listeners,
                extra=extra,
            )  # fmt: skip

        # every check before anything is written (the secret file included)
        NodeConfig.from_properties(data_dir, properties("placeholder"))
        check_formattable(data_dir, cluster, node_id)
        secret, created = read_or_create_secret(secret_file)
        config = format_node(data_dir, properties(secret))
    except (FormatError, ConfigError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if join:
        click.echo(f"joining voters {[v.node_id for v in voters if v.node_id != node_id]}: start "
                   f"it, then run quorumlog metadata-quorum add-controller --data-dir {data_dir}")  # fmt: skip
    if created:
        click.echo(f"created secret file {secret_file}: copy it to every other host")
    roles = ",".join(sorted(config.roles))
    click.echo(f"formatted node {node_id} ({roles}) of cluster {cluster} in {data_dir}")
    click.echo(f"run it with: quorumlog node --data-dir {data_dir}")
