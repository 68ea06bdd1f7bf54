"""The ReplicaManager driven by real metadata images (controller decisions + replay), no network."""

from __future__ import annotations

import dataclasses

from log.replication.replica_manager import LISTED_REPLICATION_CHANGES, ReplicaManager
from log.storage.config import default_log_config, topic_log_config
from log.storage.manager import LogManager
from quorum.records import PartitionChangeRecord
from tests.broker.conftest import LocalQuorum, node_config


async def test_leader_follower_deletion_and_configs(tmp_path):
    config = node_config(tmp_path, **{"log.segment.bytes": 123456})
    quorum = LocalQuorum()
    quorum.register(1, "127.0.0.1", 9092)
    quorum.register(2, "127.0.0.1", 9093)
    manager = LogManager(config.log_dir, default_log_config(config))
    hosted = ReplicaManager(config, manager, quorum, quorum, clock_ms=lambda: 0)
    from quorum.controller import AlterConfigsRequest, CreatableTopic, CreateTopicsRequest

    await quorum.create_topics(
        CreateTopicsRequest((CreatableTopic("t", 2, 1, {"retention.ms": "1000"}),))
    )
    hosted.apply_image(quorum.image)
    leaders = {p: s.leader for p, s in quorum.image.topic("t").partitions.items()}
    mine = [p for p, leader in leaders.items() if leader == 1]
    theirs = [p for p, leader in leaders.items() if leader == 2]
    assert mine and theirs  # round-robin placement over brokers 1 and 2
    partition = hosted.get("t", mine[0])
    assert partition.is_leader and partition.leader_epoch == 0
    assert partition.log.config.segment_bytes == 123456  # node default
    assert partition.log.config.retention_ms == 1000  # topic override
    assert hosted.get("t", theirs[0]) is None  # not a replica here

    # Leadership moves away (as a reassignment to broker 2 would do): stop leading.
    topic_id = quorum.image.topic_ids_by_name["t"]
    state = quorum.image.topic("t").partitions[mine[0]]
    quorum.commit([PartitionChangeRecord(topic_id, mine[0], leader_epoch=state.leader_epoch + 1,
                   partition_epoch=state.partition_epoch + 1, replicas=(1, 2), isr=(2,),
                   leader=2)])  # fmt: skip
    old_event = partition.high_watermark_changed
    hosted.apply_image(quorum.image)
    assert not partition.is_leader and partition.leader_epoch == 1
    assert old_event.is_set()  # waiters woke up to notice

    await quorum.alter_topic_configs(AlterConfigsRequest("t", {"retention.ms": "2000"}))
    hosted.apply_image(quorum.image)
    assert manager.get_log("t", mine[0]).config.retention_ms == 2000

    from quorum.controller import DeleteTopicsRequest

    await quorum.delete_topics(DeleteTopicsRequest(("t",)))
    hosted.apply_image(quorum.image)
    assert manager.get_log("t", mine[0]) is None and hosted.get("t", mine[0]) is None


def test_topic_config_merge_ignores_unmodelled_and_bad_keys(tmp_path):
    base = default_log_config(node_config(tmp_path))
    assert topic_log_config(base, {"compression.type": "zstd"}) is base
    merged = topic_log_config(base, {"retention.ms": "5", "compression.type": "zstd"})
    assert merged == dataclasses.replace(base, retention_ms=5)
    assert topic_log_config(base, {"segment.bytes": "1"}) is base  # below the floor: kept base


async def _broker_1_of_3(tmp_path, partitions: int):
    """Broker 1's ReplicaManager in a 3-broker LocalQuorum, topic "t" RF 3 applied."""
    from quorum.controller import CreatableTopic, CreateTopicsRequest

    config = node_config(tmp_path)
    quorum = LocalQuorum()
    for broker_id in (1, 2, 3):
        quorum.register(broker_id, "127.0.0.1", 9092 + broker_id)
    manager = LogManager(config.log_dir, default_log_config(config))
    hosted = ReplicaManager(config, manager, quorum, quorum, clock_ms=lambda: 0)
    await quorum.create_topics(CreateTopicsRequest((CreatableTopic("t", partitions, 3, {}),)))
    hosted.apply_image(quorum.image)
    return quorum, hosted, quorum.image.topic_ids_by_name["t"]


async def test_the_leader_warns_once_when_its_partition_runs_below_its_replicas(tmp_path, caplog):
    quorum, hosted, topic_id = await _broker_1_of_3(tmp_path, partitions=3)
    (mine,) = [p for p, s in quorum.image.topic("t").partitions.items() if s.leader == 1]

    def change_isr(isr: tuple[int, ...]) -> None:
        state = quorum.image.topic("t").partitions[mine]
        quorum.commit([PartitionChangeRecord(topic_id, mine, leader_epoch=state.leader_epoch,
                       partition_epoch=state.partition_epoch + 1, isr=isr)])  # fmt: skip
        hosted.apply_image(quorum.image)

    def lines(level: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelname == level
                and f"t-{mine} " in r.getMessage()]  # fmt: skip

    caplog.set_level("INFO", logger="log.replication.replica_manager")
    assert not lines("WARNING")  # created whole
    change_isr((1, 2))
    change_isr((1,))
    assert lines("WARNING") == [f"partition t-{mine} is under-replicated: isr=1,2 replicas="
                                f"{','.join(map(str, quorum.image.topic('t').partitions[mine].replicas))}"
                                " (writes are on 2 of 3 replicas)"]  # fmt: skip
    change_isr((1, 2, 3))
    assert lines("INFO")[-1] == f"partition t-{mine} is fully replicated again: isr=1,2,3"
    assert len(lines("WARNING")) == 1


async def test_many_partitions_going_under_replicated_at_once_make_one_line(tmp_path, caplog):
    """A broker's death leaves every partition it replicated under-replicated in one image:
    the leader logs one WARNING with the count and the first few, not a line per partition
    (and one INFO when they are whole again)."""
    quorum, hosted, topic_id = await _broker_1_of_3(tmp_path, partitions=30)
    mine = [p for p, s in quorum.image.topic("t").partitions.items() if s.leader == 1]
    assert len(mine) > LISTED_REPLICATION_CHANGES

    def set_isr(drop: int | None) -> None:
        records = []
        for p in mine:
            state = quorum.image.topic("t").partitions[p]
            isr = tuple(b for b in state.replicas if b != drop)
            records.append(PartitionChangeRecord(topic_id, p, leader_epoch=state.leader_epoch,
                           partition_epoch=state.partition_epoch + 1, isr=isr))  # fmt: skip
        quorum.commit(records)
        hosted.apply_image(quorum.image)

    caplog.set_level("INFO", logger="log.replication.replica_manager")
    set_isr(drop=3)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{len(mine)} partitions changed: t-")
    assert f"and {len(mine) - LISTED_REPLICATION_CHANGES} more like it" in warnings[0]
    set_isr(drop=None)
    whole = [r.getMessage() for r in caplog.records if "fully replicated again" in r.getMessage()]
    assert len(whole) == 1 and whole[0].startswith(f"{len(mine)} partitions changed: ")
