"""A full disk when a broker becomes leader: the partition is not left refusing as NOT_LEADER
forever. Real fault: the log directory is a 1 MiB tmpfs filled up (root only)."""

from __future__ import annotations

import os

import pytest

from log.replication.replica_manager import RETRY_FAILED_INTERVAL_MS, ReplicaManager
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from quorum.controller import CreatableTopic, CreateTopicsRequest
from quorum.records import PartitionChangeRecord
from tests.broker.conftest import LocalQuorum, node_config
from tests.disk_faults import fill_up, small_tmpfs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", "1m") as mount:
        yield mount


async def test_leadership_taken_on_a_full_disk_is_retried_once_there_is_room(
    tmp_path, small_disk, caplog
):
    config = node_config(tmp_path, **{"log.dirs": str(small_disk / "logs")})
    quorum = LocalQuorum()
    for broker_id in (1, 2):
        quorum.register(broker_id, "127.0.0.1", 9092 + broker_id)
    manager = LogManager(config.log_dir, default_log_config(config))
    hosted = ReplicaManager(config, manager, quorum, quorum, clock_ms=lambda: 0)
    await quorum.create_topics(CreateTopicsRequest((CreatableTopic("t", 1, 2, {}),)))
    topic_id = quorum.image.topic_ids_by_name["t"]

    def move_leader(to: int) -> None:
        state = quorum.image.topic("t").partitions[0]
        quorum.commit([PartitionChangeRecord(topic_id, 0, leader=to,
                       leader_epoch=state.leader_epoch + 1,
                       partition_epoch=state.partition_epoch + 1)])  # fmt: skip
        hosted.apply_image(quorum.image, now_ms=0)

    if quorum.image.topic("t").partitions[0].leader == 1:
        hosted.apply_image(quorum.image, now_ms=0)
        move_leader(2)
    else:
        hosted.apply_image(quorum.image, now_ms=0)
    assert not hosted.get("t", 0).is_leader
    filler = fill_up(small_disk)
    move_leader(1)  # the leader-epoch checkpoint cannot be written: ENOSPC
    assert "applying t-0 failed" in caplog.text and "No space left" in caplog.text
    assert not hosted.get("t", 0).is_leader
    hosted.retry_failed(now_ms=RETRY_FAILED_INTERVAL_MS)  # still full: still not leader
    assert not hosted.get("t", 0).is_leader
    os.remove(filler)
    hosted.retry_failed(now_ms=2 * RETRY_FAILED_INTERVAL_MS)
    partition = hosted.get("t", 0)
    assert partition.is_leader
    leader_epoch = quorum.image.topic("t").partitions[0].leader_epoch
    checkpoint = (config.log_dir / "t-0" / "leader-epoch-checkpoint").read_text()
    assert checkpoint.splitlines()[-1].split()[0] == str(leader_epoch), checkpoint
    hosted.log_manager.shutdown()


def test_a_directory_with_a_failed_append_is_not_marked_clean(small_disk):
    """ENOSPC cuts an append off: the shutdown that follows writes no clean-shutdown marker,
    so the next start recovers the log (and keeps every batch that was appended)."""
    from log.common.errors import KafkaStorageError
    from log.records.builder import Record, build_batch
    from log.storage.clean_shutdown import has_clean_shutdown_marker

    log_dir = small_disk / "logs"
    manager = LogManager(log_dir)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(build_batch([Record(b"kept")]), 0, 0)
    filler = fill_up(small_disk)
    with pytest.raises(KafkaStorageError):
        for _ in range(1000):
            log.append_as_leader(build_batch([Record(b"x" * 4096)]), 0, 0)
    os.remove(filler)  # room for the checkpoints: only the failed append is held against it
    manager.shutdown()
    assert not has_clean_shutdown_marker(log_dir)

    again = LogManager(log_dir)
    assert not again.had_clean_shutdown
    assert again.get_log("t", 0).log_end_offset == 1
    again.shutdown()
    assert has_clean_shutdown_marker(log_dir)  # that start dealt with it: clean again
