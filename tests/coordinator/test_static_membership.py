"""Static membership (group.instance.id, KIP-345) in the state machine, explicit now_ms."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.coordinator.group_coordinator import GroupCoordinator
from log.coordinator.group_state import GroupConfig, GroupMetadata, GroupState

SESSION_MS = 10_000


def new_group() -> GroupMetadata:
    ids = iter(range(1, 1000))
    config = GroupConfig(group_initial_rebalance_delay_ms=0)
    return GroupMetadata("g", config, lambda c: f"{c}-{next(ids)}", 0)


def join(group, token, member_id="", instance=None, now_ms=0, protocols=(("range", b"r"),),
         known=False):  # fmt: skip
    return group.join(
        token, member_id=member_id, group_instance_id=instance, client_id="c", client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
        protocols=tuple(protocols), require_known_member_id=known, now_ms=now_ms,
    )  # fmt: skip


def stable_static_pair(group) -> tuple[str, str]:
    """Static members a ("ia", the leader) and b ("ib"), Stable in generation 2."""
    [ra] = join(group, "a", instance="ia", known=True)  # static: no MEMBER_ID_REQUIRED
    a = ra.result.member_id
    assert ra.result.error_code == 0
    join(group, "b", instance="ib")
    replies = {r.token: r.result for r in join(group, "a2", a, "ia")}
    b = replies["b"].member_id
    group.sync("sb", member_id=b, generation_id=2, assignments={}, now_ms=0)
    group.sync("sa", member_id=a, generation_id=2, assignments={a: b"A", b: b"B"}, now_ms=0)
    assert group.state is GroupState.STABLE and group.static_members == {"ia": a, "ib": b}
    return a, b


def test_restarted_static_member_replaces_itself_without_rebalance():
    group = new_group()
    a, b = stable_static_pair(group)
    group.metadata_changed = False
    [r] = join(group, "b-again", instance="ib", now_ms=5)  # b restarted: no member id
    new_b = r.result.member_id
    assert r.result.error_code == 0 and new_b != b
    assert (r.result.generation_id, r.result.leader, r.result.members) == (2, a, ())
    assert group.state is GroupState.STABLE and group.generation_id == 2
    assert group.static_members["ib"] == new_b and b not in group.members
    assert group.metadata_changed  # the stored record must name the new member id
    [s] = group.sync("s", member_id=new_b, generation_id=2, assignments={}, now_ms=6)
    assert (s.result.error_code, s.result.assignment) == (0, b"B")  # b's old assignment
    # the replaced process is fenced everywhere
    assert group.heartbeat(member_id=b, generation_id=2, now_ms=7, group_instance_id="ib") == (
        ErrorCode.FENCED_INSTANCE_ID
    )
    [s] = group.sync("s2", member_id=b, generation_id=2, assignments={}, now_ms=7,
                     group_instance_id="ib")  # fmt: skip
    assert s.result.error_code == ErrorCode.FENCED_INSTANCE_ID
    assert group.check_commit(member_id=b, generation_id=2, group_instance_id="ib") == (
        ErrorCode.FENCED_INSTANCE_ID
    )
    [j] = join(group, "old", b, "ib")
    assert j.result.error_code == ErrorCode.FENCED_INSTANCE_ID
    assert group.heartbeat(member_id=a, generation_id=2, now_ms=8, group_instance_id="ia") == 0


def test_restarted_static_leader_keeps_the_old_leader_id_in_its_answer():
    group = new_group()
    a, b = stable_static_pair(group)
    [r] = join(group, "a-again", instance="ia")
    assert r.result.leader == a != r.result.member_id  # so it does not reassign
    assert group.leader_id == r.result.member_id and group.state is GroupState.STABLE


def test_static_member_changing_the_chosen_protocol_rebalances():
    group = new_group()
    both = (("range", b""), ("roundrobin", b""))
    [r] = join(group, "a", instance="ia", protocols=both)
    a = r.result.member_id
    group.sync("s", member_id=a, generation_id=1, assignments={a: b"A"}, now_ms=0)
    [r] = join(group, "a-again", instance="ia", protocols=both)  # same vote: no rebalance
    assert r.result.generation_id == 1 and group.state is GroupState.STABLE
    [r] = join(group, "a-3", instance="ia", protocols=both[::-1])  # votes roundrobin now
    assert (r.result.generation_id, r.result.protocol_name) == (2, "roundrobin")
    assert group.state is GroupState.COMPLETING_REBALANCE


def test_static_member_rejoining_during_a_rebalance_joins_it():
    group = new_group()
    a, b = stable_static_pair(group)
    join(group, "c", instance="ic")  # a third member: PreparingRebalance
    assert group.state is GroupState.PREPARING_REBALANCE
    assert join(group, "b-again", instance="ib") == []  # waits for the join like any member
    replies = {r.token: r.result for r in join(group, "a3", a, "ia")}
    assert set(replies) == {"c", "b-again", "a3"} and group.generation_id == 3
    # CompletingRebalance: the leader may already be assigning to the old id: rebalance again
    new_b = replies["b-again"].member_id
    assert join(group, "b-3", instance="ib") == []  # joins the new rebalance
    assert group.state is GroupState.PREPARING_REBALANCE and new_b not in group.members


def test_static_leave_by_instance_id_and_session_expiry_forget_the_instance():
    group = new_group()
    a, b = stable_static_pair(group)
    assert group.leave(member_id="", now_ms=1, group_instance_id="nope")[0] == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert group.leave(member_id=a, now_ms=1, group_instance_id="ib")[0] == (
        ErrorCode.FENCED_INSTANCE_ID
    )
    code, _ = group.leave(member_id="", now_ms=1, group_instance_id="ib")
    assert code == 0 and "ib" not in group.static_members and b not in group.members
    _, expired = group.poll(1 + SESSION_MS)  # a never rejoins the rebalance
    group.poll(1 + 2 * SESSION_MS)
    assert group.state is GroupState.EMPTY and group.static_members == {}


def test_static_members_are_restored_from_the_group_record():
    coordinator = GroupCoordinator(GroupConfig(group_initial_rebalance_delay_ms=0), 50)
    group = coordinator.group("g", 0, create=True)
    a, b = stable_static_pair(group)
    [(_, value)] = coordinator.take_changed_groups()
    ids = iter(range(1, 1000))
    fresh = GroupCoordinator(
        GroupConfig(group_initial_rebalance_delay_ms=0), 50, lambda c: f"{c}-new-{next(ids)}"
    )
    fresh.load_group("g", value, 100)
    restored = fresh.groups["g"]
    assert restored.static_members == {"ia": a, "ib": b}
    [r] = join(restored, "b-again", instance="ib", now_ms=101)
    assert r.result.generation_id == 2 and restored.state is GroupState.STABLE
