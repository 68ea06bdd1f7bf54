"""An acks=all Produce is answered by its timeout_ms, however many of its partitions wait (Kafka's
DelayedProduce has one deadline per request). Broker 1's ReplicaManager in a 3-broker
LocalQuorum whose followers never fetch, so no high watermark moves; trio's MockClock makes
the timeout virtual time, so the check is exact and costs no real seconds."""

from __future__ import annotations

import pytest
import trio

from log.common.errors import ErrorCode
from log.records.builder import Record, build_batch
from log.replication.replica_manager import ReplicaManager
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from quorum.controller import CreatableTopic, CreateTopicsRequest
from tests.broker.conftest import LocalQuorum, node_config


async def test_one_deadline_covers_every_partition_of_a_produce(tmp_path, autojump_clock):
    config = node_config(tmp_path)
    quorum = LocalQuorum()
    for broker_id in (1, 2, 3):
        quorum.register(broker_id, "127.0.0.1", 9092 + broker_id)
    replica_manager = ReplicaManager(
        config, LogManager(config.log_dir, default_log_config(config)), quorum, quorum,
        clock_ms=lambda: 0,
    )  # fmt: skip
    await quorum.create_topics(CreateTopicsRequest((CreatableTopic("t", 6, 3, {}),)))
    replica_manager.apply_image(quorum.image)
    mine = sorted(p for p, s in quorum.image.topic("t").partitions.items() if s.leader == 1)
    assert len(mine) >= 2  # round-robin leaders over three brokers

    batch = build_batch([Record(b"v")])
    results = replica_manager.append_records(-1, [("t", p, memoryview(batch)) for p in mine])
    assert all(r.error_code == ErrorCode.NONE and r.awaiting is not None for r in results)
    started = trio.current_time()
    await replica_manager.await_acks(results, 30_000)
    assert [r.error_code for r in results] == [ErrorCode.REQUEST_TIMED_OUT] * len(mine)
    assert trio.current_time() - started == pytest.approx(30.0)  # before: 30 s per partition
