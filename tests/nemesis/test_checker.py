"""The nemesis checker finds each kind of violation, and passes a clean history."""

from __future__ import annotations

from tools.nemesis.checker import check


def _clean():
    acked = {"p0:0": (0, 0), "p0:1": (1, 0), "p0:2": (0, 1), "p1:0": (1, 1)}
    read = {0: [(0, "p0:0"), (1, "p0:2")], 1: [(0, "p0:1"), (1, "p1:0")]}
    replicas = {0: {1: [b"a", b"b"], 2: [b"a", b"b"]}, 1: {2: [b"c"], 3: [b"c"]}}
    return acked, read, replicas


def test_a_clean_history_passes():
    acked, read, replicas = _clean()
    verdict = check(acked, [], read, replicas)
    assert verdict.ok and verdict.acked == 4 and verdict.read == 4


def test_every_violation_kind_is_found():
    acked, read, replicas = _clean()
    acked["p1:1"] = (0, 2)  # acknowledged, never read: lost
    read[1].append((2, "p0:1"))  # a second copy: duplicated
    acked["p0:2"] = (0, 5)  # read at 0/1: inconsistent offset
    read[0].append((3, "p0:0"))  # p0's sequence 0 after 2 in partition 0: out of order (and dup)
    read[0].append((4, "zz"))  # nobody wrote it
    replicas[1][3] = [b"x"]  # a replica that differs
    verdict = check(acked, ["p1:9"], read, replicas)
    assert not verdict.ok
    assert verdict.lost == ["'p1:1' acknowledged at 0/2"]
    assert sorted(verdict.duplicated) == ["'p0:0' read 2 times", "'p0:1' read 2 times"]
    assert verdict.inconsistent == ["'p0:2' acknowledged at 0/5, read at 0/1"]
    assert verdict.out_of_order and "sequence 0 at 0/3 after 2" in verdict.out_of_order[0]
    assert verdict.unexpected == ["'zz' at 0/4"]
    assert verdict.diverging_replicas == [
        "partition 1: broker 3 differs from broker 2 at batch 0 (1 vs 1 batches)"
    ]


def test_a_failed_write_may_or_may_not_be_there():
    acked, read, replicas = _clean()
    read[1].append((2, "p1:1"))
    verdict = check(acked, ["p1:1", "p1:2"], read, replicas)
    assert verdict.ok and verdict.failed == 2 and verdict.failed_but_present == 1


def test_an_acknowledgement_without_an_offset_needs_its_value_once_in_its_partition():
    """librdkafka acknowledges an idempotent batch whose answer never came, without an offset,
    once a later batch of the partition succeeded ("implicitly acked"): not a violation when
    the value is there once, in that partition; in another one it is."""
    acked, read, replicas = _clean()
    acked["p0:2"] = (0, None)
    verdict = check(acked, [], read, replicas)
    assert verdict.ok and verdict.acked_without_offset == 1
    acked["p0:2"] = (1, None)
    assert check(acked, [], read, replicas).inconsistent == [
        "'p0:2' acknowledged at 1/None, read at 0/1"
    ]
    acked["p0:9"] = (0, None)
    assert check(acked, [], read, replicas).lost == ["'p0:9' acknowledged at 0/None"]
