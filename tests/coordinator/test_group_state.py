"""The classic group protocol state machine, driven directly with injected now_ms."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.coordinator.group_coordinator import (
    GroupCoordinator,
    OffsetAndMetadata,
    java_string_hash_code,
    partition_for,
)
from log.coordinator.group_state import (
    GroupConfig,
    GroupMetadata,
    GroupState,
    JoinResult,
    SyncResult,
)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def new_group(**config) -> GroupMetadata:
    config.setdefault("group_initial_rebalance_delay_ms", 0)
    ids = iter(range(1, 1000))
    return GroupMetadata("g", GroupConfig(**config), lambda c: f"{c}-{next(ids)}", 0)


def join(group, token, member_id="", now_ms=0, protocols=(("range", b"r"),), known=False):
    return group.join(
        token, member_id=member_id, group_instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer", protocols=tuple(protocols), require_known_member_id=known,
        now_ms=now_ms,
    )  # fmt: skip


def by_token(replies):
    return {r.token: r.result for r in replies}


def stable_pair(group):
    """Two members a and b in a Stable generation; returns (a_id, b_id)."""
    [ra] = join(group, "a")
    a = ra.result.member_id
    assert ra.result.generation_id == 1 and ra.result.leader == a
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert join(group, "b") == []  # a must rejoin: b's join starts a rebalance
    assert group.state is GroupState.PREPARING_REBALANCE
    replies = by_token(join(group, "a2", a))
    b = replies["b"].member_id
    assert replies["a2"].generation_id == replies["b"].generation_id == 2
    assert [m.member_id for m in replies["a2"].members] == [a, b]  # the leader sees everyone
    assert replies["b"].members == ()
    assert group.sync("sb", member_id=b, generation_id=2, assignments={}, now_ms=0) == []
    replies = by_token(
        group.sync("sa", member_id=a, generation_id=2, assignments={a: b"A", b: b"B"}, now_ms=0)
    )
    assert replies == {  # SyncGroup v5+ answers the group's protocol type and name
        "sa": SyncResult(0, b"A", "consumer", "range"),
        "sb": SyncResult(0, b"B", "consumer", "range"),
    }
    assert group.state is GroupState.STABLE
    return a, b


def test_member_id_required_then_join():
    group = new_group()
    [reply] = join(group, "t1", known=True)
    assert reply.result.error_code == ErrorCode.MEMBER_ID_REQUIRED
    member_id = reply.result.member_id
    assert member_id and group.state is GroupState.EMPTY
    [reply] = join(group, "t2", member_id, known=True)
    assert reply.result == JoinResult(
        0, 1, "range", member_id, member_id, reply.result.members, protocol_type="consumer"
    )
    assert reply.result.members[0].metadata == b"r"


def test_rebalance_and_sync_distributes_leader_assignment():
    group = new_group()
    a, b = stable_pair(group)
    assert group.heartbeat(member_id=b, generation_id=2, now_ms=1) == 0
    # a stable follower rejoining with the same metadata just gets the current generation
    [reply] = join(group, "b2", b)
    assert reply.result.generation_id == 2 and group.state is GroupState.STABLE


def test_fencing_errors():
    group = new_group()
    a, b = stable_pair(group)
    assert group.heartbeat(member_id=a, generation_id=1, now_ms=1) == ErrorCode.ILLEGAL_GENERATION
    assert group.heartbeat(member_id="zz", generation_id=2, now_ms=1) == ErrorCode.UNKNOWN_MEMBER_ID
    [r] = group.sync("s", member_id=a, generation_id=1, assignments={}, now_ms=1)
    assert r.result.error_code == ErrorCode.ILLEGAL_GENERATION
    assert group.check_commit(member_id=a, generation_id=1) == ErrorCode.ILLEGAL_GENERATION
    assert group.check_commit(member_id="", generation_id=-1) == ErrorCode.UNKNOWN_MEMBER_ID
    # a third member joins: the others hear REBALANCE_IN_PROGRESS on heartbeat
    assert join(group, "c") == []
    assert (
        group.heartbeat(member_id=a, generation_id=2, now_ms=2) == ErrorCode.REBALANCE_IN_PROGRESS
    )
    [r] = group.sync("s", member_id=a, generation_id=2, assignments={}, now_ms=2)
    assert r.result.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert group.check_commit(member_id=a, generation_id=2) == 0  # commit-on-revoke allowed
    [r] = join(group, "x", "unknown-member")
    assert r.result.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_rebalances_the_rest():
    group = new_group()
    a, b = stable_pair(group)
    code, replies = group.leave(member_id=a, now_ms=5)
    assert code == 0 and replies == []
    assert group.state is GroupState.PREPARING_REBALANCE
    [r] = join(group, "b3", b, now_ms=6)
    assert (r.result.generation_id, r.result.leader) == (3, b)
    assert group.leave(member_id=a, now_ms=7) == (ErrorCode.UNKNOWN_MEMBER_ID, [])


def test_session_timeout_expires_member_and_rebalance_timeout_drops_laggard():
    group = new_group()
    a, b = stable_pair(group)
    assert group.next_deadline_ms() == SESSION_MS
    assert group.heartbeat(member_id=a, generation_id=2, now_ms=SESSION_MS - 1) == 0
    replies, expired = group.poll(SESSION_MS)
    assert expired == [b] and replies == []
    assert group.state is GroupState.PREPARING_REBALANCE
    # a never rejoins: after the rebalance timeout the group drops it and ends Empty
    replies, expired = group.poll(SESSION_MS + REBALANCE_MS)
    assert group.state is GroupState.EMPTY and group.generation_id == 3 and not group.members


def test_rebalance_timeout_completes_with_those_who_joined():
    group = new_group()
    a, b = stable_pair(group)
    join(group, "c", now_ms=100)  # new member: a and b must rejoin
    join(group, "a3", a, now_ms=200)
    replies, _ = group.poll(100 + REBALANCE_MS)
    results = by_token(replies)
    assert set(results) == {"c", "a3"} and b not in group.members
    assert results["a3"].generation_id == 3 and results["a3"].leader == a


def test_protocol_vote_and_inconsistent_protocol():
    group = new_group()
    [r] = join(group, "a", protocols=[("range", b""), ("roundrobin", b"")])
    a = r.result.member_id
    join(group, "b", protocols=[("roundrobin", b""), ("range", b"")])
    join(group, "c", protocols=[("roundrobin", b"")])
    replies = by_token(join(group, "a2", a, protocols=[("range", b""), ("roundrobin", b"")]))
    assert {r.protocol_name for r in replies.values()} == {"roundrobin"}
    [r] = join(group, "d", protocols=[("sticky", b"")])
    assert r.result.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout_and_max_size():
    group = new_group(group_max_size=1)
    [r] = group.join(
        "t", member_id="", group_instance_id=None, client_id="c", client_host="h",
        session_timeout_ms=10, rebalance_timeout_ms=10, protocol_type="consumer",
        protocols=(("range", b""),), require_known_member_id=False, now_ms=0,
    )  # fmt: skip
    assert r.result.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    join(group, "a")
    [r] = join(group, "b")
    assert r.result.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_coordinator_offsets_list_delete():
    coordinator = GroupCoordinator(GroupConfig(group_initial_rebalance_delay_ms=0), 50)
    group = coordinator.group("g", 0, create=True)
    a, b = stable_pair(group)
    assert coordinator.check_commit("g", a, 2, 0) == 0
    assert coordinator.check_commit("nope", "", -1, 0) == 0
    coordinator.store_offset("g", "t", 0, OffsetAndMetadata(42, -1, "m", 7))
    assert coordinator.fetch_offsets("g", [("t", 0), ("t", 1)]) == {
        ("t", 0): OffsetAndMetadata(42, -1, "m", 7),
        ("t", 1): None,
    }
    assert [o.state for o in coordinator.list_groups()] == ["Stable"]
    assert coordinator.delete_group("g")[0] == ErrorCode.NON_EMPTY_GROUP
    group.leave(member_id=a, now_ms=1)
    group.leave(member_id=b, now_ms=1)
    assert group.state is GroupState.EMPTY
    assert coordinator.delete_group("g")[0] == 0
    assert coordinator.delete_group("g")[0] == ErrorCode.GROUP_ID_NOT_FOUND
    assert coordinator.fetch_offsets("g", None) == {}


def test_coordinator_ownership():
    coordinator = GroupCoordinator(GroupConfig(group_initial_rebalance_delay_ms=0), 50)
    p = partition_for("g", 50)
    coordinator.begin_load(p)
    try:
        coordinator.check_group("g")
    except Exception as exc:
        assert exc.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    else:
        raise AssertionError("loading partition answered")
    coordinator.complete_load(p)
    coordinator.check_group("g")
    coordinator.group("g", 0, create=True)
    coordinator.unload(p)
    assert "g" not in coordinator.groups


def test_java_hash_code_matches_java():
    # values computed by java.lang.String.hashCode
    assert java_string_hash_code("") == 0
    assert java_string_hash_code("hello") == 99162322
    assert java_string_hash_code("polygenelubricants") == -2147483648
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash_code("consumer-group-1") == java_string_hash_code("consumer-group-1")
