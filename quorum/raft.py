"""The metadata quorum's Raft binding: pysyncobj 0.3.17 driven from trio.

Theory of operation
-------------------
Controllers are pysyncobj voters. A `_MetadataSyncObj` has exactly ONE replicated method,
`_append_batch(batch: bytes)`, forever: pysyncobj numbers replicated methods by sorted name, so a
second one could renumber the journal's entries. `batch` is an opaque envelope (a version byte,
then the caller's encoded metadata records); nothing pickled of ours ever enters the log.

Every controller applies committed entries, in log order, in pysyncobj's tick thread:
`state_machine.apply(metadata_offset, payload)` with `metadata_offset` = the Raft index of the
entry (`raftLastApplied + 1` inside the replicated call, also right after a checkpoint restore).
Offsets therefore increase strictly but have gaps (Raft's own no-op entries, never applied).
Apply never raises into pysyncobj (a raising replicated method wedges a node for good): a
failure is recorded in `apply_failures` and returned as an `ApplyFailure` result. Apply uses no
clock or randomness. Readers see offsets of applied entries only: a checkpoint, the tail's base
and the committed offset are published at the state machine's `last_applied_offset`, never at
the Raft index a checkpoint was taken at, which may be a no-op's (`_state_offset`).

Durability (each gap of pysyncobj as shipped, and where it is closed):
  1. journal never synced before acks/votes -> `RaftJournal` (quorum.raft_journal) appends to its
     own CRC'd file; `_SyncingTransport` holds every outgoing Raft message until the end of the
     tick or poll round, syncs the journal once (group commit), then sends; `_append_batch` syncs
     before applying (covers a one-node quorum). So a follower acks, and the leader counts
     itself, only for durable entries, and a caller is acked only once its batch is durable on a
     majority;
  2. term/vote/commit index stored without fsync -> `RaftState`, fsync + rename + dir fsync,
     synchronously on every term/vote change;
  3. snapshot renamed without fsync -> our serializer fsyncs the checkpoint file and publishes
     it as a numbered file (hard link, rename, dir fsync); the directory is fsynced again before
     the journal drops anything (and when a checkpoint is loaded);
  4. crash between snapshot rename and journal rewrite loses committed entries -> the journal is
     rewritten crash-atomically, and pysyncobj is shown a journal starting exactly at the loaded
     checkpoint's entries, so its loader never discards it.

Checkpoints are pysyncobj's log compaction with our serializer/deserializer: the state machine's
`to_checkpoint()` bytes in our CRC'd file (quorum.raft_checkpoint), taken every
`checkpoint_interval_records` entries or `checkpoint_interval_ms`. The newest
`checkpoints_kept` (3) files are kept as `metadata-<offset>.checkpoint`, and the journal FILE
keeps every entry from the OLDEST of them on (pysyncobj itself only sees the journal from the
newest: its compaction trigger, `len(log)`, and its snapshot sends stay as designed; the leader
sends `raft.checkpoint`, a hard link to the newest). Start-up takes the newest file that
validates: normally the newest, replaying only the tail after it. A damaged newer file is logged
CRITICAL, renamed `*.corrupt` and skipped for the next older one plus a longer journal replay,
but only if the journal holds that checkpoint's entries and reaches past every skipped file's
offset, so no committed record can be missed. If no file is usable the node refuses to start
(`CorruptCheckpointFileError`), unless the journal was never cut (it starts at index 1): then it
replays all of it from the empty state. A snapshot installed from the leader restarts the journal
there, so it becomes the only file. Start-up reads at most ~`checkpoints_kept` intervals of
journal; it applies only the tail after the checkpoint it loads.

Latency: pysyncobj's default append batching makes a commit wait for the next 100 ms heartbeat.
We use appendEntriesUseBatch=False (AppendEntries go out in the same tick) plus the group commit
above; a commit on loopback takes ~2-6 ms (bench/metadata_commit.py). Elections: 300-600 ms
randomized timeouts, 75 ms heartbeats: a new leader ~0.3-0.7 s after a kill -9, in one round
(idle connections are kept read from: _SyncingTransport.keep_alive).

Idle cost: the tick thread sleeps until its next timed duty (a leader's heartbeat, a follower's
election deadline), at most `tick_period_ms`, instead of waking every period: a follower wakes for
the leader's heartbeats only, and heartbeats leave on time rather than on the first tick after
they are due (`_MetadataSyncObj.seconds_until_due`).

Threads: pysyncobj runs with autoTick=False on a thread we start after everything is built; trio
never blocks on it. Results cross into trio through the trio token (`run_sync_soon`).

Voters: the configured voters (`controller.quorum.raft.voters`) are only the first voter set.
pysyncobj's dynamic membership then adds or removes one voter at a time (`change_voters`, the
`metadata-quorum add-controller/remove-controller` tools): its membership entries sit in the
journal beside ours and take effect when appended. pysyncobj does not rebuild the set on
start-up, so `_build` does (quorum.raft_voters): each checkpoint file stores the voter set at its
index, and the membership entries of the journal after it are replayed on top; the result is
what pysyncobj is constructed with and what the deserializer hands back to it.

Security: the Raft port binds the configured address only, and pysyncobj's `password` (Fernet,
needs `cryptography`) authenticates every frame: its wire format is pickle, so an open port would
run anyone's code.
"""

from __future__ import annotations

import collections
import io
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj import syncobj as _pysyncobj_module
from pysyncobj.monotonic import monotonic  # pysyncobj's own clock, for its deadlines
from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE
from pysyncobj.transport import TCPTransport

from log.common.errors import (
    InvalidRequestError,
    KafkaStorageError,
    NotControllerError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RequestTimedOutError,
)
from log.common.files import fsync_directory
from quorum.raft_checkpoint import (
    CheckpointFiles,
    CorruptCheckpointFileError,
    RaftCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
)
from quorum.raft_files import fsync_file, write_and_fsync
from quorum.raft_journal import RaftJournal
from quorum.raft_port_guard import admit_incoming
from quorum.raft_voters import ADD, REMOVE, MembershipChange, voters_after, voters_before

__all__ = [
    "ApplyFailure",
    "CorruptCheckpointFileError",
    "CommitOutcomeUnknownError",
    "ReplicatedStateMachine",
    "NotControllerError",
    "ProposeResult",
    "QuorumUnavailableError",
    "RaftConfig",
    "RaftNode",
]

logger = logging.getLogger(__name__)

BATCH_FORMAT_VERSION = 1  # first byte of every replicated batch
_STATE_LEADER = 2  # pysyncobj's _RAFT_STATE.LEADER
VOTER_CHANGE_RETRY_S = 0.05  # a voter change pysyncobj refused for now is asked again after this
_MEMBERSHIP_COMMAND = 2  # pysyncobj's _COMMAND_TYPE.MEMBERSHIP: first byte of such an entry


class ReplicatedStateMachine(Protocol):
    """What the Raft binding drives (quorum.state_machine.MetadataStateMachine is the one the
    node runs; tests drive toys)."""

    @property
    def last_applied_offset(self) -> int: ...

    def apply(self, metadata_offset: int, payload: bytes) -> object: ...

    def to_checkpoint(self) -> bytes: ...


class StateMachineFactory(Protocol):
    def __call__(self) -> ReplicatedStateMachine: ...

    def from_checkpoint(self, data: bytes) -> ReplicatedStateMachine: ...


class QuorumUnavailableError(NotControllerError):
    """This controller leads but cannot reach a majority: retry on another controller later."""


class CommitOutcomeUnknownError(RequestTimedOutError):
    """Leadership changed after the batch was handed to Raft: it may or may not have committed."""


class VoterChangeRefusedError(InvalidRequestError):
    """The leader refused a voter change: another one is still uncommitted, the address is
    already a voter (add) or not one (remove), or it is the leader itself (remove)."""


class RaftFatalError(KafkaStorageError):
    """The node stopped itself (e.g. a corrupt checkpoint arrived); it must be restarted."""


@dataclass(frozen=True)
class ApplyFailure:
    """The state machine raised while applying the batch at `offset` (recorded, not thrown)."""

    offset: int
    error: str


@dataclass(frozen=True)
class ProposeResult:
    offset: int  # the metadata offset the batch committed at
    result: object  # what state_machine.apply returned (an ApplyFailure if it raised)


@dataclass(frozen=True)
class RaftConfig:
    """One controller's Raft settings. Addresses are pysyncobj node ids, "host:port"."""

    self_address: str
    partner_addresses: tuple[str, ...]
    data_dir: str  # the node's directory; Raft files go in data_dir/metadata/
    password: str
    append_entries_period_ms: int = 75  # heartbeat interval
    election_timeout_min_ms: int = 300
    election_timeout_max_ms: int = 600
    leader_fallback_timeout_ms: int = 2000  # a leader cut off from a majority steps down
    connection_timeout_ms: int = 2000
    connection_retry_ms: int = 200
    # The longest poll: a tick also ends at the next heartbeat or election deadline, and
    # commands and messages wake the poller at once.
    tick_period_ms: int = 100
    checkpoint_interval_records: int = 5000
    checkpoint_interval_ms: int = 300_000
    checkpoints_kept: int = 3  # the journal is kept from the oldest of them (fallbacks)
    tail_max_batches: int = 20_000  # in-memory (offset, payload) tail for catching-up readers
    max_batch_bytes: int = 1024 * 1024
    max_in_flight_proposals: int = 1000

    def validate(self) -> None:
        # pysyncobj asserts these relationships; say why here instead of failing its assert.
        if self.election_timeout_min_ms <= 3 * self.append_entries_period_ms:
            raise ValueError(
                "election_timeout_min_ms must exceed 3 heartbeats, or followers "
                "start elections while the leader is healthy"
            )
        if self.election_timeout_max_ms <= self.election_timeout_min_ms:
            raise ValueError("election_timeout_max_ms must exceed election_timeout_min_ms")
        if self.connection_timeout_ms < self.election_timeout_max_ms:
            raise ValueError("connection_timeout_ms must be >= election_timeout_max_ms")
        if self.leader_fallback_timeout_ms <= self.append_entries_period_ms:
            raise ValueError("leader_fallback_timeout_ms must exceed append_entries_period_ms")
        if self.tail_max_batches < self.checkpoint_interval_records:
            raise ValueError(
                "tail_max_batches must cover a checkpoint interval, or readers "
                "between the checkpoint and the tail could not catch up"
            )
        if self.checkpoint_interval_records < 2:
            raise ValueError("checkpoint_interval_records must be >= 2")
        if self.checkpoints_kept < 1:
            raise ValueError("checkpoints_kept must be >= 1")
        if not self.password:
            raise ValueError("a password is required: pysyncobj's wire format is pickle")
        if self.self_address in self.partner_addresses:
            raise ValueError("partner_addresses must not contain self_address")

    @property
    def metadata_dir(self) -> str:
        return os.path.join(self.data_dir, "metadata")


class _PickledNode:
    """What a pysyncobj TCPNode inside a membership entry unpickles to: its attributes only."""


class _MembershipUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("pysyncobj.node", "TCPNode"):
            return _PickledNode
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a membership entry")


def decode_membership(command: bytes) -> MembershipChange | None:
    """`(ADD | REMOVE, "host:port")` for one of pysyncobj's membership entries; None for any
    other entry. pysyncobj writes `[kind, node id, TCPNode]` pickled; our own journal only."""
    if not command or command[0] != _MEMBERSHIP_COMMAND:
        return None
    request = _MembershipUnpickler(io.BytesIO(command[1:])).load()
    kind, address = request[0], request[1]
    if kind not in (ADD, REMOVE) or not isinstance(address, str):
        raise ValueError(f"unknown membership entry {request!r}")
    return kind, address


def _membership_after(journal: Any, index: int) -> list[MembershipChange]:
    """The membership changes among the journal's entries past Raft `index`, oldest first."""
    changes = []
    for i in range(len(journal)):
        command, entry_index, _term = journal[i]
        if entry_index > index and command and command[0] == _MEMBERSHIP_COMMAND:
            change = decode_membership(bytes(command))
            if change is not None:
                changes.append(change)
    return changes


# -- pysyncobj hooks --------------------------------------------------------------------------


class _DropResendTruncationAlarm(logging.Filter):
    """pysyncobj logs CRITICAL whenever a follower cuts its log below its applied index, also
    when the leader merely re-sends identical entries (routine in no-batch mode). RaftJournal
    raises the alarm itself, only when an applied entry is really replaced."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("truncating already-applied log entries")


logging.getLogger("pysyncobj.syncobj").addFilter(_DropResendTruncationAlarm())

_pending_journals: dict[str, RaftJournal] = {}
_pending_journals_lock = threading.Lock()
_original_create_journal = _pysyncobj_module.createJournal


def _create_journal(journalFile=None):  # noqa: N803 (pysyncobj's name)
    """pysyncobj builds its journal inside SyncObj.__init__; hand it ours for our paths."""
    with _pending_journals_lock:
        journal = _pending_journals.pop(journalFile, None)
    return journal if journal is not None else _original_create_journal(journalFile)


_pysyncobj_module.createJournal = _create_journal


_KEEPALIVE = {"type": "quorumlog_keepalive"}  # see _SyncingTransport.keep_alive


class _SyncingTransport(TCPTransport):
    """Group commit: outgoing Raft messages are held until the end of the current tick or poll
    round, then the journal is synced once and they all leave. No ack, vote or AppendEntries
    ever leaves before the entries it reflects are durable, and one fdatasync covers every
    entry appended in the round (pysyncobj's no-batch mode would otherwise sync per command)."""

    def __init__(self, syncObj, selfNode, otherNodes):  # noqa: N803 (pysyncobj's names)
        self._held: list[tuple[object, object]] = []
        self._last_sent_s: dict[object, float] = {}  # per peer node, monotonic
        self._keepalive_s = syncObj.conf.connectionTimeout / 4
        # Voters (addresses) whose connection is down, since when (monotonic): read by trio.
        self.disconnected_since_s: dict[str, float] = {}
        syncObj._quorum_transport = self  # pysyncobj keeps its transport private
        super().__init__(syncObj, selfNode, otherNodes)

    def send(self, node, message):
        self._held.append((node, message))
        return True

    def keep_alive(self, now_s: float) -> None:
        """Send a no-op on every connection to a voter that carried nothing for a quarter of the
        connection timeout. pysyncobj drops a connection that read nothing for that timeout, at
        its next send or receive event: two followers exchange no Raft messages while a leader
        lives, so when it died, the first candidate's vote request was that event and was lost
        (dropped before sending, or by the receiver before reading). The other survivor then
        timed out itself and voted for itself in the same term, and a second round decided:
        every controller kill cost two election timeouts (the Raft term rose by 2 each time).
        The no-op is a dict pysyncobj 0.3.17 ignores (a peer without this code ignores it too);
        _onMessageReceived drops it before pysyncobj sees it."""
        for node in self._nodes:
            if now_s - self._last_sent_s.get(node, 0.0) < self._keepalive_s:
                continue
            conn = self._connections.get(node)
            if conn is None or conn.state != CONNECTION_STATE.CONNECTED:
                continue
            if self._syncObj.encryptor and not conn.sendRandKey:
                continue  # the key exchange is not done: pysyncobj's own first message is next
            self._last_sent_s[node] = now_s
            super().send(node, _KEEPALIVE)

    def _onNodeConnected(self, node):  # noqa: N802 (pysyncobj's name)
        self.disconnected_since_s.pop(str(node.id), None)
        super()._onNodeConnected(node)

    def _onNodeDisconnected(self, node):  # noqa: N802 (pysyncobj's name)
        # The first loss counts: each failed reconnection attempt calls this again.
        self.disconnected_since_s.setdefault(str(node.id), time.monotonic())
        super()._onNodeDisconnected(node)

    def _onMessageReceived(self, node, message):  # noqa: N802 (pysyncobj's name)
        if message != _KEEPALIVE:  # reading it was the point: the connection's read time moved
            super()._onMessageReceived(node, message)

    def _onNewIncomingConnection(self, conn):  # noqa: N802 (pysyncobj's name)
        super()._onNewIncomingConnection(conn)
        admit_incoming(self, conn, time.monotonic())  # raft_port_guard.py: bounded strangers

    def flush_held(self) -> None:
        if not self._held:
            return
        held, self._held = self._held, []
        journal = getattr(self._syncObj, "_quorum_journal", None)
        if journal is not None and journal.dirty:
            journal.sync()
        now_s = time.monotonic()
        for node, message in held:
            self._last_sent_s[node] = now_s
            super().send(node, message)


class _MetadataSyncObj(SyncObj):
    def __init__(
        self,
        binding: RaftNode,
        conf: SyncObjConf,
        journal: RaftJournal,
        partner_addresses: tuple[str, ...],
    ) -> None:
        self._quorum_binding = binding
        self._quorum_journal = journal
        config = binding.config
        with _pending_journals_lock:
            _pending_journals[conf.journalFile] = journal
        try:
            super().__init__(
                config.self_address,
                list(partner_addresses),
                conf,
                transportClass=_SyncingTransport,
            )
        finally:
            with _pending_journals_lock:
                _pending_journals.pop(conf.journalFile, None)

    def defer_election(self) -> None:
        """This node's own tick loop stood still for longer than an election timeout (a starved
        or paused process, a journal fsync on a busy disk): as a follower or candidate, give
        the leader a fresh election timeout to reach it before it starts an election.

        Whatever the stall, the follower's timer had run out, and pysyncobj starts an election
        on the next tick: a new term, which deposes a leader that was alive all along (Raft
        without pre-vote). When the stall was short the leader's heartbeats wait in the socket
        and the tick loop reads them first; after one longer than the connection timeout the
        leader has dropped the connection and there is nothing to read (a whole node paused
        for 3.9 s on a loaded 2-core box did this: its return moved the controller, 2026-11-27).
        Deferring is safe (an election only comes later) and costs at most one election
        timeout when the leader did die meanwhile. pysyncobj 0.3.17 (pinned) keeps the timer
        and state in name-mangled attributes; tests/quorum/test_raft_stalled_follower.py
        fails if they change."""
        if self._SyncObj__raftState == _pysyncobj_module._RAFT_STATE.LEADER:
            return
        if self._SyncObj__transferInProgress:  # the leader asked for this election: no delay
            return
        deadline = monotonic() + self._SyncObj__generateRaftTimeout()
        current = self._SyncObj__raftElectionDeadline  # type: ignore[has-type]
        self._SyncObj__raftElectionDeadline = max(current, deadline)

    def seconds_until_due(self) -> float:
        """Seconds until this node's next timed Raft duty: a leader's next heartbeat, a
        follower's or candidate's election deadline (negative once due). The tick loop sleeps
        that long at most, so an idle follower wakes only for the leader's heartbeats (pysyncobj
        would tick every period) and the leader's heartbeats leave when due, not on the next
        tick after: with 50 ms ticks a gap between two heartbeats reached 100 ms."""
        if self._SyncObj__raftState == _pysyncobj_module._RAFT_STATE.LEADER:
            due = self._SyncObj__newAppendEntriesTime
        else:
            due = self._SyncObj__raftElectionDeadline
        return float(due) - monotonic()

    @replicated
    def _append_batch(self, batch):  # THE replicated entry point: never add another
        # Runs in the tick thread on every controller, in log order, once per committed entry.
        return self._quorum_binding._apply_committed(self.raftLastApplied + 1, batch)


def _state_offset(state_machine: ReplicatedStateMachine, last_index: int) -> int:
    """The metadata offset a checkpoint taken (or loaded) at Raft `last_index` is published
    at: the state machine's own last applied offset, NOT `last_index`. They differ when the
    entries ending at `last_index` are Raft no-ops (a new leader's first entry; pysyncobj
    compacts at whatever entry was applied last, and a restarted one-node quorum does so right
    after its own no-op), which never reach `apply`. A reader that loads the checkpoint stands
    at the state's offset; publishing `last_index` instead put it below the tail's base for
    good, and MetadataFetch answered with the same checkpoint forever."""
    offset = max(0, state_machine.last_applied_offset)  # an empty state may say -1
    assert offset <= last_index, (offset, last_index)  # entries past last_index are unapplied
    return offset


# -- the binding ------------------------------------------------------------------------------


class RaftNode:
    """One controller's seat in the metadata quorum: `async with RaftNode(...) as node:`."""

    def __init__(
        self,
        config: RaftConfig,
        *,
        state_machine_factory: StateMachineFactory,
        on_leadership_change: Callable[[bool, int], None] | None = None,
    ) -> None:
        """`state_machine_factory()` builds an empty state machine and
        `state_machine_factory.from_checkpoint(bytes)` restores one (a class satisfies both).
        `on_leadership_change(is_leader, raft_term)` runs in the trio thread whenever this node
        becomes or stops being leader (the controller commits its fencing record from there)."""
        config.validate()
        self.config = config
        self._factory = state_machine_factory
        self._on_leadership_change = on_leadership_change
        self._state_machine: ReplicatedStateMachine = state_machine_factory()
        self._committed_offset = 0
        self._tail: collections.deque[tuple[int, bytes]] = collections.deque()
        self._tail_base_offset = 0  # the tail holds every batch with offset > this
        self._tail_lock = threading.Lock()
        self._checkpoint: tuple[int, bytes] | None = None  # (offset, state machine bytes)
        self._preloaded: tuple[bytes, ReplicatedStateMachine] | None = None
        self._checkpoint_files = CheckpointFiles(config.metadata_dir, config.checkpoints_kept)
        self.apply_failures: collections.deque[ApplyFailure] = collections.deque(maxlen=1000)
        self.applied_count = 0  # batches applied by this process (replay included)
        self._fatal_error: BaseException | None = None
        self._syncobj: _MetadataSyncObj | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._wake_write_fd = -1
        self._has_quorum = False  # published by the tick thread once per tick
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._wakeup_pending = False
        self._advanced = trio.Event()
        self._in_flight = trio.Semaphore(config.max_in_flight_proposals)
        self._proposals: set[trio.Event] = set()  # in-flight proposals' done events
        # The voter set (Raft addresses, this node's included), published by the tick thread.
        self._voters: tuple[str, ...] = tuple(
            sorted({config.self_address, *config.partner_addresses})
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> RaftNode:
        self._trio_token = trio.lowlevel.current_trio_token()
        await trio.to_thread.run_sync(self._build)
        self._thread = threading.Thread(
            target=self._tick_loop, name=f"raft-tick-{self.config.self_address}", daemon=True
        )
        self._thread.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._stopping = True
        if self._thread is not None:
            self._wake_tick_thread()
            await trio.to_thread.run_sync(self._thread.join)
        elif self._syncobj is not None:
            self._syncobj.destroy()

    def _paths(self) -> tuple[str, str, str]:
        d = self.config.metadata_dir
        return (
            os.path.join(d, "raft.journal"),
            os.path.join(d, "raft.state"),
            os.path.join(d, "raft.checkpoint"),
        )

    def _build(self) -> None:
        """Blocking set-up (worker thread): pick the checkpoint, open the journal, bind."""
        os.makedirs(self.config.metadata_dir, exist_ok=True)
        journal_path, state_path, checkpoint_path = self._paths()
        for stale in (checkpoint_path + ".tmp", checkpoint_path + ".1.tmp"):
            if os.path.exists(stale):
                os.unlink(stale)  # an unfinished checkpoint or snapshot transfer
        files = self._checkpoint_files
        files.remove_stale_tmp()
        journal = RaftJournal(
            journal_path,
            state_path,
            make_checkpoint_durable=self._make_checkpoint_durable,
            retain_from_index=files.retain_from_index,
            last_applied_index=self._last_applied_index,
        )
        try:
            chosen = self._choose_checkpoint(journal)
            voters: tuple[str, ...] | None = None
            checkpoint_index = 0
            if chosen is None:
                if os.path.lexists(checkpoint_path):
                    os.unlink(checkpoint_path)  # pysyncobj must not load a file we refused
                journal.start_at(None, None)
            else:
                path, checkpoint, data, state_machine = chosen
                self._preloaded = (data, state_machine)
                # pysyncobj loads (and sends followers) raft.checkpoint: point it at ours.
                if os.path.lexists(checkpoint_path + ".tmp"):
                    os.unlink(checkpoint_path + ".tmp")
                os.link(path, checkpoint_path + ".tmp")
                os.replace(checkpoint_path + ".tmp", checkpoint_path)
                fsync_directory(self.config.metadata_dir)
                # Visible from __aenter__ on (pysyncobj's first tick installs the same object).
                self._state_machine = state_machine
                offset = _state_offset(state_machine, checkpoint.last_index)
                self._committed_offset = self._tail_base_offset = offset
                self._checkpoint = (offset, checkpoint.state)
                journal.start_at(checkpoint.prev_index, files.retain_from_index())
                voters, checkpoint_index = checkpoint.voters, checkpoint.last_index
            # The voter set: the checkpoint's (or the configured one), then the journal's changes.
            self._voters = voters_after(
                voters if voters is not None else self._voters,
                _membership_after(journal, checkpoint_index),
            )
            partners = tuple(v for v in self._voters if v != self.config.self_address)
            if self.config.self_address not in self._voters:
                logger.warning("this controller (%s) is not a voter of %s: it was removed",
                               self.config.self_address, self._voters)  # fmt: skip
            self._syncobj = _MetadataSyncObj(
                self, self._syncobj_conf(journal_path), journal, partners
            )
        except BaseException:
            journal.close()  # e.g. the port is taken (BindError): release our files
            raise

    def _choose_checkpoint(
        self, journal: RaftJournal
    ) -> tuple[str, RaftCheckpoint, bytes, ReplicatedStateMachine] | None:
        """The newest checkpoint that validates and, if newer ones did not, that the journal
        covers: its (prev, last) entries are in it, and it reaches every skipped file's index.
        Then the state is rebuilt without losing a committed record; otherwise refuse."""
        files = self._checkpoint_files
        corrupt: list[str] = []
        skipped: list[tuple[int, str]] = []  # (named index, why)
        for named_index, path, found in files.read_all():
            if isinstance(found, RaftCheckpoint):
                try:
                    state_machine = self._restore_state_machine(found)
                except CorruptCheckpointFileError as e:
                    found = e
            if isinstance(found, CorruptCheckpointFileError):
                logger.critical("skipping damaged checkpoint %s: %s", path, found)
                corrupt.append(path)
                skipped.append((named_index, f"{path}: {found}"))
                continue
            if skipped:
                gap = self._journal_gap(journal, found, max(i for i, _ in skipped))
                if gap:
                    logger.critical("cannot fall back to checkpoint %s: %s", path, gap)
                    skipped.append((named_index, f"{path}: {gap}"))
                    continue
                logger.critical(
                    "falling back to checkpoint %s (offset %d) and replaying the journal after it",
                    path,
                    found.last_index,
                )
            for bad in corrupt:
                files.quarantine(bad)
            files.prune(protect=found.last_index)
            with open(path, "rb") as f:
                data = f.read()
            return path, found, data, state_machine
        first = journal[0] if len(journal) else None
        if skipped:
            # The journal alone rebuilds everything only if it was never cut (starts at 1).
            gap = "the journal was cut after a checkpoint"
            if first is not None and first[1] == 1:
                gap = self._journal_gap(journal, None, max(i for i, _ in skipped))
            if gap:
                raise CorruptCheckpointFileError(
                    "no usable checkpoint and "
                    + gap
                    + ": "
                    + "; ".join(why for _, why in skipped)
                    + ". Wipe this controller's metadata directory to have the leader send a"
                    " snapshot (only while a majority of controllers is intact)."
                )
            logger.critical("no usable checkpoint: replaying the whole journal from offset 0")
            for bad in corrupt:
                files.quarantine(bad)
        elif first is not None and first[1] > 1:
            raise CorruptCheckpointFileError(
                f"the journal starts at index {first[1]} but no checkpoint file is left"
            )
        return None

    @staticmethod
    def _journal_gap(journal: RaftJournal, checkpoint: RaftCheckpoint | None, upto: int) -> str:
        """Why `checkpoint` (None: the empty state) plus the journal would miss records."""
        if checkpoint is not None:
            for entry in (checkpoint.prev_entry, checkpoint.last_entry):
                if journal.entry(entry[1]) != entry:
                    return f"the journal does not hold its entry {entry[1]}"
        last_index = journal[-1][1] if len(journal) else 0
        if last_index < upto:
            return f"the journal ends at {last_index}, before the skipped checkpoint {upto}"
        return ""

    def _syncobj_conf(self, journal_path: str) -> SyncObjConf:
        c = self.config
        _, _, checkpoint_path = self._paths()
        return SyncObjConf(
            autoTick=False,  # our thread, started after construction (no init race)
            password=c.password,
            bindAddress=c.self_address,  # never 0.0.0.0
            journalFile=journal_path,
            fullDumpFile=checkpoint_path,
            serializer=self._serialize_checkpoint,
            deserializer=self._deserialize_checkpoint,
            appendEntriesUseBatch=False,  # send at once: ~ms commits instead of ~100 ms
            # pysyncobj sends an entry at least this long in pieces, and 0.3.17 marks the last
            # piece by the entry's length, not by its pickled length (protocol 2 inflates
            # bytes >= 0x80 to two), so a follower tried to unpickle an unfinished entry on
            # every extra "finish" piece: a "raft tick failed" traceback and a pure-Python
            # retry each time (a 3,000-partition CreateTopics: two per follower). A batch's
            # command is itself pickled that way (at most twice the batch): above that,
            # nothing propose() lets through is sent in pieces.
            appendEntriesBatchSizeBytes=4 * c.max_batch_bytes,
            appendEntriesPeriod=c.append_entries_period_ms / 1000,
            raftMinTimeout=c.election_timeout_min_ms / 1000,
            raftMaxTimeout=c.election_timeout_max_ms / 1000,
            leaderFallbackTimeout=c.leader_fallback_timeout_ms / 1000,
            connectionTimeout=c.connection_timeout_ms / 1000,
            connectionRetryTime=c.connection_retry_ms / 1000,
            commandsWaitLeader=False,  # fail fast (MISSING_LEADER) instead of queueing forever
            commandsQueueSize=c.max_in_flight_proposals,
            logCompactionMinEntries=c.checkpoint_interval_records,
            logCompactionMinTime=c.checkpoint_interval_ms / 1000,
            bindRetryTime=0.05,
            maxBindRetries=40,  # ~2 s for a port still held by a dying predecessor
            onStateChanged=self._on_state_changed,
            dynamicMembershipChange=True,  # one voter added or removed at a time
        )

    def _tick_loop(self) -> None:
        syncobj = self._syncobj
        assert syncobj is not None
        period_s = self.config.tick_period_ms / 1000
        wake_read_fd, self._wake_write_fd = os.pipe()
        os.set_blocking(wake_read_fd, False)
        os.set_blocking(self._wake_write_fd, False)
        syncobj._poller.subscribe(wake_read_fd, self._drain_wake_pipe, POLL_EVENT_TYPE.READ)
        syncobj.addOnTickCallback(self._before_poll)
        # A tick loop that stops for longer than the shortest election timeout sends no
        # heartbeats (a leader) or answers none (a follower) meanwhile: say so, it is the
        # first suspect when leadership moves with no fault (a starved or paused process, a
        # slow fsync, a long stop of the interpreter); a follower defers its election. Timed
        # from one tick's start to the next's, so a stop anywhere between them counts (one in
        # the first flush_held below, timed from the top of the loop, was noticed a tick late:
        # after the election it should have deferred).
        stall_ms = self.config.election_timeout_min_ms + self.config.tick_period_ms
        last_tick_s = time.monotonic()
        try:
            while not self._stopping and self._fatal_error is None:
                try:
                    # pysyncobj checks a follower's election timeout at the start of a tick and
                    # reads its sockets at the end: after a stop between two ticks (a journal
                    # fsync in flush_held, on a loaded disk; a starved process) it would start an
                    # election with the leader's heartbeats waiting unread. Read them first, and
                    # again after sending the replies that read made (their fsync may stall
                    # too), so nothing that can block lies between the last read and the check;
                    # what the second read appends is acknowledged at the end of the tick.
                    syncobj._poller.poll(0)
                    syncobj._quorum_transport.flush_held()  # replies made during that poll
                    syncobj._poller.poll(0)
                    now_s = time.monotonic()
                    if (now_s - last_tick_s) * 1000 > stall_ms:
                        self._on_stall(syncobj, (now_s - last_tick_s) * 1000)
                    last_tick_s = now_s
                    syncobj._quorum_transport.keep_alive(now_s)
                    syncobj.doTick(self._poll_timeout_s(syncobj, period_s))
                    syncobj._quorum_transport.flush_held()  # replies made during the poll
                except KafkaStorageError as e:
                    # The journal or the Raft state file could not be written (ENOSPC, EIO,
                    # read-only): a controller that cannot persist must not go on voting or
                    # leading while every proposal times out. Stop; the node exits.
                    self._fail(e)
                except Exception:  # pysyncobj's own loop does the same: log and go on
                    logger.exception("raft tick failed")
                    time.sleep(period_s)
        finally:
            try:
                syncobj.destroy()  # autoTick=False: closes sockets and the journal, here
            except Exception as e:  # noqa: BLE001 - stopping anyway (a full disk, say)
                logger.error("raft node: closing its files failed: %s", e)
            write_fd, self._wake_write_fd = self._wake_write_fd, -1
            os.close(write_fd)
            os.close(wake_read_fd)
            self._notify_trio()

    def _poll_timeout_s(self, syncobj: _MetadataSyncObj, longest_s: float) -> float:
        # Until the next heartbeat or election deadline. One that is due now happens in this
        # tick, and the next is a heartbeat period away at the soonest.
        due_s = syncobj.seconds_until_due()
        if due_s <= 0:
            due_s = self.config.append_entries_period_ms / 1000
        return min(due_s, longest_s)

    def _on_stall(self, syncobj: _MetadataSyncObj, stalled_ms: float) -> None:
        if syncobj._isLeader():
            effect = (
                f"followers elect another leader after "
                f"{self.config.election_timeout_min_ms} ms without heartbeats"
            )
        else:
            effect = "its election waits one more election timeout for the leader"
            syncobj.defer_election()
        logger.info("raft tick loop stalled node=%s for %d ms (%s)",
                    self.config.self_address, stalled_ms, effect)  # fmt: skip

    def _before_poll(self) -> None:
        # Runs at the end of each tick, just before the poll. A one-node quorum commits its own
        # appends on the next tick and no peer's ack wakes the poller for it: do not sleep.
        syncobj = self._syncobj
        assert syncobj is not None  # polls run only while the node is open
        syncobj._quorum_transport.flush_held()
        # pysyncobj's hasQuorum iterates sets this thread mutates: publish it from here.
        self._has_quorum = syncobj.hasQuorum
        partners = syncobj.otherNodes
        voters = tuple(sorted([self.config.self_address, *(str(n.id) for n in partners)]))
        if voters != self._voters:
            self._voters = voters
            self._notify_trio()
        journal = syncobj._quorum_journal
        if not partners and journal[-1][1] > syncobj.raftCommitIndex:
            self._wake_tick_thread()

    def _wake_tick_thread(self) -> None:
        try:
            os.write(self._wake_write_fd, b"w")
        except (BlockingIOError, OSError):
            pass  # already awake (pipe full) or shutting down

    def _drain_wake_pipe(self, fd: int, event_type: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass

    # -- tick thread: apply, checkpoints, leadership ----------------------------------------

    def _apply_committed(self, offset: int, batch: object) -> tuple[int, object]:
        assert self._syncobj is not None
        if self._fatal_error is not None:
            # A refused checkpoint left the state machine unusable: applying onto it would
            # diverge. Raising wedges pysyncobj on this entry, which is what we want while the
            # tick loop shuts the node down.
            raise RaftFatalError(f"not applying offset {offset}: {self._fatal_error}")
        self._syncobj._quorum_journal.sync()  # never acknowledge what is not durable here
        try:
            if not isinstance(batch, bytes) or not batch or batch[0] != BATCH_FORMAT_VERSION:
                raise ValueError(f"unknown batch envelope: {type(batch).__name__} "
                                 f"{repr(batch)[:20]}")  # fmt: skip
            payload = batch[1:]
            result = self._state_machine.apply(offset, payload)
        except Exception as e:
            # The state machine answers every batch it refuses with a result; raising means
            # it could not apply a committed entry at all. Going on would leave this node's
            # state silently different from the others': stop instead (Kafka's fatal fault).
            failure = ApplyFailure(offset, f"{type(e).__name__}: {e}")
            self.apply_failures.append(failure)
            fatal = RaftFatalError(f"applying the committed entry at offset {offset} failed: "
                                   f"{failure.error}")  # fmt: skip
            self._fail(fatal)
            raise fatal from e
        with self._tail_lock:
            self._committed_offset = offset
            self._tail.append((offset, payload))
            while len(self._tail) > self.config.tail_max_batches:
                self._tail_base_offset = self._tail.popleft()[0]
        self.applied_count += 1
        self._notify_trio()
        return offset, result

    def _serialize_checkpoint(self, tmp_path: str, data: tuple[Any, Any, Any]) -> None:
        last_entry, prev_entry, cluster = data
        state = self._state_machine.to_checkpoint()
        assert self._syncobj is not None
        # `cluster` is the set as of the journal's END: undo the changes appended past the
        # checkpoint's index (a new leader may still roll them back).
        voters = voters_before(
            (str(node.id) for node in cluster),
            _membership_after(self._syncobj._quorum_journal, last_entry[1]),
        )
        checkpoint = RaftCheckpoint(
            last_index=last_entry[1],
            last_term=last_entry[2],
            prev_index=prev_entry[1],
            prev_term=prev_entry[2],
            last_command=bytes(last_entry[0]),
            prev_command=bytes(prev_entry[0]),
            state=state,
            voters=voters,
        )
        if os.path.lexists(tmp_path):
            os.unlink(tmp_path)  # never truncate through a leftover link to a numbered file
        write_and_fsync(tmp_path, encode_checkpoint(checkpoint))  # pysyncobj renames it next
        # The same inode becomes the numbered file (durably), and the oldest beyond
        # checkpoints_kept goes; the journal drops entries only at deleteEntriesTo, next tick.
        self._checkpoint_files.publish(checkpoint.last_index, tmp_path)
        offset = _state_offset(self._state_machine, checkpoint.last_index)
        with self._tail_lock:
            self._checkpoint = (offset, state)
            while self._tail and self._tail[0][0] <= offset:
                self._tail.popleft()
            self._tail_base_offset = max(self._tail_base_offset, offset)

    def _deserialize_checkpoint(self, path: str) -> tuple[Any, Any, Any]:
        """Start-up, or a snapshot installed from the leader: replace the state machine."""
        try:
            with open(path, "rb") as f:
                data = f.read()
            self._make_checkpoint_durable()
            checkpoint = decode_checkpoint(data)
            voters = self._voters  # computed in _build from this checkpoint and the journal
            if self._preloaded is not None and self._preloaded[0] == data:
                state_machine = self._preloaded[1]  # validated and restored in _build already
            else:
                if checkpoint.voters is not None:
                    voters = checkpoint.voters  # the journal is cleared: the set restarts here
                # A snapshot installed from the leader: pysyncobj clears the journal next, so
                # it becomes the one checkpoint this node can rebuild from.
                state_machine = self._restore_state_machine(checkpoint)
                self._checkpoint_files.publish(checkpoint.last_index, path)
                self._checkpoint_files.remove_all_but(checkpoint.last_index)
            self._preloaded = None
        except BaseException as e:
            # pysyncobj would log this and carry on with an empty state: stop the node instead.
            self._fatal_error = e
            logger.critical("refusing checkpoint %s: %s", path, e)
            raise
        self._state_machine = state_machine
        offset = _state_offset(state_machine, checkpoint.last_index)
        with self._tail_lock:
            self._committed_offset = offset
            self._tail.clear()
            self._tail_base_offset = offset
            self._checkpoint = (offset, checkpoint.state)
        self._voters = tuple(sorted(voters))
        self._notify_trio()
        # pysyncobj replaces its voter set with this one (without our own node).
        return checkpoint.last_entry, checkpoint.prev_entry, {TCPNode(v) for v in voters}

    def _last_applied_index(self) -> int:
        return 0 if self._syncobj is None else self._syncobj.raftLastApplied

    def _restore_state_machine(self, checkpoint: RaftCheckpoint) -> ReplicatedStateMachine:
        try:
            state_machine = self._factory.from_checkpoint(checkpoint.state)
        except Exception as e:
            raise CorruptCheckpointFileError(f"state machine rejected the checkpoint: {e}") from e
        if state_machine.last_applied_offset > checkpoint.last_index:
            raise CorruptCheckpointFileError(
                f"state at offset {state_machine.last_applied_offset} is past the checkpoint's "
                f"Raft index {checkpoint.last_index}"
            )
        return state_machine

    def _make_checkpoint_durable(self) -> None:
        _, _, checkpoint_path = self._paths()
        if os.path.exists(checkpoint_path):
            fsync_file(checkpoint_path)
        fsync_directory(self.config.metadata_dir)

    def _on_state_changed(self, old_state: int, new_state: int) -> None:
        syncobj = self._syncobj
        term = syncobj.raftCurrentTerm if syncobj is not None else 0
        was_leader, is_leader = old_state == _STATE_LEADER, new_state == _STATE_LEADER
        if was_leader != is_leader and self._on_leadership_change is not None:
            self._run_in_trio(self._on_leadership_change, is_leader, term)
        self._notify_trio()

    # -- crossing into trio ------------------------------------------------------------------

    def _run_in_trio(self, fn: Callable[..., object], *args: object) -> None:
        token = self._trio_token
        if token is None:
            return
        try:
            token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            pass

    def _fail(self, error: BaseException) -> None:
        """Any thread: this Raft node cannot go on; the tick loop ends, waiters are woken."""
        if self._fatal_error is None:
            self._fatal_error = error
            logger.critical("raft node stops: %s", error)
        self._notify_trio()

    def _notify_trio(self) -> None:
        if not self._wakeup_pending:
            self._wakeup_pending = True
            self._run_in_trio(self._wake_waiters)

    def _wake_waiters(self) -> None:  # trio thread
        self._wakeup_pending = False
        event, self._advanced = self._advanced, trio.Event()
        event.set()
        if self._fatal_error is not None:
            for done in self._proposals:  # their entries will never be applied here
                done.set()

    async def wait_failed(self) -> BaseException:
        """Return once this node cannot go on (a committed entry it could not apply, a journal
        it could not write); the caller stops the process."""
        while self._fatal_error is None:
            await self._advanced.wait()
        return self._fatal_error

    # -- public API (trio thread) ------------------------------------------------------------

    @property
    def state_machine(self) -> ReplicatedStateMachine:
        """The live state machine. It is mutated in the tick thread: read it only through
        values it publishes atomically (e.g. an immutable image swapped per apply)."""
        return self._state_machine

    @property
    def is_leader(self) -> bool:
        return self._syncobj is not None and self._syncobj._isLeader()

    @property
    def leader_id(self) -> str | None:
        """The last known leader's address (may be stale during an election)."""
        leader = self._syncobj._getLeader() if self._syncobj is not None else None
        return None if leader is None else str(leader.id)

    @property
    def raft_term(self) -> int:
        return 0 if self._syncobj is None else self._syncobj.raftCurrentTerm

    @property
    def committed_offset(self) -> int:
        """The metadata offset of the last batch applied here (0 before any)."""
        return self._committed_offset

    @property
    def has_quorum(self) -> bool:
        """Whether this node reached a majority of controllers at its last tick."""
        return self._has_quorum

    def status(self) -> dict[str, object]:
        """pysyncobj's status dict (term, commit index, log length, ...) for metrics/tools.
        Best effort: it is read while the tick thread may be changing it."""
        for _ in range(3):
            try:
                return {} if self._syncobj is None else dict(self._syncobj.getStatus())
            except RuntimeError:  # "changed size during iteration"
                continue
        return {}

    @property
    def voters(self) -> tuple[str, ...]:
        """The voter set this node holds now (Raft addresses, sorted; its own included, unless
        it was removed). On the leader it includes a change appended but not yet committed."""
        return self._voters

    async def change_voters(self, kind: str, address: str) -> None:
        """Leader only: add (ADD) or remove (REMOVE) one voter; returns once the change is
        committed, i.e. the new voter set holds a majority. Raises VoterChangeRefusedError,
        NotControllerError or CommitOutcomeUnknownError. Put `trio.fail_after` around it."""
        self._check_running()
        syncobj = self._syncobj
        assert syncobj is not None and kind in (ADD, REMOVE)
        if not syncobj._isLeader():
            raise NotControllerError(f"not the leader; leader is {self.leader_id}")
        if kind == REMOVE and address == self.config.self_address:
            raise VoterChangeRefusedError("the leader cannot remove itself; ask another voter")
        while True:
            fail_reason = await self._propose_voter_change(syncobj, kind, address)
            if fail_reason != FAIL_REASON.REQUEST_DENIED or (address in self._voters) == (
                kind == ADD
            ):
                break
            # Denied though the voters do not say so yet: the leader's first entry of its term
            # or an earlier change is not committed yet (pysyncobj refuses a change until
            # both are). Nothing was appended; ask again once that commits, while leader.
            await trio.sleep(VOTER_CHANGE_RETRY_S)
            if not syncobj._isLeader():
                raise NotControllerError(f"not the leader; leader is {self.leader_id}")
        if fail_reason == FAIL_REASON.SUCCESS:
            return
        if fail_reason == FAIL_REASON.REQUEST_DENIED:
            raise VoterChangeRefusedError(
                f"{kind} {address} refused: the voters {self._voters} already say so"
            )
        if fail_reason in (FAIL_REASON.LEADER_CHANGED, FAIL_REASON.UNKNOWN_OUTCOME):
            raise CommitOutcomeUnknownError(f"voter change: pysyncobj fail reason {fail_reason}")
        raise NotControllerError(f"voter change not committed (pysyncobj fail reason "
                                 f"{fail_reason})")  # fmt: skip

    async def _propose_voter_change(self, syncobj: SyncObj, kind: str, address: str) -> int:
        """One voter-change proposal to pysyncobj; its fail reason once decided."""
        done = trio.Event()
        outcome: list[int] = []

        def on_done(_result: object, fail_reason: int) -> None:
            outcome.append(fail_reason)
            self._run_in_trio(done.set)

        self._proposals.add(done)
        try:
            if kind == ADD:
                syncobj.addNodeToCluster(address, callback=on_done)
            else:
                syncobj.removeNodeFromCluster(address, callback=on_done)
            self._wake_tick_thread()
            await done.wait()
        finally:
            self._proposals.discard(done)
        if not outcome:
            raise RaftFatalError(f"raft node stopped: {self._fatal_error}")
        return outcome[0]

    def partner_connected(self, address: str) -> bool:
        """Whether pysyncobj holds a connection to the voter at `host:port` now (a process
        that died has its sockets closed by the kernel; a paused one keeps them)."""
        return self.status().get(f"partner_node_status_server_{address}") == 2

    def partner_disconnected_since(self, address: str) -> float | None:
        """Since when (time.monotonic()) this node has had no connection to the voter at
        `host:port` (lost, or never made: the first failed attempt); None while connected."""
        syncobj = self._syncobj
        transport = getattr(syncobj, "_quorum_transport", None) if syncobj else None
        return None if transport is None else transport.disconnected_since_s.get(address)

    def _check_running(self) -> None:
        if self._fatal_error is not None:
            raise RaftFatalError(f"raft node stopped: {self._fatal_error}")
        if self._syncobj is None or self._stopping:
            raise NotControllerError("raft node is not running")

    async def propose(self, payload: bytes) -> ProposeResult:
        """Replicate one batch; returns once it is committed (durable on a majority) and
        applied here. Raises NotControllerError (not leader, no quorum, not committed: retry
        elsewhere) or CommitOutcomeUnknownError. Put `trio.fail_after` around it."""
        self._check_running()
        if len(payload) + 1 > self.config.max_batch_bytes:
            raise RecordListTooLargeError(f"batch of {len(payload)} bytes")
        async with self._in_flight:
            syncobj = self._syncobj
            assert syncobj is not None
            if not syncobj._isLeader():
                raise NotControllerError(f"not the leader; leader is {self.leader_id}")
            if not self._has_quorum:
                raise QuorumUnavailableError("leader cannot reach a majority of controllers")
            done = trio.Event()
            # pysyncobj calls back (from the tick thread, or this one) with _apply_committed's
            # (offset, applied) on success
            outcome: list[tuple[tuple[int, object] | None, int]] = []

            def on_done(result: tuple[int, object] | None, fail_reason: int) -> None:
                outcome.append((result, fail_reason))
                self._run_in_trio(done.set)

            self._proposals.add(done)
            try:
                syncobj._append_batch(bytes([BATCH_FORMAT_VERSION]) + payload, callback=on_done)
                await done.wait()
            finally:
                self._proposals.discard(done)
        if not outcome:
            raise RaftFatalError(f"raft node stopped: {self._fatal_error}")
        result, fail_reason = outcome[0]
        if fail_reason == FAIL_REASON.SUCCESS:
            assert result is not None
            offset, applied = result
            return ProposeResult(offset=offset, result=applied)
        if fail_reason in (FAIL_REASON.LEADER_CHANGED, FAIL_REASON.UNKNOWN_OUTCOME):
            raise CommitOutcomeUnknownError(f"pysyncobj fail reason {fail_reason}")
        raise NotControllerError(f"batch not committed (pysyncobj fail reason {fail_reason})")

    async def wait_for_offset(self, offset: int) -> int:
        """Long-poll: wait until `committed_offset > offset`; returns the committed offset."""
        while self._committed_offset <= offset:
            self._check_running()
            await self._advanced.wait()
        return self._committed_offset

    def read_committed(self, after_offset: int, max_batches: int) -> list[tuple[int, bytes]]:
        """Committed `(offset, payload)` batches with offset > after_offset, oldest first.
        Raises OffsetOutOfRangeError when they are older than the in-memory tail: the reader
        then starts from `latest_checkpoint()`. A failed apply has an empty payload."""
        assert max_batches > 0
        with self._tail_lock:
            if after_offset < self._tail_base_offset:
                raise OffsetOutOfRangeError(
                    f"offset {after_offset} is before the tail (starts after "
                    f"{self._tail_base_offset}); load the checkpoint"
                )
            out = []
            for offset, payload in reversed(self._tail):
                if offset <= after_offset:
                    break
                out.append((offset, payload))
        out.reverse()
        return out[:max_batches]

    def latest_checkpoint(self) -> tuple[int, bytes] | None:
        """`(offset, state machine checkpoint bytes)` of the newest checkpoint, if any; `offset`
        is the state's own last applied offset, where `read_committed` continues."""
        with self._tail_lock:
            return self._checkpoint

    def force_checkpoint(self) -> None:
        """Ask for a checkpoint on the next tick (ops tool, tests)."""
        if self._syncobj is not None:
            self._syncobj.forceLogCompaction()
