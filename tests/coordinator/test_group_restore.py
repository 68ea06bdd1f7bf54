"""Group records and replay: the GroupMetadataValue written at the end of a rebalance restores
the group (generation, protocol, leader, members and assignments) in a new coordinator; the
initial rebalance delay; everything with explicit now_ms."""

from __future__ import annotations

from log.common.errors import ErrorCode
from log.coordinator.group_coordinator import GroupCoordinator, group_metadata_value
from log.coordinator.group_state import GroupConfig, GroupMetadata, GroupState
from log.coordinator.records import (
    MemberMetadataValue,
    decode_group_value,
    encode_group_value,
)

SESSION_MS = 10_000
REBALANCE_MS = 30_000
NO_DELAY = GroupConfig(group_initial_rebalance_delay_ms=0)


def delayed_group(delay_ms: int) -> GroupMetadata:
    ids = iter(range(1, 1000))
    config = GroupConfig(group_initial_rebalance_delay_ms=delay_ms)
    return GroupMetadata("g", config, lambda c: f"{c}-{next(ids)}", 0)


def join(group, token, member_id="", now_ms=0, protocols=(("range", b"r"),), instance=None):
    return group.join(
        token, member_id=member_id, group_instance_id=instance, client_id="c",
        client_host="/10.0.0.1", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer", protocols=tuple(protocols), require_known_member_id=False,
        now_ms=now_ms,
    )  # fmt: skip


def stable_group(coordinator: GroupCoordinator, now_ms: int = 0) -> tuple[str, str]:
    """Members a (leader, instance id "i-a") and b, Stable in generation 2."""
    group = coordinator.group("g", now_ms, create=True)
    [ra] = join(group, "a", now_ms=now_ms, protocols=(("range", b"ra"),), instance="i-a")
    a = ra.result.member_id
    join(group, "b", now_ms=now_ms, protocols=(("range", b"rb"), ("roundrobin", b"x")))
    replies = {r.token: r.result for r in join(group, "a2", a, now_ms, (("range", b"ra"),))}
    b = replies["b"].member_id
    assert replies["a2"].generation_id == 2
    assert not group.metadata_changed, "CompletingRebalance is not written"
    group.sync("sb", member_id=b, generation_id=2, assignments={}, now_ms=now_ms)
    group.sync("sa", member_id=a, generation_id=2, assignments={a: b"A", b: b"B"}, now_ms=now_ms)
    assert group.state is GroupState.STABLE and group.metadata_changed
    return a, b


def replay(coordinator: GroupCoordinator, now_ms: int) -> GroupCoordinator:
    """What a new coordinator holds after replaying the records `coordinator` wrote."""
    fresh = GroupCoordinator(NO_DELAY, 50)
    for group_id, value in coordinator.take_changed_groups():
        fresh.load_group(group_id, decode_group_value(encode_group_value(value)), now_ms)
    return fresh


def test_stable_group_value_holds_members_and_assignments():
    coordinator = GroupCoordinator(NO_DELAY, 50)
    a, b = stable_group(coordinator, now_ms=5)
    [(group_id, value)] = coordinator.take_changed_groups()
    assert coordinator.take_changed_groups() == []  # taken once
    assert group_id == "g"
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
        "consumer", 2, "range", a,
    )  # fmt: skip
    assert value.current_state_timestamp_ms == 5
    assert value.members == (
        MemberMetadataValue(a, "i-a", "c", "/10.0.0.1", REBALANCE_MS, SESSION_MS, b"ra", b"A"),
        MemberMetadataValue(b, None, "c", "/10.0.0.1", REBALANCE_MS, SESSION_MS, b"rb", b"B"),
    )


def test_replayed_group_is_stable_and_members_keep_their_generation():
    coordinator = GroupCoordinator(NO_DELAY, 50)
    a, b = stable_group(coordinator)
    fresh = replay(coordinator, now_ms=100_000)
    group = fresh.groups["g"]
    assert group.state is GroupState.STABLE
    assert (group.generation_id, group.protocol_type, group.protocol_name, group.leader_id) == (
        2, "consumer", "range", a,
    )  # fmt: skip
    assert {m: (v.assignment, v.metadata_for("range")) for m, v in group.members.items()} == {
        a: (b"A", b"ra"),
        b: (b"B", b"rb"),
    }
    # the members go on with the generation they had: heartbeat, commit, a repeated SyncGroup
    assert group.heartbeat(member_id=a, generation_id=2, now_ms=100_001) == ErrorCode.NONE
    assert fresh.check_commit("g", b, 2, 100_001) == ErrorCode.NONE
    [r] = group.sync("s", member_id=b, generation_id=2, assignments={}, now_ms=100_002)
    assert (r.result.error_code, r.result.assignment) == (0, b"B")
    assert group.heartbeat(member_id=a, generation_id=1, now_ms=1) == ErrorCode.ILLEGAL_GENERATION


def test_replayed_members_session_timers_restart_at_load():
    coordinator = GroupCoordinator(NO_DELAY, 50)
    a, b = stable_group(coordinator)
    fresh = replay(coordinator, now_ms=50_000)  # long after their last heartbeat at 0
    group = fresh.groups["g"]
    assert fresh.next_deadline_ms() == 50_000 + SESSION_MS
    assert group.heartbeat(member_id=a, generation_id=2, now_ms=50_000 + SESSION_MS - 1) == 0
    replies, expired = fresh.poll(50_000 + SESSION_MS)
    assert expired == [("g", b)] and group.state is GroupState.PREPARING_REBALANCE


def test_restored_member_rejoining_with_its_full_protocols_rebalances():
    coordinator = GroupCoordinator(NO_DELAY, 50)
    a, b = stable_group(coordinator)
    group = replay(coordinator, now_ms=0).groups["g"]
    # b's stored metadata is only its "range" subscription: its full list differs (as in Kafka)
    assert join(group, "b2", b, 1, (("range", b"rb"), ("roundrobin", b"x"))) == []
    assert group.state is GroupState.PREPARING_REBALANCE
    replies = {r.token: r.result for r in join(group, "a2", a, 2, (("range", b"ra"),))}
    assert {r.generation_id for r in replies.values()} == {3}


def test_group_going_empty_is_written_without_members_and_replays_empty():
    coordinator = GroupCoordinator(NO_DELAY, 50)
    a, b = stable_group(coordinator)
    coordinator.take_changed_groups()
    group = coordinator.groups["g"]
    group.leave(member_id=a, now_ms=7)
    assert not group.metadata_changed  # PreparingRebalance: b still has to rejoin
    group.leave(member_id=b, now_ms=8)
    assert group.state is GroupState.EMPTY and group.protocol_type == "consumer"
    [(_, value)] = coordinator.take_changed_groups()
    assert (value.generation, value.protocol, value.leader, value.members) == (3, None, None, ())
    assert (value.protocol_type, value.current_state_timestamp_ms) == ("consumer", 8)
    coordinator.groups["g"].metadata_changed = True
    fresh = replay(coordinator, now_ms=9)
    restored = fresh.groups["g"]
    assert restored.state is GroupState.EMPTY and restored.generation_id == 3
    assert (restored.protocol_type, restored.state_changed_ms) == ("consumer", 8)
    # a new member starts generation 4
    [r] = join(restored, "n", now_ms=10)
    assert r.result.generation_id == 4


def test_a_rebalance_begun_again_is_not_written_half_way():
    coordinator = GroupCoordinator(NO_DELAY, 50)
    stable_group(coordinator)
    join(coordinator.groups["g"], "c", now_ms=1)  # a third member: PreparingRebalance
    assert coordinator.take_changed_groups() == []


def test_tombstone_and_a_later_record_replace_the_group():
    coordinator = GroupCoordinator(NO_DELAY, 50)
    stable_group(coordinator)
    [(_, value)] = coordinator.take_changed_groups()
    fresh = GroupCoordinator(NO_DELAY, 50)
    fresh.load_group("g", value, 0)
    fresh.load_group("g", None, 0)
    assert "g" not in fresh.groups
    fresh.load_group("g", value, 0)
    assert fresh.groups["g"].generation_id == 2


def test_group_metadata_value_of_every_state():
    group = GroupMetadata("g", NO_DELAY, lambda c: c + "-1", 0)
    assert group_metadata_value(group).members == ()
    join(group, "a")
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group_metadata_value(group).members == ()  # no assignment yet: nothing to restore


# -- group.initial.rebalance.delay.ms ----------------------------------------------------------


def test_initial_delay_defaults_to_kafkas_3000_ms():
    assert GroupConfig().group_initial_rebalance_delay_ms == 3_000


def test_initial_delay_holds_the_first_join_and_new_members_extend_it():
    group = delayed_group(3_000)
    assert join(group, "a", now_ms=0) == []
    assert group.next_deadline_ms() == 3_000
    assert join(group, "b", now_ms=2_000) == []  # a new member: the delay runs again
    replies, _ = group.poll(3_000)
    assert replies == [] and group.next_deadline_ms() == 6_000
    replies, _ = group.poll(6_000)  # nobody new in the second delay: the join completes
    assert {r.token for r in replies} == {"a", "b"}
    assert group.generation_id == 1


def test_initial_delay_is_capped_by_the_rebalance_timeout():
    group = delayed_group(20_000)
    join(group, "a", now_ms=0)  # rebalance timeout 30 s: delays 20 s, then at most 10 s
    join(group, "b", now_ms=1)
    assert group.poll(20_000)[0] == [] and group.next_deadline_ms() == 30_000
    join(group, "c", now_ms=25_000)
    replies, _ = group.poll(30_000)
    assert len(replies) == 3 and group.state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_applies_to_an_empty_group_but_only_generation_0_extends():
    group = delayed_group(3_000)
    group.generation_id = 5  # an Empty group that had members before
    join(group, "a", now_ms=100)
    join(group, "b", now_ms=200)
    replies, _ = group.poll(3_100)
    assert len(replies) == 2 and group.generation_id == 6


def test_no_initial_delay_for_a_rebalance_of_a_stable_group():
    coordinator = GroupCoordinator(GroupConfig(group_initial_rebalance_delay_ms=0), 50)
    a, b = stable_group(coordinator)
    group = coordinator.groups["g"]
    group.config = GroupConfig(group_initial_rebalance_delay_ms=3_000)
    join(group, "c", now_ms=10)
    join(group, "b2", b, 11, (("range", b"rb"), ("roundrobin", b"x")))
    replies = join(group, "a2", a, 12, (("range", b"ra"),))
    assert len(replies) == 3  # every member rejoined: no delay


def test_a_group_value_with_members_but_no_protocol_is_a_typed_error():
    import pytest

    from log.common.errors import CorruptRecordError
    from log.coordinator.records import GroupMetadataValue

    member = MemberMetadataValue("m", None, "c", "/h", 1, 1, b"", b"")
    with pytest.raises(CorruptRecordError):
        GroupCoordinator(NO_DELAY, 50).load_group(
            "g", GroupMetadataValue("consumer", 1, None, None, 0, (member,)), 0
        )
