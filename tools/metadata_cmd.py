"""`quorumlog metadata`: print a node's metadata image (offline) or a running node's.

Offline (`--data-dir DIR/node-i`): the newest valid Raft checkpoint file (quorum.raft_checkpoint;
a damaged one is skipped for the next older, as the controller does) plus every durable journal
entry after it (quorum.raft_journal), replayed into a
MetadataStateMachine exactly as the controller does. The stored commit index lags (it is
written lazily), so entries past it are included and marked in --records: on a node that was
cut off, they may not have committed. `--records` dumps the records with their
metadata offsets instead, like Kafka's metadata shell. Online (`--bootstrap host:port`, a
CONTROLLER listener): MetadataFetch from offset 0 until caught up, after the listener's
handshake (quorum/controller_auth.py) with the cluster secret from `--secret-file` (a file
holding `controller.quorum.password`, or any node's node.toml).

Journal commands are pysyncobj's pickled `(method id, args, kwargs)`: they are read with an
unpickler that allows nothing but the one helper pysyncobj's bytes encoding needs.
"""

from __future__ import annotations

import codecs
import dataclasses
import enum
import io
import json
import os
import pickle
import ssl
import tomllib
import uuid
from pathlib import Path
from typing import Any

import click
import trio

from log.common.errors import KafkaError
from log.common.node_config import NODE_CONFIG_FILE, NodeConfig, Voter
from log.security.tls import controller_contexts
from quorum.image import MetadataImage
from quorum.raft import BATCH_FORMAT_VERSION
from quorum.raft_checkpoint import CheckpointFiles, RaftCheckpoint
from quorum.raft_journal import JOURNAL_MAGIC, RaftState, decode_records
from quorum.records import decode_batch
from quorum.state_machine import MetadataStateMachine

_REGULAR_COMMAND = 0  # pysyncobj's _COMMAND_TYPE.REGULAR
MAX_ONLINE_ROUNDS = 10_000


class _CommandUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):
            return codecs.encode
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a journal command")


def _batch_payload(command: bytes) -> bytes | None:
    """The metadata batch payload of a journal command (None: a Raft no-op or membership)."""
    if not command or command[0] != _REGULAR_COMMAND:
        return None
    decoded = _CommandUnpickler(io.BytesIO(command[1:])).load()  # (method id, args[, kwargs])
    if not isinstance(decoded, tuple) or len(decoded) < 2 or not decoded[1]:
        return b""
    batch = decoded[1][0]
    if isinstance(batch, str):  # pysyncobj's protocol-2 pickles of bytes come back as latin-1
        batch = batch.encode("latin-1")
    if not batch or batch[0] != BATCH_FORMAT_VERSION:
        return b""
    return bytes(batch[1:])


def read_offline(node_dir: Path) -> tuple[MetadataStateMachine, list[tuple[int, Any]]]:
    """The replayed state machine and `(offset, record-or-note)` lines for --records."""
    metadata_dir = node_dir / "metadata"
    if not metadata_dir.is_dir():
        raise click.ClickException(f"{metadata_dir}: no metadata directory (not a controller?)")
    machine = MetadataStateMachine()
    lines: list[tuple[int, Any]] = []
    for named_index, path, found in CheckpointFiles(str(metadata_dir)).read_all():
        if not isinstance(found, RaftCheckpoint):
            lines.append((named_index, f"skipped damaged checkpoint {path}: {found}"))
            continue
        try:
            machine = MetadataStateMachine.from_checkpoint(found.state)
        except KafkaError as e:
            lines.append((named_index, f"skipped damaged checkpoint {path}: {e}"))
            continue
        lines.append((found.last_index, f"checkpoint at offset {found.last_index}"))
        lines.extend((found.last_index, r) for r in machine.image.to_records())
        break
    commit_index = RaftState(str(metadata_dir / "raft.state")).commit_index
    journal_path = metadata_dir / "raft.journal"
    data = journal_path.read_bytes() if journal_path.exists() else b""
    entries = decode_records(data, len(JOURNAL_MAGIC))[0] if data.startswith(JOURNAL_MAGIC) else []
    noted = False
    for command, index, _term in entries:
        if index <= machine.last_applied_offset:
            continue
        if index > commit_index and not noted:
            # The stored commit index is written lazily (it may lag what committed); like a
            # log dump, show what is durable here, and say where the certain part ends.
            lines.append(
                (index, f"entries from here on are past the stored commit index {commit_index}")
            )
            noted = True
        payload = _batch_payload(command)
        if payload is None:
            continue
        result = machine.apply(index, payload)
        if not result.accepted:
            lines.append((index, f"batch rejected: {result.error_code.name} {result.reason}"))
            continue
        lines.extend((index, r) for r in decode_batch(payload).records)
    return machine, lines


def read_secret(path: Path) -> str:
    """The cluster secret from a file: a node.toml's controller.quorum.password, else the
    file's first non-empty line."""
    text = path.read_text()
    try:
        value = tomllib.loads(text).get("controller.quorum.password")
    except tomllib.TOMLDecodeError:
        value = None
    if isinstance(value, str) and value:
        return value
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    raise click.ClickException(f"{path}: no secret in it")


def controller_tls(path: Path) -> ssl.SSLContext | None:
    """The TLS a node's node.toml says its controller listener speaks (CONTROLLER:SSL), else
    None (a plain secret file, or a PLAINTEXT controller listener)."""
    if path.name != NODE_CONFIG_FILE:
        return None
    return controller_contexts(NodeConfig.load(path.parent))[1]


async def read_online(
    host: str, port: int, secret: str, ssl_context: ssl.SSLContext | None = None
) -> MetadataStateMachine:
    from quorum.broker_lifecycle import BrokerLifecycle  # noqa: F401 - registers nothing
    from quorum.controller_client import ControllerClient

    client = ControllerClient(
        [Voter(-1, host, port)],
        secret=secret,
        client_id="quorumlog-metadata",
        max_attempts=3,
        ssl_context=ssl_context,
    )
    machine = MetadataStateMachine()
    try:
        for _ in range(MAX_ONLINE_ROUNDS):
            with trio.fail_after(15):
                response = await client.metadata_fetch(-1, machine.last_applied_offset, 0)
            if (
                response.checkpoint is not None
                and response.checkpoint_offset > machine.last_applied_offset
            ):
                machine = MetadataStateMachine.from_checkpoint(bytes(response.checkpoint))
            for batch in response.batches:
                machine.apply(batch.offset, bytes(batch.payload))
            if machine.last_applied_offset >= response.committed_offset:
                break
    finally:
        await client.aclose()
    return machine


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def image_summary(image: MetadataImage) -> dict[str, Any]:
    return {
        "last_offset": image.last_offset,
        "controller_id": image.controller_id,
        "controller_epoch": image.controller_epoch,
        "next_producer_id": image.next_producer_id,
        "brokers": [
            {
                "broker_id": b.broker_id,
                "broker_epoch": b.broker_epoch,
                "fenced": b.fenced,
                "endpoints": [f"{e.name}://{e.host}:{e.port}" for e in b.endpoints],
                "registered_offset": b.registered_offset,
            }
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
        ],
        "topics": [
            {
                "name": name,
                "topic_id": str(image.topic_ids_by_name[name]),
                "configs": dict(image.topic_configs(name)),
                "partitions": [
                    {"partition": p, **_plain(s)}
                    for p, s in sorted(
                        image.topics[image.topic_ids_by_name[name]].partitions.items()
                    )
                ],
            }
            for name in sorted(image.topic_ids_by_name)
        ],
    }


def _print_image(image: MetadataImage) -> None:
    s = image_summary(image)
    click.echo(
        f"metadata offset {s['last_offset']}  controller {s['controller_id']} "
        f"(controller_epoch {s['controller_epoch']})  next producer id {s['next_producer_id']}"
    )
    click.echo("brokers:")
    for b in s["brokers"]:
        state = "fenced" if b["fenced"] else "unfenced"
        click.echo(
            f"  {b['broker_id']}  broker_epoch={b['broker_epoch']}  {state}  {','.join(b['endpoints'])}"
        )
    click.echo("topics:")
    for t in s["topics"]:
        click.echo(f"  {t['name']}  id={t['topic_id']}  configs={t['configs']}")
        for p in t["partitions"]:
            click.echo(
                f"    {p['partition']}  leader={p['leader']}  leader_epoch={p['leader_epoch']}  "
                f"isr={p['isr']}  replicas={p['replicas']}  partition_epoch={p['partition_epoch']}"
            )


@click.command("metadata")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="DIR/node-i")
@click.option("--bootstrap", help="host:port of a running node's CONTROLLER listener")
@click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="with --bootstrap: the cluster secret (a file holding it, or a node's node.toml: "
    "then also its controller listener's TLS settings)",
)
@click.option("--records", "show_records", is_flag=True, help="dump records with their offsets")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def metadata(
    data_dir: Path | None,
    bootstrap: str | None,
    secret_file: Path | None,
    show_records: bool,
    as_json: bool,
) -> None:
    """Print the metadata image of a node (offline from its files, or online).

    \b
    Examples:
      quorumlog metadata --data-dir ./data/node-1              # offline, from its files
      quorumlog metadata --data-dir ./data/node-1 --records --json
      quorumlog metadata --bootstrap 127.0.0.1:9192 --secret-file ./data/node-1/node.toml
    """
    if (data_dir is None) == (bootstrap is None):
        raise click.UsageError("give exactly one of --data-dir and --bootstrap")
    lines: list[tuple[int, Any]] = []
    try:
        if data_dir is not None:
            if not data_dir.is_dir():
                raise click.ClickException(f"{data_dir}: no such directory")
            machine, lines = read_offline(data_dir)
        else:
            assert bootstrap is not None  # exactly one of the two, checked above
            host, _, port = bootstrap.rpartition(":")
            if not host or not port.isdigit():
                raise click.UsageError("--bootstrap must be host:port")
            if show_records:
                raise click.UsageError("--records works with --data-dir only")
            if secret_file is None:
                raise click.UsageError("--bootstrap needs --secret-file (the cluster secret)")
            tls = controller_tls(secret_file)
            machine = trio.run(read_online, host, int(port), read_secret(secret_file), tls)
    except (KafkaError, OSError, pickle.UnpicklingError) as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
    except trio.TooSlowError:
        raise click.ClickException(
            f"no answer from the controller at {bootstrap} (a CONTROLLER:SSL listener needs "
            "--secret-file to be a node's node.toml, which carries its TLS settings)"
        ) from None
    if show_records:
        if as_json:
            for offset, r in lines:
                kind = type(r).__name__ if not isinstance(r, str) else "Note"
                click.echo(json.dumps({"offset": offset, "type": kind, "record": _plain(r)}))
        else:
            for offset, r in lines:
                click.echo(f"{offset:>8}  {r}")
        return
    if as_json:
        click.echo(json.dumps(image_summary(machine.image), indent=2))
    else:
        _print_image(machine.image)
    if os.environ.get("QUORUMLOG_DEBUG"):
        click.echo(f"rejected batches: {machine.rejected_count}", err=True)
