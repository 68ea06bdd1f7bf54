"""KIP-848 regex subscriptions, sans-IO (consumer_group_state.py and topic_regex.py through the
GroupCoordinator): a member's SubscribedTopicRegex resolves to the topics whose whole name it
matches, a bad one is INVALID_REGULAR_EXPRESSION and changes nothing, a topic created later
joins once the metadata moved and the refresh interval passed, the resolution is a
ConsumerGroupRegularExpression record (key version 16) that a new coordinator replays, and
the last member leaving a regex tombstones it."""

from __future__ import annotations

import uuid

import pytest

from log.common.errors import ErrorCode
from log.coordinator import consumer_group_records as cgr
from log.coordinator.consumer_group_state import (
    ConsumerGroupConfig,
    HeartbeatRequest,
    TopicListing,
)
from log.coordinator.group_coordinator import GroupCoordinator
from log.coordinator.group_state import GroupConfig
from log.coordinator.topic_regex import InvalidRegularExpression, compile_topic_regex, resolve

GROUP = "g"
REFRESH_MS = 10_000


class World:
    """A coordinator, the cluster's topics (name -> (id, partitions)) at a metadata offset, and
    every record the coordinator asked to append."""

    def __init__(self, **topics: int) -> None:
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}
        self.version = 0
        for name, partitions in topics.items():
            self.create(name, partitions)
        config = ConsumerGroupConfig(regex_refresh_interval_ms=REFRESH_MS)
        self.core = GroupCoordinator(GroupConfig(), 1, consumer_config=config)
        self.records: list[tuple[bytes, bytes | None]] = []
        self.now = 1_000

    def create(self, name: str, partitions: int) -> None:
        self.topics[name.replace("_", "-")] = (uuid.uuid4(), partitions)
        self.version += 1

    def hb(self, member_id: str, epoch: int, regex: str | None = None, names=None, owned=None):
        kw = {}
        if epoch == 0:
            kw["rebalance_timeout_ms"] = 60_000
            owned = [] if owned is None else owned
        request = HeartbeatRequest(member_id, epoch, subscribed_topic_names=names,
                                   subscribed_topic_regex=regex, owned=owned, client_id="c",
                                   **kw)  # fmt: skip
        listing = TopicListing(self.version, lambda: list(self.topics))
        result, records = self.core.consumer_heartbeat(
            GROUP, request, self.now, self.topics.get, 1, listing
        )
        self.records += records
        return result

    def assigned(self, result) -> set[tuple[str, int]]:
        names = {topic_id: name for name, (topic_id, _) in self.topics.items()}
        return {(names[t], p) for t, ps in (result.assignment or {}).items() for p in ps}

    def regex_records(self) -> list[tuple[cgr.ConsumerGroupRecordKey, object]]:
        found = []
        for key, value in self.records:
            k = cgr.decode_key(key)
            if k.version == cgr.REGULAR_EXPRESSION:
                found.append((k, None if value is None else cgr.decode_value(k.version, value)))
        return found


def test_topic_regex_matches_whole_names_with_re2_syntax():
    assert resolve(["(^rx-.*)", "rx", "o.*|rx-b"], ["rx-a", "rx-b", "xrx-a", "rx", "other"]) == {
        "(^rx-.*)": frozenset({"rx-a", "rx-b"}),
        "rx": frozenset({"rx"}),
        "o.*|rx-b": frozenset({"other", "rx-b"}),
    }
    for bad in ("rx-(", "(?=rx)", "(a)\\1", "[z-a]"):  # unbalanced, lookahead, backreference
        with pytest.raises(InvalidRegularExpression, match="is not a valid regular expression"):
            compile_topic_regex(bad)


def test_a_regex_member_gets_the_matching_topics_and_a_later_topic_joins():
    w = World(rx_a=2, rx_b=1, other=1)
    joined = w.hb("m", 0, regex="(^rx-.*)", names=[])
    assert joined.error_code == ErrorCode.NONE
    assert w.assigned(joined) == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0)}
    [(key, value)] = w.regex_records()
    assert key.regular_expression == "(^rx-.*)"
    assert sorted(value.topics) == ["rx-a", "rx-b"] and value.version == w.version

    w.create("rx_c", 2)
    w.now += REFRESH_MS  # not past the interval yet: the regex is not resolved again
    epoch = joined.member_epoch
    same = w.hb("m", epoch)
    assert same.member_epoch == epoch and same.assignment is None
    w.now += 1
    grown = w.hb("m", epoch)
    assert grown.member_epoch > epoch
    assert w.assigned(grown) == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-c", 0), ("rx-c", 1)}
    assert sorted(w.regex_records()[-1][1].topics) == ["rx-a", "rx-b", "rx-c"]


def test_topic_names_and_a_regex_add_up():
    w = World(rx_a=1, other=1)
    joined = w.hb("m", 0, regex="rx-.*", names=["other"])
    assert w.assigned(joined) == {("rx-a", 0), ("other", 0)}


def test_a_bad_regex_is_invalid_regular_expression_and_changes_nothing():
    w = World(rx_a=1)
    refused = w.hb("m", 0, regex="(^rx-(", names=[])
    assert refused.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION == 128
    assert "SubscribedTopicRegex `(^rx-(` is not a valid regular expression" in (
        refused.error_message or ""
    )
    assert w.records == [] and GROUP not in w.core.consumer_groups
    joined = w.hb("m", 0, regex="rx-.*", names=[])
    before = list(w.records)
    refused = w.hb(joined.member_id, joined.member_epoch, regex="[")
    assert refused.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert w.records == before
    assert w.core.consumer_groups[GROUP].members[joined.member_id].subscribed_topic_regex == "rx-.*"


def test_joining_needs_names_or_a_regex():
    w = World(rx_a=1)
    refused = w.hb("m", 0)
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert "SubscribedTopicRegex" in (refused.error_message or "")


def test_the_resolution_survives_a_fail_over_and_the_last_member_leaving_tombstones_it():
    w = World(rx_a=2)
    a = w.hb("a", 0, regex="rx-.*", names=[])
    b = w.hb("b", 0, regex="rx-.*", names=[])
    core = GroupCoordinator(GroupConfig(), 1)
    for key, value in w.records:
        k = cgr.decode_key(key)
        core.load_consumer_group_record(
            k, None if value is None else cgr.decode_value(k.version, value), w.now
        )
    group = core.consumer_groups[GROUP]
    assert group.members["a"].subscribed_topic_regex == "rx-.*"
    assert group.resolved_regexes["rx-.*"].topics == {"rx-a"}
    assert group.subscribed_topics() == {"rx-a"}

    assert w.hb("a", -1).error_code == ErrorCode.NONE  # b still uses the regex
    assert all(value is not None for _, value in w.regex_records())
    w.hb("b", b.member_epoch, regex="")  # b drops the regex: nothing uses it any more
    key, value = w.regex_records()[-1]
    assert key.regular_expression == "rx-.*" and value is None
    assert w.core.consumer_groups[GROUP].subscribed_topics() == frozenset()
    assert a.member_epoch > 0
