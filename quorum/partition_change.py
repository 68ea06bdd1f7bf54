"""Leader election and ISR/ELR upkeep for one partition (Kafka's PartitionChangeBuilder), sans-IO.

Every controller decision that changes a partition's ISR or leadership (fencing, unfencing, a
broker's re-registration, a leader's AlterPartition) calls `partition_change` with the ISR it
wants and who may lead; the result is the partition's next registration, turned into a
PartitionChangeRecord by `change_record`.

Eligible leader replicas (KIP-966). With `acks=all`, a record is acknowledged only while the ISR
has at least min.insync.replicas members, and every one of them holds it. So when the ISR
shrinks below min.insync.replicas, the members it loses still hold every acknowledged record:
they are kept in `elr`. Rules, in order:

1. ISR at or above min.insync.replicas: `elr` and `last_known_elr` are cleared.
2. Below it: `elr` = (old `elr` + old ISR) - new ISR - replicas that restarted uncleanly (their
   unflushed tail, acknowledged records included, may be gone).
3. Election, when the current leader is no longer in the ISR or may not lead: the first ISR
   member that may lead; with an empty ISR, the first ELR member that may (it becomes the ISR);
   with an empty ISR and ELR, the last known leader if it may lead (Kafka's "balanced recovery":
   every replica that held what it held has restarted uncleanly too); then, only with
   unclean.leader.election.enable, any replica that may lead. The last two are unclean elections: ISR = the new leader, ELR cleared.
4. When the ISR becomes empty with no leader, `last_known_elr` remembers the last leader; any
   elected leader clears it. A replica whose log directory was wiped (`lost_data_replicas`)
   never stays there: it holds nothing to recover.

Hence an uncleanly restarted former sole ISR member never leads while an ELR member exists, and
a wiped replica leads only through unclean.leader.election.enable. Partition epoch + 1 on every
change, leader epoch + 1 on every leader change.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass

from quorum.image import PartitionRegistration
from quorum.records import NO_LEADER, PartitionChangeRecord


@dataclass(frozen=True)
class ElectionPolicy:
    """A topic's effective configuration for elections (topic, else cluster, else node)."""

    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False

    def __post_init__(self) -> None:
        assert self.min_insync_replicas >= 1


def partition_change(
    state: PartitionRegistration,
    target_isr: tuple[int, ...],
    may_lead: Callable[[int], bool],
    policy: ElectionPolicy,
    *,
    unclean_shutdown_replicas: Collection[int] = (),
    lost_data_replicas: Collection[int] = (),
) -> PartitionRegistration:
    """The partition's next registration (`state` itself when nothing changes).

    `may_lead(r)`: broker r is live and not being removed; `unclean_shutdown_replicas` left the
    ISR and ELR because they restarted without a clean shutdown (`target_isr` must not hold
    them); `lost_data_replicas` came back with an empty log directory."""
    unclean = set(unclean_shutdown_replicas)
    assert unclean.isdisjoint(target_isr)
    isr = tuple(target_isr)
    if len(isr) >= policy.min_insync_replicas:
        elr: tuple[int, ...] = ()
    else:
        candidates = set(state.elr) | set(state.isr)
        elr = tuple(
            r for r in state.replicas if r in candidates and r not in isr and r not in unclean
        )

    def valid(r: int) -> bool:
        return (r in isr or (not isr and r in elr)) and may_lead(r)

    leader = state.leader
    last_known_elr = state.last_known_elr
    if leader == NO_LEADER or not valid(leader):
        leader = next((r for r in isr if valid(r)), NO_LEADER)
        if leader == NO_LEADER and not isr:
            leader = next((r for r in state.replicas if r in elr and may_lead(r)), NO_LEADER)
            if leader != NO_LEADER:
                isr, elr = (leader,), tuple(r for r in elr if r != leader)
        if leader == NO_LEADER:
            leader = _unclean_leader(
                state, not isr and not elr, may_lead, policy, lost_data_replicas
            )
            if leader != NO_LEADER:
                isr, elr = (leader,), ()
    if leader != NO_LEADER:
        last_known_elr = ()
    elif not isr:
        last = state.leader if state.leader != NO_LEADER else _sole(state.isr)
        if last is not None:
            last_known_elr = (last,)
    last_known_elr = tuple(r for r in last_known_elr if r not in lost_data_replicas)
    new = dataclasses.replace(state, isr=isr, leader=leader, elr=elr, last_known_elr=last_known_elr)
    if new == state:
        return state
    return dataclasses.replace(
        new,
        leader_epoch=state.leader_epoch + (1 if leader != state.leader else 0),
        partition_epoch=state.partition_epoch + 1,
    )


def _sole(isr: tuple[int, ...]) -> int | None:
    """A leaderless partition of an older journal kept its last ISR member in the ISR."""
    return isr[0] if len(isr) == 1 else None


def _unclean_leader(
    state: PartitionRegistration,
    no_isr_nor_elr: bool,
    may_lead: Callable[[int], bool],
    policy: ElectionPolicy,
    lost_data_replicas: Collection[int],
) -> int:
    """No ISR or ELR member may lead: with no ISR and no ELR at all, the last known leader
    (balanced recovery); then any replica when unclean.leader.election.enable is set (as in
    Kafka, even while fenced ELR members wait); NO_LEADER otherwise."""
    known = state.last_known_elr
    if (
        no_isr_nor_elr
        and len(known) == 1
        and known[0] not in lost_data_replicas
        and may_lead(known[0])
    ):
        return known[0]
    if policy.unclean_leader_election_enable:
        return next((r for r in state.replicas if may_lead(r)), NO_LEADER)
    return NO_LEADER


def change_record(
    topic_id: uuid.UUID, partition: int, old: PartitionRegistration, new: PartitionRegistration
) -> PartitionChangeRecord | None:
    """The record that turns `old` into `new` (None when they are the same)."""
    if new == old:
        return None
    return PartitionChangeRecord(
        topic_id,
        partition,
        leader_epoch=new.leader_epoch,
        partition_epoch=new.partition_epoch,
        leader=new.leader if new.leader != old.leader else None,
        isr=new.isr if new.isr != old.isr else None,
        replicas=new.replicas if new.replicas != old.replicas else None,
        elr=new.elr if new.elr != old.elr else None,
        last_known_elr=new.last_known_elr if new.last_known_elr != old.last_known_elr else None,
        adding_replicas=(
            new.adding_replicas if new.adding_replicas != old.adding_replicas else None
        ),
        removing_replicas=(
            new.removing_replicas if new.removing_replicas != old.removing_replicas else None
        ),
    )
