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


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user_data."""
    body = len(topics).to_bytes(4, "big")
    for topic in topics:
        body += len(topic).to_bytes(2, "big") + topic.encode()
    return b"\x00\x00" + body + b"\xff\xff\xff\xff"


def one_member_group(c: GroupCoordinator, now_ms: int, metadata: bytes = b"") -> str:
    group = c.group("g", now_ms, create=True)
    [r] = group.join(
        "t", member_id="", group_instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
        protocols=(("range", metadata),), require_known_member_id=False, now_ms=now_ms,
    )  # fmt: skip
    member = r.result.member_id
    group.sync("s", member_id=member, generation_id=1, assignments={}, now_ms=now_ms)
    assert group.state is GroupState.STABLE
    return member


def test_offsets_of_subscribed_topics_never_expire():
    c = coordinator()
    member = one_member_group(c, 0, subscription("t"))
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


def test_stable_consumer_group_loses_offsets_of_topics_it_no_longer_subscribes_to():
    """KIP-496: counted from the commit, only for topics no member subscribes to."""
    c = coordinator()
    member = one_member_group(c, 0, subscription("t", "u"))
    c.store_offset("g", "t", 0, offset(5, 0))
    c.store_offset("g", "old", 0, offset(6, 100))
    group = c.groups["g"]
    group.heartbeat(member_id=member, generation_id=1, now_ms=RETENTION_MS + 99)
    assert c.expire_offsets(RETENTION_MS + 99) == []
    assert c.expire_offsets(RETENTION_MS + 100) == [GroupCleanup("g", (("old", 0),), False)]
    assert list(c.fetch_offsets("g", None)) == [("t", 0)] and "g" in c.groups


def test_unreadable_subscriptions_and_rebalancing_groups_keep_their_offsets():
    c = coordinator()
    member = one_member_group(c, 0, b"\x00")  # not a ConsumerProtocolSubscription
    c.store_offset("g", "old", 0, offset(6, 0))
    assert c.expire_offsets(2 * RETENTION_MS) == []
    c.groups["g"].leave(member_id=member, now_ms=1)
    c.store_offset("g2", "old", 0, offset(6, 0))
    group2 = c.group("g2", 0, create=True)
    group2.join(
        "t", member_id="", group_instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="consumer",
        protocols=(("range", subscription("t")),), require_known_member_id=False, now_ms=0,
    )  # fmt: skip
    assert group2.state is GroupState.COMPLETING_REBALANCE
    assert [x.group_id for x in c.expire_offsets(2 * RETENTION_MS)] == ["g"]  # Empty: expires


def test_subscribed_topics_of_consumer_protocol_metadata():
    import pytest

    from log.common.errors import CorruptRecordError
    from log.coordinator.consumer_protocol import subscribed_topics

    assert subscribed_topics(subscription("a", "b")) == {"a", "b"}
    v3_tail = bytes.fromhex("00000000" + "00000007" + "ffff")  # owned, generation, rack
    assert subscribed_topics(b"\x00\x03" + subscription("a")[2:] + v3_tail) == {"a"}
    for bad in (b"", b"\x00", b"\xff\xff\x00\x00\x00\x00", b"\x00\x00\x7f\xff\xff\xff"):
        with pytest.raises(CorruptRecordError):
            subscribed_topics(bad)


def test_offset_delete_spares_what_a_live_consumer_group_subscribes_to():
    """OffsetDelete (Kafka's handleDeleteOffsets): subscribed topics are refused while the
    group has members, the rest go; an Empty or standalone group loses what is asked."""
    from log.common.errors import ErrorCode

    c = coordinator()
    member = one_member_group(c, 0, subscription("t"))
    for topic in ("t", "old"):
        c.store_offset("g", topic, 0, offset(5, 0))
    code, results = c.delete_offsets("g", [("t", 0), ("old", 0), ("old", 1)])
    assert code == ErrorCode.NONE
    assert results == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
                       ("old", 0): ErrorCode.NONE, ("old", 1): ErrorCode.NONE}  # fmt: skip
    assert c.fetch_offsets("g", None) == {("t", 0): offset(5, 0)}
    c.groups["g"].leave(member_id=member, now_ms=1)
    assert c.delete_offsets("g", [("t", 0)]) == (ErrorCode.NONE, {("t", 0): ErrorCode.NONE})
    assert c.fetch_offsets("g", None) == {}
    assert c.delete_offsets("nobody", [("t", 0)]) == (ErrorCode.GROUP_ID_NOT_FOUND, {})
    c.store_offset("standalone", "t", 0, offset(1, 0))
    assert c.delete_offsets("standalone", [("t", 0)])[1] == {("t", 0): ErrorCode.NONE}


def test_offset_delete_of_a_group_with_members_of_another_protocol_is_non_empty():
    from log.common.errors import ErrorCode

    c = coordinator()
    group = c.group("g", 0, create=True)
    group.join(
        "t", member_id="", group_instance_id=None, client_id="c", client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, protocol_type="connect",
        protocols=(("x", b""),), require_known_member_id=False, now_ms=0,
    )  # fmt: skip
    c.store_offset("g", "t", 0, offset(5, 0))
    assert c.delete_offsets("g", [("t", 0)]) == (ErrorCode.NON_EMPTY_GROUP, {})


def test_transactional_offsets_pending_keep_an_empty_group_alive():
    """A group whose offsets are only pending in a transaction (TxnOffsetCommit, no marker yet)
    is not removed; the committed offsets then expire as usual."""
    from log.coordinator.group_coordinator import partition_for

    c = coordinator()
    member = one_member_group(c, 0)
    c.groups["g"].leave(member_id=member, now_ms=0)
    assert c.groups["g"].state is GroupState.EMPTY
    c.store_pending_txn_offset(7, "g", "t", 0, offset(5, 0))
    assert c.expire_offsets(10 * RETENTION_MS) == []
    assert "g" in c.groups
    assert c.fetch_offsets("g", None) == {}
    # The COMMIT marker lands on the group's __consumer_offsets partition (another is ignored).
    other = (partition_for("g", 50) + 1) % 50
    assert c.complete_txn(7, other, committed=True) == 0
    assert c.complete_txn(7, partition_for("g", 50), committed=True) == 1
    assert c.fetch_offsets("g", None) == {("t", 0): offset(5, 0)}
    assert c.expire_offsets(10 * RETENTION_MS) == [GroupCleanup("g", (("t", 0),), True)]
