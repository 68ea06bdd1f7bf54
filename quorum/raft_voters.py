"""The metadata quorum's voter set: which controllers' votes count, as it changes one at a time.

pysyncobj's dynamic membership (quorum.raft) changes the voter set with single-server changes
(Raft dissertation §4.1): an `add` or `remove` entry takes effect as soon as a node appends it,
before it commits, and only one may be uncommitted at a time. A voter is its Raft address
("host:port"). pysyncobj itself does not rebuild the set on start-up (it keeps the constructor's
list plus the checkpoint's), so the binding does, with these functions: the set at a checkpoint,
then every change in the journal after it, in order (`voters_after`). When a checkpoint is taken
the binding stores the set AT the checkpoint's index: the current set with the changes appended
after that index undone, newest first (`voters_before`), because an appended change past the
checkpoint may still be rolled back by a new leader.

Pure functions over `(kind, address)` changes; decoding pysyncobj's entries is the binding's job.
"""

from __future__ import annotations

from collections.abc import Iterable

ADD = "add"
REMOVE = "rem"  # pysyncobj's own words in its membership entries
MembershipChange = tuple[str, str]  # (ADD | REMOVE, "host:port")


def _apply(voters: set[str], change: MembershipChange, reverse: bool) -> None:
    kind, address = change
    assert kind in (ADD, REMOVE), change
    adding = (kind == ADD) != reverse
    if adding:
        voters.add(address)
    else:
        voters.discard(address)


def voters_after(voters: Iterable[str], changes: Iterable[MembershipChange]) -> tuple[str, ...]:
    """The voter set once `changes` (oldest first) are applied to `voters`."""
    result = set(voters)
    for change in changes:
        _apply(result, change, reverse=False)
    return tuple(sorted(result))


def voters_before(voters: Iterable[str], changes: Iterable[MembershipChange]) -> tuple[str, ...]:
    """The voter set before `changes` (oldest first) were applied, given the set after them."""
    result = set(voters)
    for change in reversed(list(changes)):
        _apply(result, change, reverse=True)
    return tuple(sorted(result))


def majority(voter_count: int) -> int:
    return voter_count // 2 + 1
