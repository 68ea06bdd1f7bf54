"""KIP-848 consumer groups, sans-IO (log/coordinator/consumer_group_state.py through the
GroupCoordinator): epochs, reconciliation with revocation before reassignment, fencing,
timeouts, metadata changes, request checks, conflicts with classic groups, offset commit
checks, and the records replayed into a fresh coordinator (a fail-over)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from log.common.errors import ErrorCode
from log.coordinator import consumer_group_records as cgr
from log.coordinator.consumer_group_state import (
    ConsumerGroupConfig,
    ConsumerGroupState,
    HeartbeatRequest,
    MemberState,
)
from log.coordinator.group_coordinator import GroupCoordinator
from log.coordinator.group_state import GroupConfig

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
GROUP = "g"


class World:
    """A coordinator, the topics it sees, and every record it asked to append."""

    def __init__(self, partitions: int = 4, session_timeout_ms: int = 45_000) -> None:
        self.topics = {"t": (T, partitions)}
        self.core = GroupCoordinator(
            GroupConfig(),
            1,
            consumer_config=ConsumerGroupConfig(session_timeout_ms=session_timeout_ms),
        )
        self.records: list[tuple[bytes, bytes | None]] = []
        self.now = 1_000

    def hb(self, member_id: str, epoch: int, owned=None, topics=None, api_version: int = 1, **kw):
        if epoch == 0:
            topics = ["t"] if topics is None else topics
            kw.setdefault("rebalance_timeout_ms", 60_000)
            owned = [] if owned is None else owned
        request = HeartbeatRequest(member_id, epoch, subscribed_topic_names=topics, owned=owned,
                                   client_id="c", **kw)  # fmt: skip
        result, records = self.core.consumer_heartbeat(
            GROUP, request, self.now, self.topics.get, api_version
        )
        self.records += records
        return result

    def member(self, member_id: str):
        return self.core.consumer_groups[GROUP].members[member_id]

    def owned(self, member_id: str):
        m = self.member(member_id)
        both = {**m.assigned}
        for t, p in m.pending_revocation.items():
            both[t] = both.get(t, frozenset()) | p
        return [(t, sorted(p)) for t, p in both.items()]

    def replayed(self) -> GroupCoordinator:
        core = GroupCoordinator(GroupConfig(), 1)
        for key, value in self.records:
            k = cgr.decode_key(key)
            if k.version in cgr.KEY_VERSIONS:
                v = None if value is None else cgr.decode_value(k.version, value)
                core.load_consumer_group_record(k, v, self.now)
        return core


def _set(assignment) -> set:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def test_second_member_gets_partitions_only_after_the_first_revokes_them():
    w = World()
    r1 = w.hb("m1", 0)
    assert (
        r1.error_code == 0
        and r1.member_epoch == 1
        and _set(r1.assignment) == {(T, p) for p in range(4)}
    )
    r2 = w.hb("m2", 0)
    assert r2.member_epoch == 2 and r2.assignment == {}  # its partitions are still m1's
    assert w.member("m2").state is MemberState.UNRELEASED_PARTITIONS
    assert w.core.consumer_groups[GROUP].state is ConsumerGroupState.RECONCILING
    # m1 learns what to give up; it keeps its epoch until it has
    r1 = w.hb("m1", 1, owned=[(T, [0, 1, 2, 3])])
    assert r1.member_epoch == 1 and len(_set(r1.assignment)) == 2
    assert w.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    revoked = _set(w.member("m1").pending_revocation)
    assert w.hb("m2", 2, owned=[]).assignment is None  # nothing released yet
    # m1 still owns them: no progress
    assert w.hb("m1", 1, owned=[(T, [0, 1, 2, 3])]).member_epoch == 1
    kept = sorted(p for _, p in _set(w.member("m1").assigned))
    r1 = w.hb("m1", 1, owned=[(T, kept)])
    assert r1.member_epoch == 2 and w.member("m1").state is MemberState.STABLE
    r2 = w.hb("m2", 2, owned=[])
    assert _set(r2.assignment) == revoked and w.member("m2").state is MemberState.STABLE
    assert w.core.consumer_groups[GROUP].state is ConsumerGroupState.STABLE


def test_leave_gives_the_partitions_to_the_others():
    w = World()
    w.hb("m1", 0)
    w.hb("m2", 0)
    w.hb("m1", 1, owned=w.owned("m1"))
    w.hb("m1", 1, owned=[(t, sorted(p)) for t, p in w.member("m1").assigned.items()])
    w.hb("m2", 2, owned=[])
    left = w.hb("m2", -1)
    assert left.error_code == 0 and left.member_epoch == -1
    assert "m2" not in w.core.consumer_groups[GROUP].members
    r1 = w.hb("m1", 2, owned=w.owned("m1"))
    assert r1.member_epoch == 3 and _set(r1.assignment) == {(T, p) for p in range(4)}


def test_epochs_fence_zombies():
    w = World()
    w.hb("m1", 0)
    assert w.hb("m1", 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    w.hb("m2", 0)
    w.hb("m1", 1, owned=w.owned("m1"))
    w.hb("m1", 1, owned=[(t, sorted(p)) for t, p in w.member("m1").assigned.items()])
    assert w.member("m1").member_epoch == 2
    # its previous epoch with partitions within its assignment: a lost response, accepted
    assert w.hb("m1", 1, owned=w.owned("m1")).error_code == 0
    assert w.hb("m1", 0 + 1, owned=[(T, [0, 1, 2, 3])]).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert w.hb("nobody", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_the_member_and_bumps_the_epoch():
    w = World(session_timeout_ms=10_000)
    w.hb("m1", 0)
    w.hb("m2", 0)
    group = w.core.consumer_groups[GROUP]
    epoch = group.group_epoch
    w.now += 5_000
    w.hb("m1", 1, owned=w.owned("m1"))  # m1 heartbeats, m2 stays silent
    assert w.core.next_deadline_ms() == 1_000 + 10_000
    w.now = 11_000
    [(group_id, expired, records)] = w.core.poll_consumer_groups(w.now)
    w.records += records
    assert (group_id, expired) == (GROUP, ["m2"]) and group.group_epoch == epoch + 1
    kept = [(t, sorted(p)) for t, p in w.member("m1").assigned.items()]
    assert _set(w.hb("m1", 1, owned=kept).assignment) == {(T, p) for p in range(4)}


def test_partition_increase_bumps_the_group_epoch_and_assigns_the_new_partitions():
    w = World(partitions=2)
    w.hb("m1", 0)
    w.topics["t"] = (T, 5)
    r = w.hb("m1", 1, owned=w.owned("m1"))
    assert r.member_epoch == 2 and _set(r.assignment) == {(T, p) for p in range(5)}


def test_requests_kafka_refuses():
    w = World()
    assert (
        w.hb("m1", 0, topics=None, rebalance_timeout_ms=-1).error_code == ErrorCode.INVALID_REQUEST
    )
    req = HeartbeatRequest("m1", 0, rebalance_timeout_ms=1, subscribed_topic_names=None)
    assert w.core.consumer_heartbeat(GROUP, req, 0, w.topics.get, 1)[0].error_code == (
        ErrorCode.INVALID_REQUEST
    )
    assert w.hb("", 0).error_code == ErrorCode.INVALID_REQUEST  # v1: the client names itself
    assert w.hb("m1", 0, owned=[(T, [0])]).error_code == ErrorCode.INVALID_REQUEST
    assert w.hb("m1", -3).error_code == ErrorCode.INVALID_REQUEST
    assert w.hb("m1", 0, server_assignor="sticky").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert w.hb("m1", 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND  # no such group yet
    r = w.hb("", 0, api_version=0)  # v0: the coordinator names the member
    assert r.error_code == 0 and r.member_id


def test_server_assignor_range_is_used_when_asked():
    w = World(partitions=3)
    w.hb("a", 0, server_assignor="range")
    w.hb("b", 0, server_assignor="range")
    group = w.core.consumer_groups[GROUP]
    assert group.preferred_assignor() == "range"
    assert group.target == {"a": {T: frozenset({0, 1})}, "b": {T: frozenset({2})}}


def test_offset_commits_check_member_and_epoch():
    w = World()
    w.hb("m1", 0)
    check = w.core.check_commit
    assert check(GROUP, "m1", 1, 0, None, 9) == ErrorCode.NONE
    assert check(GROUP, "m1", 0, 0, None, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert check(GROUP, "m1", 1, 0, None, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert check(GROUP, "zz", 1, 0, None, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert check(GROUP, "", -1, 0, None, 9) == ErrorCode.UNKNOWN_MEMBER_ID  # not empty
    w.hb("m1", -1)
    assert check(GROUP, "", -1, 0, None, 7) == ErrorCode.NONE  # empty: admin commits


def test_classic_and_consumer_groups_of_one_id_conflict():
    w = World()
    classic = w.core.group(GROUP, 0, create=True)
    assert classic is not None
    classic.members["x"] = object()  # type: ignore[assignment]  # a member: not empty
    assert w.hb("m1", 0).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    classic.members.clear()
    assert w.hb("m1", 0).error_code == 0  # an empty classic group is replaced
    assert GROUP not in w.core.groups
    [overview] = w.core.list_groups()
    assert (overview.group_type, overview.protocol_type) == ("consumer", "consumer")


def test_records_replayed_into_a_new_coordinator_restore_the_group():
    w = World()
    w.hb("m1", 0)
    w.hb("m2", 0)
    w.hb("m1", 1, owned=w.owned("m1"))  # m1 now revoking
    w.hb("m3", 0, topics=["t", "u"])
    w.hb("m3", -1)
    restored = w.replayed().consumer_groups[GROUP]
    live = w.core.consumer_groups[GROUP]
    assert (restored.group_epoch, restored.assignment_epoch) == (
        live.group_epoch,
        live.assignment_epoch,
    )
    assert restored.target == live.target
    assert restored.subscription_metadata == live.subscription_metadata
    assert {m: x.current() for m, x in restored.members.items()} == {
        m: x.current() for m, x in live.members.items()
    }
    assert {m: x.metadata() for m, x in restored.members.items()} == {
        m: x.metadata() for m, x in live.members.items()
    }
    # deleting the group once empty leaves nothing after replay
    w.hb("m1", -1)
    w.hb("m2", -1)
    code, _ = w.core.delete_group(GROUP)
    assert code == 0
    w.records += live.remove_all_records()
    assert GROUP not in w.replayed().consumer_groups


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.sampled_from(["hb", "hb", "hb", "join", "leave", "grow"]),
        ),
        max_size=60,
    )
)
def test_no_partition_is_ever_owned_by_two_members(steps):
    """Members that do what they are told (own exactly what they were last given plus what
    they must still revoke) never share a partition, whatever the interleaving."""
    w = World(partitions=3)
    epochs: dict[str, int] = {}
    given_: dict[str, set] = {}
    for member_id, action in steps:
        if action == "grow":
            w.topics["t"] = (T, w.topics["t"][1] + 1)
            continue
        if action == "join" or member_id not in epochs:
            r = w.hb(member_id, 0)
        elif action == "leave":
            w.hb(member_id, -1)
            epochs.pop(member_id)
            given_.pop(member_id, None)
            continue
        else:
            owned = [(T, sorted(p for _, p in given_.get(member_id, set())))]
            r = w.hb(member_id, epochs[member_id], owned=owned)
        assert r.error_code == 0, r
        epochs[member_id] = r.member_epoch
        if r.assignment is not None:
            given_[member_id] = _set(r.assignment)
        owners: dict = {}
        for m in w.core.consumer_groups[GROUP].members.values():
            for tp in _set(m.assigned) | _set(m.pending_revocation):
                assert tp not in owners, (tp, owners.get(tp), m.member_id)
                owners[tp] = m.member_id
        for m, tps in given_.items():  # what the clients hold never overlaps either
            for n, other in given_.items():
                assert m == n or not tps & other


def test_offsets_expire_unless_subscribed_and_an_empty_group_goes_away():
    from log.coordinator.group_coordinator import OffsetAndMetadata

    w = World()
    w.hb("m1", 0)
    retention = w.core.config.offsets_retention_ms
    for topic in ("t", "old"):
        w.core.store_offset(GROUP, topic, 0, OffsetAndMetadata(5, -1, "", w.now))
    [cleanup] = w.core.expire_offsets(w.now + retention)
    assert (cleanup.expired, cleanup.group_removed) == ((("old", 0),), False)  # t: subscribed
    w.hb("m1", -1)
    [cleanup] = w.core.expire_offsets(w.now + retention)
    assert (cleanup.expired, cleanup.group_removed) == ((("t", 0),), True)
    assert GROUP not in w.core.consumer_groups
    w.records += cleanup.group_records
    assert GROUP not in w.replayed().consumer_groups


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced():
    w = World()
    w.hb("m1", 0, rebalance_timeout_ms=5_000)
    w.hb("m2", 0)
    w.hb("m1", 1, owned=[(T, [0, 1, 2, 3])])
    assert w.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    w.now += 4_000
    w.hb("m1", 1, owned=[(T, [0, 1, 2, 3])])  # heartbeats, but keeps the partitions
    assert w.core.poll_consumer_groups(w.now) == []
    w.now += 1_000
    [(_, expired, _)] = w.core.poll_consumer_groups(w.now)
    assert expired == ["m1"]
    assert _set(w.hb("m2", 2, owned=[]).assignment) == {(T, p) for p in range(4)}


def test_a_static_member_leaves_and_comes_back_without_a_rebalance():
    w = World(session_timeout_ms=10_000)
    w.hb("a1", 0, instance_id="i1")
    w.hb("b", 0)
    w.hb("a1", 1, owned=[(T, [0, 1, 2, 3])])
    w.hb("a1", 1, owned=[(t, sorted(p)) for t, p in w.member("a1").assigned.items()])
    w.hb("b", 2, owned=[])
    group = w.core.consumer_groups[GROUP]
    kept, epoch = dict(w.member("a1").assigned), group.group_epoch
    assert w.hb("a1", -2).member_epoch == -2  # leaves for a while: keeps its partitions
    assert w.member("a1").member_epoch == -2 and w.member("a1").assigned == kept
    assert w.hb("b", 2, owned=w.owned("b")).assignment is None  # b gets nothing more
    # the same instance again, a new member id: takes over, no new group epoch
    assert w.hb("other", 0, instance_id="i1").error_code == 0
    w.now += 1
    refused = w.hb("third", 0, instance_id="i1")
    assert refused.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert "a1" not in group.members and w.member("other").assigned == kept
    assert group.group_epoch == epoch
    restored = w.replayed().consumer_groups[GROUP]
    assert restored.members["other"].current() == w.member("other").current()
    # a static member that never comes back leaves when its session times out
    w.hb("other", w.member("other").member_epoch, owned=w.owned("other"))
    w.hb("other", -2)
    w.now += 5_000
    w.hb("b", w.member("b").member_epoch, owned=w.owned("b"))
    w.now += 5_000
    [(_, expired, _)] = w.core.poll_consumer_groups(w.now)
    assert expired == ["other"] and group.group_epoch == epoch + 1
