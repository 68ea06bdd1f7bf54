"""KIP-853's quorum operations on the metadata quorum: describe it, add a voter, remove one.

The requests and answers `quorumlog metadata-quorum` sends to the active controller (through
ControllerForward, quorum.controller_codec), and the pure checks the controller makes before it
asks Raft for a change (quorum.service runs them; quorum.raft changes the voter set). A voter is
named by its node id here and by its Raft address inside Raft; the controller maps one to the
other with the voter directory: the configured voters, overlaid by the RegisterControllerRecords
of the metadata image.

A change is refused when it could stall the quorum: after it, the voters this leader reaches
(itself included, plus the one being added) must still be a majority of the new set, so a
change never waits on a host that is down. Replacing a dead voter therefore goes: remove the
dead one, then add the new one (each commits on the live voters alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from log.common.errors import ErrorCode
from quorum.raft_voters import majority


@dataclass(frozen=True)
class VoterEndpoints:
    voter_id: int
    raft_endpoint: str  # "host:port": the voter's identity inside Raft
    controller_endpoint: str  # "host:port" of its CONTROLLER listener ("" if unknown)


@dataclass(frozen=True)
class DescribeQuorumRequest:
    # True: any controller answers from its own view (the voters and their endpoints, the
    # leader it knows; `connected` and `match_index` then describe that controller's own
    # links). Tools use it to find the leader's endpoint, which their configuration may lack.
    from_any_controller: bool = False


@dataclass(frozen=True)
class VoterState:
    voter_id: int  # -1: an address the voter directory does not know
    raft_endpoint: str
    controller_endpoint: str
    connected: bool  # the leader holds a Raft connection to it (always True for itself)
    match_index: int  # the leader's last replicated Raft index on it (-1: unknown)


@dataclass(frozen=True)
class DescribeQuorumResponse:
    error_code: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1  # the Raft term
    high_watermark: int = -1  # the committed metadata offset
    voters: tuple[VoterState, ...] = ()
    error_message: str = ""


@dataclass(frozen=True)
class AddRaftVoterRequest:
    voter_id: int
    raft_endpoint: str
    controller_endpoint: str


@dataclass(frozen=True)
class RemoveRaftVoterRequest:
    voter_id: int


@dataclass(frozen=True)
class VoterChangeResponse:
    error_code: ErrorCode
    error_message: str = ""
    voters: tuple[int, ...] = ()  # the voter ids once the change committed


def parse_endpoint(text: str) -> tuple[str, int] | None:
    """`host:port` (an IPv6 host in brackets) or None when it is not one."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def voter_ids(voters: Iterable[str], directory: Mapping[int, VoterEndpoints]) -> tuple[int, ...]:
    by_address = {e.raft_endpoint: e.voter_id for e in directory.values()}
    return tuple(sorted(by_address.get(v, -1) for v in voters))


def check_add(
    request: AddRaftVoterRequest,
    voters: tuple[str, ...],
    reachable: set[str],
    directory: Mapping[int, VoterEndpoints],
) -> str:
    """Why adding `request` must be refused ("" when it may go ahead). `reachable`: the voters
    the leader is connected to now, itself included."""
    if request.voter_id < 0:
        return f"voter id {request.voter_id} is negative"
    for name, text in (
        ("raft", request.raft_endpoint),
        ("controller", request.controller_endpoint),
    ):
        if parse_endpoint(text) is None:
            return f"{name} endpoint {text!r} is not host:port"
    if request.raft_endpoint in voters:
        return f"{request.raft_endpoint} is already a voter"
    if request.voter_id in voter_ids(voters, directory):
        return f"node {request.voter_id} is already a voter"
    live = len(reachable & set(voters)) + 1  # the new voter must come up to catch up
    if live < majority(len(voters) + 1):
        return (
            f"only {live - 1} of {len(voters)} voters are reachable: with a new voter the quorum "
            f"would need {majority(len(voters) + 1)}; remove the dead voters first"
        )
    return ""


def check_remove(
    address: str | None,
    voters: tuple[str, ...],
    reachable: set[str],
    leader_address: str,
) -> str:
    """Why removing the voter at `address` must be refused ("" when it may go ahead)."""
    if address is None or address not in voters:
        return "not a voter"
    if address == leader_address:
        return "it is the leader: stop that node (another voter takes over), then remove it"
    if len(voters) == 1:
        return "it is the last voter"
    remaining = set(voters) - {address}
    live = len(reachable & remaining)
    if live < majority(len(remaining)):
        return (
            f"only {live} of the {len(remaining)} remaining voters are reachable, fewer than a "
            f"majority: the change could never commit"
        )
    return ""
