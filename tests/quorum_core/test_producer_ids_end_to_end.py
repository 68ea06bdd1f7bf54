"""No producer id is ever handed out twice: brokers' ProducerIdManagers fed by the controller
through the replicated state machine, with racing allocations decided on stale images, broker
restarts (new broker epoch, fresh manager) and controller fail-over from a checkpoint."""

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from quorum_core_harness import Cluster

from log.common.errors import CoordinatorLoadInProgressError
from quorum.controller import (
    AllocateProducerIdsRequest,
    BrokerRegistrationRequest,
    activate_controller,
    allocate_producer_ids,
    register_broker,
)
from quorum.producer_id_manager import ProducerIdManager
from quorum.state_machine import MetadataStateMachine


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32))
def test_no_producer_id_twice_across_restarts_and_failover(seed):
    rng = random.Random(seed)
    cluster = Cluster()
    managers = {}
    for b in range(3):
        managers[b] = ProducerIdManager(b, cluster.add_broker(b))
    handed_out: set[int] = set()
    stale_image = cluster.image
    pending = []  # (broker_id, image the controller decides on)
    # 3,000 ms of simulated time, and on until more than one block's worth was handed out: a
    # run of failed allocations (each backs off 1 s) can leave fewer after 3,000 ms (seed
    # 1397327: 956), which says nothing about uniqueness.
    for now_ms in range(30_000):
        if now_ms >= 3000 and len(handed_out) > 1000:
            break
        b = rng.randrange(3)
        manager = managers[b]
        action = manager.poll_action(now_ms)
        if action is not None:
            # Sometimes the controller decides on an old image (a pipelined proposal).
            pending.append((action, stale_image if rng.random() < 0.3 else None))
        if pending and rng.random() < 0.2:
            action, image = pending.pop(rng.randrange(len(pending)))
            image = image or cluster.image
            records, response = allocate_producer_ids(
                image, AllocateProducerIdsRequest(action.broker_id, action.broker_epoch)
            )
            target = managers[action.broker_id]
            if response.error_code == 0 and cluster.apply(records).accepted:
                target.on_block_allocated(response.producer_id_start, response.producer_id_len)
            else:
                target.on_allocation_failed(now_ms)
        if rng.random() < 0.002:  # broker restart: new incarnation, new epoch, empty manager
            request = BrokerRegistrationRequest(b, uuid.uuid4(), ())
            records, response = register_broker(cluster.image, request)
            cluster.commit(records)
            managers[b] = ProducerIdManager(b, response.broker_epoch)
            pending = [(a, i) for a, i in pending if a.broker_id != b]
        if rng.random() < 0.002:  # controller fail-over: a new node restored from a checkpoint
            restored = MetadataStateMachine.from_checkpoint(cluster.sm.to_checkpoint())
            assert restored == cluster.sm
            cluster.sm = restored
            cluster.controller_epoch += 1
            cluster.commit(activate_controller(rng.randrange(3), cluster.controller_epoch))
        if rng.random() < 0.05:
            stale_image = cluster.image
        try:
            producer_id = manager.generate_producer_id()
        except CoordinatorLoadInProgressError:
            continue
        assert producer_id not in handed_out
        handed_out.add(producer_id)
    assert len(handed_out) > 1000
    assert max(handed_out) < cluster.image.next_producer_id
