"""JSON encoding of quorum/controller.py's request/response dataclasses (ControllerForward).

The dataclasses are frozen, typed and flat enough to be rebuilt from their own type hints:
int/str/bool, ErrorCode, uuid.UUID (as its string), tuples, `X | None`, mappings of str, and
nested dataclasses. Decoding validates every value against its hint and raises
InvalidRequestError (never an untyped exception) for anything else, so a hostile payload
costs one refusal. Only the operations in OPERATIONS may be decoded.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from log.common.errors import ErrorCode, InvalidRequestError
from quorum import acls, features
from quorum import broker_configs as bc
from quorum import controller as c
from quorum import leader_election as le
from quorum import metadata_quorum as mq
from quorum import reassignment as ra
from quorum import scram_credentials as scram

# operation -> (request type, response type)
OPERATIONS: dict[str, tuple[type, type]] = {
    "create_topics": (c.CreateTopicsRequest, c.CreateTopicsResponse),
    "delete_topics": (c.DeleteTopicsRequest, c.DeleteTopicsResponse),
    "create_partitions": (c.CreatePartitionsRequest, c.CreatePartitionsResponse),
    "alter_topic_configs": (c.AlterConfigsRequest, c.AlterConfigsResponse),
    "alter_broker_configs": (bc.AlterBrokerConfigsRequest, bc.AlterBrokerConfigsResponse),
    "alter_partitions": (c.AlterPartitionsRequest, c.AlterPartitionsResponse),
    "controlled_shutdown": (c.ControlledShutdownRequest, c.ControlledShutdownResponse),
    "elect_leaders": (le.ElectLeadersRequest, le.ElectLeadersResponse),
    "alter_partition_reassignments": (
        ra.AlterPartitionReassignmentsRequest,
        ra.AlterPartitionReassignmentsResponse,
    ),
    "alter_user_scram_credentials": (
        scram.AlterUserScramCredentialsRequest,
        scram.AlterUserScramCredentialsResponse,
    ),
    "create_acls": (acls.CreateAclsRequest, acls.CreateAclsResponse),
    "delete_acls": (acls.DeleteAclsRequest, acls.DeleteAclsResponse),
    "describe_quorum": (mq.DescribeQuorumRequest, mq.DescribeQuorumResponse),
    "add_raft_voter": (mq.AddRaftVoterRequest, mq.VoterChangeResponse),
    "remove_raft_voter": (mq.RemoveRaftVoterRequest, mq.VoterChangeResponse),
    "update_features": (features.UpdateFeaturesRequest, features.UpdateFeaturesResponse),
}
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
_MAX_DEPTH = 8


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, tuple | list):
        return [_to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    assert value is None or isinstance(value, int | str | bool), type(value)
    return value


def encode(value: Any) -> bytes:
    return json.dumps(_to_json(value), separators=(",", ":")).encode()


def _bad(what: str) -> InvalidRequestError:
    return InvalidRequestError(f"controller payload: {what}")


def _from_json(hint: Any, value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise _bad("nested too deeply")
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _from_json(inner, value, depth + 1)
    if origin is tuple:
        if not isinstance(value, list):
            raise _bad(f"expected a list, got {type(value).__name__}")
        (inner, _ellipsis) = typing.get_args(hint)
        return tuple(_from_json(inner, v, depth + 1) for v in value)
    if origin in (Mapping, dict) or hint in (Mapping, dict):
        if not isinstance(value, dict):
            raise _bad("expected an object")
        _key, inner = typing.get_args(hint)
        return {str(k): _from_json(inner, v, depth + 1) for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, value, depth + 1)
    if hint is ErrorCode:
        try:
            return ErrorCode(value)
        except ValueError:
            return ErrorCode.UNKNOWN_SERVER_ERROR
    if hint is uuid.UUID:
        try:
            return uuid.UUID(value)
        except (ValueError, TypeError, AttributeError):
            raise _bad(f"bad uuid {value!r}") from None
    if hint is bool:
        if not isinstance(value, bool):
            raise _bad("expected a bool")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) >= 2**63:
            raise _bad("expected an int64")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise _bad("expected a string")
        return value
    raise _bad(f"unsupported type {hint!r}")


def _dataclass(cls: type, value: Any, depth: int) -> Any:
    if not isinstance(value, dict):
        raise _bad(f"{cls.__name__}: expected an object")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in value:
            kwargs[f.name] = _from_json(hints[f.name], value[f.name], depth)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise _bad(f"{cls.__name__}: {exc}") from None


def decode(cls: type, data: bytes) -> Any:
    """Rebuild a `cls` instance from `encode` output; raises InvalidRequestError."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise _bad(f"{len(data)} bytes")
    try:
        value = json.loads(bytes(data))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(f"not JSON: {exc}") from None
    return _dataclass(cls, value, 0)
