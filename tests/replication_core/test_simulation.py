"""Deterministic simulation of one partition on three replicas under faults.

See `cluster_sim.py` for the model (network, quorum stub, broker processes, lossy disks) and
`Cluster.check_invariants` for what is checked after every step. Every assertion names its seed;
reproduce one with `Cluster(seed, chaos_config()).run(STEPS)`.
"""

import pytest

from log.replication.follower_state import FollowerState, TruncationDecision
from log.replication.partition_state import PartitionState
from tests.replication_core.cluster_sim import (
    PRODUCER,
    Cluster,
    ProduceRequest,
    SimConfig,
)

SEEDS = 200
STEPS = 250
CONVERGE_STEPS = 600


def chaos_config(**overrides) -> SimConfig:
    config = SimConfig(
        process_crash_probability=0.01,
        power_failure_probability=0.01,
        isolate_probability=0.01,
        cut_link_probability=0.01,
        leader_move_probability=0.01,
    )
    for name, value in overrides.items():
        setattr(config, name, value)
    return config


def run_seed(seed: int, config: SimConfig) -> Cluster:
    cluster = Cluster(seed, config)
    cluster.run(STEPS)
    cluster.quiesce()
    cluster.run_until(cluster.converged, CONVERGE_STEPS)
    return cluster


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"min_insync_replicas": 1},
        {"use_last_fetched_epoch": True},
        {"retention_probability": 0.02},
        {"replica_count": 5, "min_insync_replicas": 3},
    ],
    ids=["min_isr_2", "min_isr_1", "fetch_v12_diverging_epoch", "retention", "five_replicas"],
)
def test_random_faults_keep_acknowledged_data_and_converge(overrides):
    seeds = SEEDS if not overrides else SEEDS // 8
    totals = {"acked": 0, "elections": 0, "truncations": 0, "faults": 0, "offset_resets": 0}
    for seed in range(seeds):
        cluster = run_seed(seed, chaos_config(**overrides))
        leader_log = cluster.nodes[cluster.controller.leader].log
        kept = {b.payload for b in cluster.acked_set if b.next_offset > leader_log.log_start_offset}
        assert kept <= {b.payload for b in leader_log.batches}, seed
        totals["acked"] += len(cluster.acked)
        totals["elections"] += cluster.elections
        totals["truncations"] += cluster.truncations
        totals["faults"] += cluster.faults
        totals["offset_resets"] += cluster.offset_resets
    # The runs exercised what they claim to: acks, fail-overs, truncations, faults, and (with
    # retention) followers resetting after OFFSET_OUT_OF_RANGE.
    offset_resets = totals.pop("offset_resets")
    assert all(count > seeds for count in totals.values()), totals
    if "retention_probability" in overrides:
        assert offset_resets > 0


def test_kip_101_follower_restarts_before_learning_hw_then_becomes_leader():
    """Leader 0 and follower 1. Follower fetched m2 (so m2 is acknowledged) but never learned the
    new HW; it restarts (in-memory HW back to its checkpoint), then the leader dies before
    answering the follower's epoch query, and the follower is elected. Truncating to the HW on
    restart (pre-KIP-101) would lose m2; truncating by leader epoch keeps it."""
    cluster = scenario_a(FollowerState)
    new_leader_log = cluster.nodes[1].log
    assert [b.payload for b in new_leader_log.batches] == ["m1", "m2"]
    cluster.quiesce()
    cluster.run_until(cluster.converged, CONVERGE_STEPS)
    assert [b.payload for b in cluster.nodes[0].log.batches] == ["m1", "m2"]


class TruncateToHighWatermark(FollowerState):
    """Pre-KIP-101 follower: on becoming a follower, truncate to the high watermark."""

    def truncation_request(self, log):
        return self._truncated(TruncationDecision(log.high_watermark))


def test_kip_101_scenario_loses_data_without_leader_epochs():
    with pytest.raises(AssertionError, match="acked"):
        scenario_a(TruncateToHighWatermark)


def scenario_a(follower_factory) -> Cluster:
    cluster = fresh_two_replicas(follower_factory)
    leader, follower = cluster.nodes[0], cluster.nodes[1]
    m2_end = leader.log.log_end_offset + 1
    leader.on_produce_request(PRODUCER, ProduceRequest("m2", 1), cluster.now_ms)
    cluster.run_until(lambda: "m2" in cluster.acked_payloads())
    cluster.network.cut(0, 1, until_ms=10**9)
    assert follower.log.log_end_offset == m2_end and follower.log.high_watermark < m2_end
    cluster.crash(1, lose_unflushed=False)
    # A clean restart: an unclean one would leave the ISR (KIP-966) and never be elected.
    cluster.restart(1, clean=True)
    cluster.run(3)  # the follower's epoch query to the leader is lost on the cut link
    cluster.crash(0, lose_unflushed=True)
    cluster.run_until(lambda: cluster.leader_is(1))
    cluster.run(20)
    return cluster


def fresh_two_replicas(follower_factory) -> Cluster:
    """Leader 0, follower 1, m1 replicated and its HW known to both."""
    config = SimConfig(
        replica_count=2,
        min_insync_replicas=1,
        produce_probability=0.0,
        drop_probability=0.0,
        flush_probability=0.0,
        follower_factory=follower_factory,
    )
    cluster = Cluster(1, config)
    cluster.run_until(lambda: cluster.leader_is(0) and cluster.nodes[1].partition.leader_id == 0)
    cluster.nodes[0].on_produce_request(PRODUCER, ProduceRequest("m1", 1), cluster.now_ms)
    cluster.run_until(lambda: cluster.nodes[1].log.high_watermark == 1)
    return cluster


def test_two_fail_overs_with_divergent_tails_converge():
    """Each deposed leader keeps an unreplicated tail written in its own epoch; after healing,
    both truncate by leader epoch to the last leader's log and everyone converges."""
    config = SimConfig(
        min_insync_replicas=1,
        produce_probability=0.0,
        drop_probability=0.0,
        flush_probability=0.0,
    )
    cluster = Cluster(2, config)
    nodes = cluster.nodes
    cluster.run_until(
        lambda: cluster.leader_is(0) and all(n.partition.leader_epoch == 0 for n in nodes.values())
    )
    nodes[0].on_produce_request(PRODUCER, ProduceRequest("m1", 1), cluster.now_ms)
    cluster.run_until(lambda: all(n.log.high_watermark == 1 for n in nodes.values()))

    cluster.isolate(0, duration_ms=10**9)
    nodes[0].on_produce_request(PRODUCER, ProduceRequest("m2", 1), cluster.now_ms)  # epoch 0
    cluster.run_until(lambda: cluster.leader_is(1) and nodes[2].partition.leader_id == 1)
    nodes[1].on_produce_request(PRODUCER, ProduceRequest("m3", 1), cluster.now_ms)  # epoch 1
    cluster.run_until(lambda: "m3" in cluster.acked_payloads())

    cluster.isolate(1, duration_ms=10**9)
    nodes[1].on_produce_request(PRODUCER, ProduceRequest("m4", 1), cluster.now_ms)  # epoch 1
    cluster.run_until(lambda: cluster.leader_is(2))
    nodes[2].on_produce_request(PRODUCER, ProduceRequest("m5", 1), cluster.now_ms)  # epoch 2
    cluster.run_until(lambda: "m5" in cluster.acked_payloads())

    tails = {n: [(b.payload, b.leader_epoch) for b in nodes[n].log.batches] for n in nodes}
    assert tails == {
        0: [("m1", 0), ("m2", 0)],
        1: [("m1", 0), ("m3", 1), ("m4", 1)],
        2: [("m1", 0), ("m3", 1), ("m5", 2)],
    }
    cluster.quiesce()
    cluster.run_until(cluster.converged, CONVERGE_STEPS)
    for node in nodes.values():
        assert [(b.payload, b.leader_epoch) for b in node.log.batches] == tails[2]
    assert cluster.truncations >= 2


_CHECK_ISR_EXPAND = PartitionState.check_isr_expand


def _expand_without_epoch_start(self, replica_id):
    saved, self.leader_epoch_start_offset = self.leader_epoch_start_offset, -1
    try:
        return _CHECK_ISR_EXPAND(self, replica_id)
    finally:
        self.leader_epoch_start_offset = saved


def _shrink_counts_at_once(self):
    pending = self.pending_alter_partition
    return self.isr & frozenset(pending.new_isr) if pending is not None else self.isr


def _truncate_to_leader_end_only(self, leader_epoch, end_offset, log):
    return TruncationDecision(min(end_offset, log.log_end_offset))


MUTATIONS = {
    # HW counts a proposed ISR shrink before the controller committed it.
    "shrink_effective_before_commit": (
        PartitionState,
        "maximal_isr",
        property(_shrink_counts_at_once),
    ),
    # A follower joins the ISR without reaching the start of the leader's epoch.
    "expand_without_epoch_start": (PartitionState, "check_isr_expand", _expand_without_epoch_start),
    # Pre-KIP-101: truncate to the high watermark instead of asking for the epoch's end.
    "truncate_to_high_watermark": (
        FollowerState,
        "truncation_request",
        lambda self, log: self._truncated(TruncationDecision(log.high_watermark)),
    ),
    # Ignore our own end offset for the leader's epoch (keep a divergent suffix).
    "ignore_own_epoch_end": (
        FollowerState,
        "_truncation_for_leader_epoch",
        _truncate_to_leader_end_only,
    ),
}


def test_isolated_leader_cannot_acknowledge_alone():
    """The deposed leader still believes it leads; its ISR shrink never reaches the controller,
    so the maximal ISR keeps counting the followers and its acks=all appends time out."""
    config = SimConfig(
        min_insync_replicas=1,
        produce_probability=0.0,
        drop_probability=0.0,
        flush_probability=0.0,
    )
    cluster = Cluster(3, config)
    nodes = cluster.nodes
    cluster.run_until(lambda: cluster.leader_is(0) and nodes[1].partition.leader_id == 0)
    cluster.isolate(0, duration_ms=10**9)
    nodes[0].on_produce_request(PRODUCER, ProduceRequest("lonely", 1), cluster.now_ms)
    cluster.run(2 * config.produce_timeout_ms // config.step_ms)
    old_leader = nodes[0].partition
    assert old_leader.is_leader and old_leader.leader_epoch == 0  # never heard of epoch 1
    assert old_leader.pending_alter_partition is not None
    assert old_leader.pending_alter_partition.new_isr == (0,)
    assert old_leader.maximal_isr == {0, 1, 2}
    assert "lonely" not in cluster.acked_payloads()
    assert cluster.leader_is(1) and cluster.controller.leader_epoch == 1


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_simulation_catches_broken_replication_rules(mutation, monkeypatch):
    """A check that cannot fail proves nothing: break one rule, the simulation must notice."""
    owner, name, replacement = MUTATIONS[mutation]
    monkeypatch.setattr(owner, name, replacement)
    with pytest.raises(AssertionError, match="seed"):
        for seed in range(SEEDS):
            for overrides in ({}, {"use_last_fetched_epoch": True}):
                run_seed(seed, chaos_config(**overrides))


def _lost_acknowledged(cluster: Cluster) -> set[str]:
    leader_log = cluster.nodes[cluster.controller.leader].log
    kept = {b.payload for b in cluster.acked_set if b.next_offset > leader_log.log_start_offset}
    return kept - {b.payload for b in leader_log.batches}


@pytest.mark.parametrize(
    "overrides",
    [{}, {"replica_count": 5, "min_insync_replicas": 3}],
    ids=["rf3_min_isr_2", "rf5_min_isr_3"],
)
def test_power_failures_of_the_last_isr_member_lose_no_acknowledged_record(overrides):
    """Issue 14 / KIP-966: the last ISR member loses its unflushed tail and restarts; the
    controller elects an eligible leader replica rather than it, and every check holds."""
    totals = {"acked": 0, "under_min_isr_power_failures": 0, "lost": 0}
    config = {"under_min_isr_power_failure_probability": 0.2, **overrides}
    for seed in range(SEEDS):
        cluster = run_seed(seed, chaos_config(**config))
        totals["acked"] += len(cluster.acked)
        totals["under_min_isr_power_failures"] += cluster.under_min_isr_power_failures
        totals["lost"] += len(_lost_acknowledged(cluster))
    assert totals["lost"] == 0, totals
    assert totals["under_min_isr_power_failures"] > SEEDS // 10, totals
    assert totals["acked"] > SEEDS, totals


def test_the_controller_before_kip_966_loses_acknowledged_records_there():
    """The same faults against the old rules (the last ISR member stays in the ISR and leads
    again when it returns, however it restarted): the checks catch the loss."""
    with pytest.raises(AssertionError, match=r"seed \d+: acked .* missing"):
        for seed in range(SEEDS):
            config = chaos_config(under_min_isr_power_failure_probability=0.2, elr=False)
            run_seed(seed, config)
