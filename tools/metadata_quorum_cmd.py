"""`quorumlog metadata-quorum describe|add-controller|remove-controller` (Kafka's KIP-853 tool).

Each command is one ControllerForward call to the active controller (quorum.metadata_quorum,
quorum.service), reached from `--bootstrap-controller` (any controller's CONTROLLER listener;
the client follows NOT_CONTROLLER to the leader) after the listener's handshake with the
cluster secret. The secret and, for add-controller, the new voter's endpoints come from a
node's directory (`--data-dir`: its node.toml) or a secret file.

Replacing a controller host, one change at a time (see README "Running on several hosts"):
  1. remove-controller --controller-id DEAD     (commits on the live voters)
  2. format the new host with --join, start it  (it follows the log, no vote yet)
  3. add-controller --data-dir NEW              (run where NEW's node.toml is)
"""

from __future__ import annotations

import json
import ssl
import sys
from pathlib import Path
from typing import Any

import click
import trio

from log.common.errors import KafkaError
from log.common.node_config import ConfigError, NodeConfig, Voter
from log.security.tls import controller_contexts
from quorum import metadata_quorum as mq
from tools.metadata_cmd import read_secret

CALL_TIMEOUT_S = 60  # an added voter may need a snapshot before its change commits


def _controllers(bootstrap: str, config: NodeConfig | None) -> list[Voter]:
    voters: list[Voter] = []
    for text in filter(None, (part.strip() for part in bootstrap.split(","))):
        endpoint = mq.parse_endpoint(text)
        if endpoint is None:
            raise click.BadParameter(
                f"{text!r} is not host:port", param_hint="--bootstrap-controller"
            )
        voters.append(Voter(-1, *endpoint))
    if config is not None:
        voters += config.controller_voters
    if not voters:
        raise click.UsageError("give --bootstrap-controller (or --data-dir of a cluster node)")
    return voters


def _config(data_dir: Path | None) -> NodeConfig | None:
    if data_dir is None:
        return None
    try:
        return NodeConfig.load(data_dir)
    except (ConfigError, OSError) as exc:
        raise click.ClickException(f"{data_dir}: {exc}") from None


def _secret(config: NodeConfig | None, secret_file: Path | None) -> str:
    if secret_file is not None:
        return read_secret(secret_file)
    if config is None:
        raise click.UsageError("give --secret-file or --data-dir")
    return str(config.props["controller.quorum.password"])


def describe_voters(voters: list[Voter], secret: str) -> tuple[mq.VoterState, ...]:
    """The running quorum's voters, asked from `voters` (format --join)."""
    return _call(voters, secret, "describe_voters").voters


def _tls(config: NodeConfig | None) -> ssl.SSLContext | None:
    """The TLS the node's controller listener speaks (CONTROLLER:SSL), else None."""
    return None if config is None else controller_contexts(config)[1]


def _call(
    voters: list[Voter],
    secret: str,
    operation: str,
    request: Any = None,
    tls: ssl.SSLContext | None = None,
) -> Any:
    from quorum.controller_client import ControllerClient

    async def run() -> Any:
        client = ControllerClient(
            voters, secret=secret, client_id="quorumlog-metadata-quorum", ssl_context=tls
        )
        try:
            with trio.fail_after(CALL_TIMEOUT_S):
                # any controller tells where every voter listens: the leader may be one this
                # host's configuration does not name (added later)
                found = await client.describe_quorum(from_any_controller=True)
                if operation == "describe_voters":
                    return found
                method = getattr(client, operation)
                return await (method() if request is None else method(request))
        finally:
            await client.aclose()

    try:
        return trio.run(run)
    except (KafkaError, trio.TooSlowError, OSError) as exc:
        click.echo(f"error: {operation}: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)


_BOOTSTRAP = click.option(
    "--bootstrap-controller",
    "bootstrap",
    default="",
    help="host:port,... of controller listeners [the controllers in --data-dir's node.toml]",
)
_SECRET = click.option(
    "--secret-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="the cluster secret (or a node.toml) [from --data-dir]",
)


@click.group("metadata-quorum")
def metadata_quorum() -> None:
    """Describe the metadata quorum and change its voters (one change at a time)."""


@metadata_quorum.command("describe")
@_BOOTSTRAP
@_SECRET
@click.option("--data-dir", type=click.Path(path_type=Path), help="any cluster node's directory")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def describe(
    bootstrap: str, secret_file: Path | None, data_dir: Path | None, as_json: bool
) -> None:
    """The leader, its epoch and high watermark, and every voter (as `--status --replication`).

    \b
    Example:
      quorumlog metadata-quorum describe --bootstrap-controller 198.18.0.11:9093 \\
        --secret-file /etc/quorumlog/secret
    """
    config = _config(data_dir)
    r = _call(_controllers(bootstrap, config), _secret(config, secret_file), "describe_quorum",
              tls=_tls(config))  # fmt: skip
    if as_json:
        click.echo(json.dumps({
            "leader_id": r.leader_id, "leader_epoch": r.leader_epoch,
            "high_watermark": r.high_watermark,
            "voters": [{"id": v.voter_id, "raft": v.raft_endpoint,
                        "controller": v.controller_endpoint, "connected": v.connected,
                        "match_index": v.match_index} for v in r.voters],
        }))  # fmt: skip
        return
    click.echo(f"LeaderId:       {r.leader_id}")
    click.echo(f"LeaderEpoch:    {r.leader_epoch}")
    click.echo(f"HighWatermark:  {r.high_watermark}")
    click.echo(f"CurrentVoters:  {[v.voter_id for v in r.voters]}")
    click.echo(f"{'NodeId':>6}  {'Raft':<24} {'Controller':<24} {'Connected':<9} MatchIndex")
    for v in r.voters:
        status = "leader" if v.voter_id == r.leader_id else ("yes" if v.connected else "NO")
        click.echo(
            f"{v.voter_id:>6}  {v.raft_endpoint:<24} {v.controller_endpoint:<24} "
            f"{status:<9} {v.match_index}"
        )


@metadata_quorum.command("add-controller")
@_BOOTSTRAP
@_SECRET
@click.option(
    "--data-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="the NEW controller's directory (formatted with `format --join`, running)",
)
def add_controller(bootstrap: str, secret_file: Path | None, data_dir: Path) -> None:
    """Make the controller formatted in --data-dir a voter (KIP-853 add-controller).

    Start it first: it follows the metadata log and gets the vote once this commits. Refused
    when the quorum could stall (fewer live voters than a majority of the new set: remove
    dead voters first).

    \b
    Example (on the new host, after `format --join` and `node`):
      quorumlog metadata-quorum add-controller --data-dir /var/lib/quorumlog
    """
    config = _config(data_dir)
    assert config is not None
    if "controller" not in config.roles:
        raise click.ClickException(f"{data_dir}: node {config.node_id} is not a controller")
    me = {v.node_id: v for v in config.controller_voters}[config.node_id]
    raft = {v.node_id: v for v in config.raft_voters}[config.node_id]
    request = mq.AddRaftVoterRequest(
        config.node_id, f"{raft.host}:{raft.port}", f"{me.host}:{me.port}"
    )
    r = _call(_controllers(bootstrap, config), _secret(config, secret_file), "add_raft_voter",
              request, _tls(config))  # fmt: skip
    click.echo(f"added controller {config.node_id}; voters now {list(r.voters)}")


@metadata_quorum.command("remove-controller")
@_BOOTSTRAP
@_SECRET
@click.option("--data-dir", type=click.Path(path_type=Path), help="any cluster node's directory")
@click.option("--controller-id", required=True, type=click.IntRange(0), help="the voter to remove")
def remove_controller(
    bootstrap: str, secret_file: Path | None, data_dir: Path | None, controller_id: int
) -> None:
    """Remove a voter (KIP-853 remove-controller), e.g. a controller whose host is lost.

    The leader itself cannot be removed: stop that node first (another voter takes over).

    \b
    Example (controller 3's host is lost for good):
      quorumlog metadata-quorum remove-controller --controller-id 3 \\
        --bootstrap-controller 198.18.0.11:9093,198.18.0.12:9093 --secret-file /etc/quorumlog/secret
    """
    config = _config(data_dir)
    r = _call(_controllers(bootstrap, config), _secret(config, secret_file), "remove_raft_voter",
              mq.RemoveRaftVoterRequest(controller_id), _tls(config))  # fmt: skip
    click.echo(f"removed controller {controller_id}; voters now {list(r.voters)}")
