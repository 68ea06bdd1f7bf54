"""Property tests: random controller-driven histories, invariants after every batch, and
checkpoint + tail == full replay."""

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from quorum_core_harness import Cluster, check_image_invariants

from quorum import controller as ctl
from quorum.records import (
    ActiveControllerRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
)
from quorum.state_machine import MetadataStateMachine


def _random_step(cluster: Cluster, rng: random.Random, clock: dict) -> None:
    image = cluster.image
    # Weighted so that topics, heartbeats and ISR changes dominate (deletes are rarer).
    op = rng.choices(range(12), weights=[2, 6, 2, 4, 1, 4, 2, 1, 2, 2, 1, 1])[0]
    brokers = sorted(image.brokers)
    if op == 0 or not brokers:
        request = ctl.BrokerRegistrationRequest(
            rng.randrange(5), uuid.UUID(int=rng.getrandbits(128)), ()
        )
        cluster.apply(ctl.register_broker(image, request)[0])
    elif op == 1:
        b = rng.choice(brokers)
        request = ctl.BrokerHeartbeatRequest(
            b, image.brokers[b].broker_epoch, cluster.offset, want_fence=rng.random() < 0.1
        )
        clock[b] = clock["now"]
        cluster.apply(ctl.heartbeat(image, request)[0])
    elif op == 2:
        clock["now"] += rng.randrange(0, 300)
        heartbeats = {b: clock.get(b, 0) for b in brokers}
        cluster.apply(ctl.fence_expired_brokers(image, heartbeats, clock["now"], 200)[0])
    elif op == 3:
        topic = ctl.CreatableTopic(f"t{rng.randrange(6)}", rng.randrange(1, 4), rng.randrange(1, 4))
        records, _ = ctl.create_topics(
            image,
            ctl.CreateTopicsRequest((topic,)),
            start_index=rng.randrange(10),
            topic_ids=[uuid.UUID(int=rng.getrandbits(128))],
        )
        cluster.apply(records)
    elif op == 4 and image.topics:
        name = rng.choice(sorted(image.topic_ids_by_name))
        cluster.apply(ctl.delete_topics(image, ctl.DeleteTopicsRequest((name,)))[0])
    elif op == 5 and image.topics:
        topic_id, p, state = rng.choice(list(image.iter_partitions()))
        if state.leader >= 0:
            isr = [state.leader] + [
                b for b in state.replicas if b != state.leader and rng.random() < 0.6
            ]
            request = ctl.AlterPartitionRequest(
                state.leader,
                image.brokers[state.leader].broker_epoch,
                topic_id,
                p,
                state.leader_epoch,
                state.partition_epoch - (1 if rng.random() < 0.1 else 0),
                tuple(isr),
            )
            cluster.apply(ctl.alter_partition(image, request)[0])
    elif op == 6:
        b = rng.choice(brokers)
        epoch = image.brokers[b].broker_epoch - (1 if rng.random() < 0.2 else 0)
        cluster.apply(ctl.allocate_producer_ids(image, ctl.AllocateProducerIdsRequest(b, epoch))[0])
    elif op == 7:
        b = rng.choice(brokers)
        request = ctl.ControlledShutdownRequest(b, image.brokers[b].broker_epoch)
        cluster.apply(ctl.controlled_shutdown(image, request)[0])
    elif op == 8 and image.topics:
        name = rng.choice(sorted(image.topic_ids_by_name))
        count = len(image.topic(name).partitions) + rng.randrange(0, 3)
        request = ctl.CreatePartitionsRequest((ctl.CreatePartitionsTopic(name, count),))
        cluster.apply(ctl.create_partitions(image, request, start_index=rng.randrange(5))[0])
    elif op == 9:
        # A hostile or stale batch: must be rejected whole or keep the invariants.
        choice = rng.randrange(5)
        if choice == 0:
            cluster.apply([NoOpRecord()], controller_epoch=cluster.controller_epoch - 1)
        elif choice == 1:
            cluster.apply(
                [
                    ProducerIdsRecord(
                        brokers[0], image.brokers[brokers[0]].broker_epoch, rng.randrange(0, 5000)
                    )
                ]
            )
        elif choice == 2 and image.topics:
            topic_id, p, state = rng.choice(list(image.iter_partitions()))
            bogus = PartitionChangeRecord(
                topic_id,
                p,
                state.leader_epoch,
                state.partition_epoch + 1,
                isr=tuple(rng.sample(state.replicas, len(state.replicas))),
            )
            cluster.apply([bogus])
        elif choice == 3:
            b = rng.choice(brokers)
            cluster.apply([FenceBrokerRecord(b, image.brokers[b].broker_epoch)])
        else:
            cluster.apply_raw(rng.randbytes(rng.randrange(40)))
    elif op == 10:
        # Controller fail-over: the new controller commits its ActiveControllerRecord first.
        cluster.controller_epoch += 1
        cluster.apply(
            [ActiveControllerRecord(rng.randrange(3), cluster.controller_epoch)],
            gap=rng.randrange(3),
        )
    else:
        cluster.apply([NoOpRecord()], gap=rng.randrange(2))


def _epochs(image):
    return {
        (topic_id, p): (s.leader_epoch, s.partition_epoch)
        for topic_id, p, s in image.iter_partitions()
    }


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 60), st.data())
def test_random_histories_keep_invariants_and_checkpoint_plus_tail_equals_full(seed, steps, data):
    rng = random.Random(seed)
    cluster = Cluster()
    clock = {"now": 0}
    checkpoints = []
    for _ in range(steps):
        before = cluster.image
        _random_step(cluster, rng, clock)
        after = cluster.image
        check_image_invariants(after)
        assert after.last_offset >= before.last_offset
        assert after.next_producer_id >= before.next_producer_id
        assert after.controller_epoch >= before.controller_epoch
        old = _epochs(before)
        for key, (leader_epoch, partition_epoch) in _epochs(after).items():
            if key in old:
                assert leader_epoch >= old[key][0] and partition_epoch >= old[key][1]
        checkpoints.append((len(cluster.payloads), cluster.sm.to_checkpoint()))

    # Full replay from scratch on a fresh node gives the same image...
    fresh = MetadataStateMachine()
    for offset, payload in cluster.payloads:
        fresh.apply(offset, payload)
    assert fresh.image == cluster.image
    # ...and so does any checkpoint plus the tail after it.
    applied, blob = data.draw(st.sampled_from(checkpoints))
    restored = MetadataStateMachine.from_checkpoint(blob)
    for offset, payload in cluster.payloads[applied:]:
        restored.apply(offset, payload)
    assert restored.image == cluster.image
    assert restored.to_checkpoint() == cluster.sm.to_checkpoint()


def test_fixed_seed_history_exercises_the_interesting_operations():
    """Guard against the property test silently doing nothing."""
    rng = random.Random(1234)
    cluster = Cluster()
    clock = {"now": 0}
    leader_epochs = []
    for _ in range(400):
        _random_step(cluster, rng, clock)
        check_image_invariants(cluster.image)
        leader_epochs.extend(s.leader_epoch for _, _, s in cluster.image.iter_partitions())
    accepted = len(cluster.payloads) - cluster.sm.rejected_count
    assert accepted > 100 and cluster.sm.rejected_count > 10
    assert cluster.image.next_producer_id > 0 and cluster.image.controller_epoch > 1
    assert max(leader_epochs) >= 2  # leadership really moved around
