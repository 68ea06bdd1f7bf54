"""The server-side assignors (log/coordinator/assignors.py): properties over random groups."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log.coordinator.assignors import RANGE, UNIFORM, assign, parse_assignors

TOPICS = ["a", "b", "c", "d"]

groups = st.fixed_dictionaries(
    {
        "members": st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, unique=True),
        "counts": st.fixed_dictionaries({t: st.integers(0, 12) for t in TOPICS}),
    }
)


def _partitions(assignment, member):
    return {(t, p) for t, ps in assignment.get(member, {}).items() for p in ps}


def _every_partition_once(result, subscriptions, counts):
    seen = []
    for member, by_topic in result.items():
        for topic, partitions in by_topic.items():
            assert topic in subscriptions[member], "only subscribed topics"
            for p in partitions:
                assert 0 <= p < counts[topic]
                seen.append((topic, p))
    assert len(seen) == len(set(seen)), "no partition twice"
    wanted = {(t, p) for subs in subscriptions.values() for t in subs for p in range(counts[t])}
    assert set(seen) == wanted, "every subscribed partition"


@settings(max_examples=150, deadline=None)
@given(groups, st.data(), st.sampled_from([UNIFORM, RANGE]))
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(group, data, name):
    subscriptions = {
        m: frozenset(data.draw(st.lists(st.sampled_from(TOPICS), unique=True)))
        for m in group["members"]
    }
    result = assign(name, subscriptions, group["counts"])
    _every_partition_once(result, subscriptions, group["counts"])


@settings(max_examples=150, deadline=None)
@given(groups, st.sampled_from([UNIFORM, RANGE]))
def test_identical_subscriptions_are_balanced(group, name):
    subscriptions = {m: frozenset(TOPICS) for m in group["members"]}
    result = assign(name, subscriptions, group["counts"])
    if name == UNIFORM:
        sizes = [len(_partitions(result, m)) for m in group["members"]]
        assert max(sizes) - min(sizes) <= 1
    else:  # range balances each topic
        for topic in TOPICS:
            sizes = [len(result[m].get(topic, ())) for m in group["members"]]
            assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(groups, st.sampled_from([f"n{i}" for i in range(3)]))
def test_uniform_is_sticky_when_a_member_joins_or_leaves(group, newcomer):
    subscriptions = {m: frozenset(TOPICS) for m in group["members"]}
    counts = group["counts"]
    before = assign(UNIFORM, subscriptions, counts)
    # the same inputs again change nothing
    assert assign(UNIFORM, subscriptions, counts, before) == before
    # a member joins: everyone else keeps a subset of what they had
    after = assign(UNIFORM, {**subscriptions, newcomer: frozenset(TOPICS)}, counts, before)
    for member in group["members"]:
        assert _partitions(after, member) <= _partitions(before, member)
    # a member leaves: the others keep everything they had
    if len(group["members"]) > 1:
        gone = group["members"][0]
        rest = {m: s for m, s in subscriptions.items() if m != gone}
        after = assign(UNIFORM, rest, counts, {m: a for m, a in before.items() if m != gone})
        for member in rest:
            assert _partitions(after, member) >= _partitions(before, member)


def test_partition_increase_keeps_existing_partitions_in_place():
    subscriptions = {"m1": frozenset({"a"}), "m2": frozenset({"a"})}
    before = assign(UNIFORM, subscriptions, {"a": 4})
    after = assign(UNIFORM, subscriptions, {"a": 6}, before)
    assert all(_partitions(before, m) <= _partitions(after, m) for m in subscriptions)
    assert sorted(len(_partitions(after, m)) for m in subscriptions) == [3, 3]


def test_range_gives_consecutive_ranges_in_member_id_order():
    result = assign(RANGE, {"b": frozenset({"t"}), "a": frozenset({"t"})}, {"t": 5})
    assert result == {"a": {"t": frozenset({0, 1, 2})}, "b": {"t": frozenset({3, 4})}}


def test_assignor_names_are_kafkas():
    assert parse_assignors("uniform,range") == (UNIFORM, RANGE)
    assert parse_assignors(
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform"
    ) == (RANGE, UNIFORM)
    with pytest.raises(ValueError, match="unknown server assignor"):
        parse_assignors("sticky")
    with pytest.raises(ValueError):
        parse_assignors("")
