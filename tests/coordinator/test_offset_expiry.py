"""Offset expiry (offsets.retention.ms, KIP-211) in the sans-IO coordinator, explicit now_ms."""

from __future__ import annotations

from log.coordinator.group_coordinator import GroupCleanup, GroupCoordinator, OffsetAndMetadata
from log.coordinator.group_state import GroupConfig, GroupState

RETENTION_MS = 1_000_000
SESSION_MS = 10_000


def coordinator() -> GroupCoordinator:
    config = GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_ms=RETENTION_MS)
    return GroupCoordinator(config, 50)


def offset(value: int, commit_ms: int, expire_ms: int = -1) -> OffsetAndMetadata:
    return OffsetAndMetadata(value, -1, "", commit_ms, expire_ms)


def one_member_group(c: GroupCoordinator, now_ms: int) -> str:
    group = c.group("g", now_ms, create=True)
    [r] = group.join(
        "t", member_id="", group_instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
        protocols=(("range", b""),), require_known_member_id=False, now_ms=now_ms,
    )  # fmt: skip
    member = r.result.member_id
    group.sync("s", member_id=member, generation_id=1, assignments={}, now_ms=now_ms)
    assert group.state is GroupState.STABLE
    return member


def test_offsets_of_a_group_with_members_never_expire():
    c = coordinator()
    member = one_member_group(c, 0)
    c.store_offset("g", "t", 0, offset(5, 0))
    group = c.groups["g"]
    for now_ms in (RETENTION_MS, 10 * RETENTION_MS):
        group.heartbeat(member_id=member, generation_id=1, now_ms=now_ms)
        assert c.expire_offsets(now_ms) == []
    assert c.fetch_offsets("g", None) == {("t", 0): offset(5, 0)}


def test_empty_group_offsets_expire_retention_after_it_went_empty_then_the_group_dies():
    c = coordinator()
    member = one_member_group(c, 0)
    c.store_offset("g", "t", 0, offset(5, 0))
    c.store_offset("g", "t", 1, offset(6, 10))
    c.groups["g"].leave(member_id=member, now_ms=500_000)
    assert c.groups["g"].state is GroupState.EMPTY
    # counted from going Empty (500_000), not from the commits
    assert c.expire_offsets(500_000 + RETENTION_MS - 1) == []
    assert c.expire_offsets(500_000 + RETENTION_MS) == [
        GroupCleanup("g", (("t", 0), ("t", 1)), group_removed=True)
    ]
    assert "g" not in c.groups and c.fetch_offsets("g", None) == {}
    assert c.expire_offsets(10 * RETENTION_MS) == []


def test_empty_group_with_unknown_state_time_uses_each_commit_time():
    c = coordinator()
    member = one_member_group(c, 0)
    c.groups["g"].leave(member_id=member, now_ms=1)
    c.groups["g"].state_changed_ms = -1  # as replayed from a value version 0 or 1
    c.store_offset("g", "t", 0, offset(5, 0))
    c.store_offset("g", "t", 1, offset(6, 100))
    assert c.expire_offsets(RETENTION_MS) == [GroupCleanup("g", (("t", 0),), False)]
    assert c.expire_offsets(RETENTION_MS + 100) == [GroupCleanup("g", (("t", 1),), True)]


def test_standalone_offsets_expire_from_their_commit_time():
    c = coordinator()
    c.store_offset("solo", "t", 0, offset(1, 0))
    c.store_offset("solo", "t", 1, offset(2, 300))
    assert c.expire_offsets(RETENTION_MS - 1) == []
    assert c.expire_offsets(RETENTION_MS + 299) == [GroupCleanup("solo", (("t", 0),), False)]
    assert c.fetch_offsets("solo", None) == {("t", 1): offset(2, 300)}
    assert c.expire_offsets(RETENTION_MS + 300) == [GroupCleanup("solo", (("t", 1),), True)]


def test_explicit_expire_timestamp_wins_but_only_when_the_group_may_expire():
    c = coordinator()
    c.store_offset("solo", "t", 0, offset(1, 0, expire_ms=50))
    assert c.expire_offsets(49) == []
    assert c.expire_offsets(50) == [GroupCleanup("solo", (("t", 0),), True)]
    member = one_member_group(c, 0)
    c.store_offset("g", "t", 0, offset(1, 0, expire_ms=50))
    c.groups["g"].heartbeat(member_id=member, generation_id=1, now_ms=100)
    assert c.expire_offsets(100) == []  # the group has members


def test_offsets_with_a_commit_in_flight_do_not_expire():
    c = coordinator()
    c.store_offset("solo", "t", 0, offset(1, 0))
    c.begin_commit("solo", [("t", 0)])
    assert c.expire_offsets(2 * RETENTION_MS) == []
    c.end_commit("solo", [("t", 0)])
    assert c.pending_commits == {}
    assert c.expire_offsets(2 * RETENTION_MS) == [GroupCleanup("solo", (("t", 0),), True)]


def test_empty_group_without_offsets_is_removed_at_the_next_check():
    c = coordinator()
    member = one_member_group(c, 0)
    c.groups["g"].leave(member_id=member, now_ms=1)
    assert c.expire_offsets(2) == [GroupCleanup("g", (), True)]
    assert "g" not in c.groups


def test_group_with_a_handed_out_member_id_stays():
    c = coordinator()
    group = c.group("g", 0, create=True)
    [r] = group.join(
        "t", member_id="", group_instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
        protocols=(("range", b""),), require_known_member_id=True, now_ms=0,
    )  # fmt: skip
    assert group.pending_member_ids
    assert c.expire_offsets(1) == [] and "g" in c.groups
