"""Disk faults while a broker takes a partition over, with real faults.

- A full disk (a 1 MiB tmpfs filled up; root only) is a log directory failure, Kafka's way: the
  directory goes offline, its partitions answer KAFKA_STORAGE_ERROR instead of NOT_LEADER
  forever, nothing more is written there (no checkpoint, no clean-shutdown marker) and the
  ReplicaManager stops the broker (LogDirFailedError), so leadership moves to replicas
  elsewhere.
- Running out of descriptors is the process's trouble, not the disk's: the partition's change
  fails, the directory stays online, and the change is retried until it works.
- A failed append leaves the directory unmarked: the next start recovers it.
"""

from __future__ import annotations

import contextlib
import os
import resource

import pytest
import trio

from log.common.errors import ErrorCode, KafkaStorageError
from log.replication.replica_manager import RETRY_FAILED_INTERVAL_MS, ReplicaManager
from log.storage.clean_shutdown import has_clean_shutdown_marker
from log.storage.config import default_log_config
from log.storage.log_dir_failure_channel import LogDirFailedError
from log.storage.manager import LogManager
from quorum.controller import CreatableTopic, CreateTopicsRequest
from quorum.records import PartitionChangeRecord
from tests.broker.conftest import LocalQuorum, node_config
from tests.disk_faults import fill_up, small_tmpfs


@pytest.fixture
def small_disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", "1m") as mount:
        yield mount


async def _follower_of_two(config):
    """Broker 1's ReplicaManager, following t-0 (RF 2) led by broker 2; and a way to move the
    leadership."""
    quorum = LocalQuorum()
    for broker_id in (1, 2):
        quorum.register(broker_id, "127.0.0.1", 9092 + broker_id)
    manager = LogManager(config.log_dir, default_log_config(config))
    replicas = ReplicaManager(config, manager, quorum, quorum, clock_ms=lambda: 0)
    await quorum.create_topics(CreateTopicsRequest((CreatableTopic("t", 1, 2, {}),)))
    topic_id = quorum.image.topic_ids_by_name["t"]

    def move_leader(to: int) -> None:
        state = quorum.image.topic("t").partitions[0]
        quorum.commit([PartitionChangeRecord(topic_id, 0, leader=to,
                       leader_epoch=state.leader_epoch + 1,
                       partition_epoch=state.partition_epoch + 1)])  # fmt: skip
        replicas.apply_image(quorum.image, now_ms=0)

    replicas.apply_image(quorum.image, now_ms=0)
    if quorum.image.topic("t").partitions[0].leader == 1:
        move_leader(2)
    assert not replicas.get("t", 0).is_leader
    return quorum, replicas, move_leader


async def test_a_full_disk_takes_the_log_directory_offline_and_stops_the_broker(
    tmp_path, small_disk, caplog
):
    config = node_config(tmp_path, **{"log.dirs": str(small_disk / "logs")})
    quorum, replicas, move_leader = await _follower_of_two(config)
    with pytest.RaisesGroup(LogDirFailedError, flatten_subgroups=True):
        async with trio.open_nursery() as nursery:
            await nursery.start(replicas.run)
            fill_up(small_disk)
            move_leader(1)  # the leader-epoch checkpoint cannot be written: ENOSPC
            await trio.sleep(1)
            raise AssertionError("the broker did not stop")
    assert "applying t-0 failed" in caplog.text and "No space left" in caplog.text
    assert "is offline" in caplog.text
    assert replicas.log_manager.is_offline
    with pytest.raises(KafkaStorageError) as refused:
        replicas.leader("t", 0, quorum.image)
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    move_leader(2)
    move_leader(1)  # later images change nothing on an offline directory
    assert not replicas.get("t", 0).is_leader
    replicas.log_manager.shutdown()
    assert not has_clean_shutdown_marker(config.log_dir)


@contextlib.contextmanager
def no_free_descriptors():
    """Lower RLIMIT_NOFILE to the lowest free descriptor number: every open() in the block
    fails with EMFILE (a real shortage; nothing else runs meanwhile: the block is sync)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_running_out_of_descriptors_is_retried_and_keeps_the_directory_online(
    tmp_path, caplog
):
    config = node_config(tmp_path)
    quorum, replicas, move_leader = await _follower_of_two(config)
    with no_free_descriptors():
        move_leader(1)  # the leader-epoch checkpoint cannot be opened: EMFILE
    assert "applying t-0 failed" in caplog.text and "Too many open files" in caplog.text
    assert not replicas.log_manager.is_offline
    assert not replicas.get("t", 0).is_leader
    with no_free_descriptors():
        replicas.retry_failed(now_ms=RETRY_FAILED_INTERVAL_MS)  # still short: still not leader
    assert not replicas.get("t", 0).is_leader
    replicas.retry_failed(now_ms=2 * RETRY_FAILED_INTERVAL_MS)
    partition = replicas.get("t", 0)
    assert partition.is_leader
    leader_epoch = quorum.image.topic("t").partitions[0].leader_epoch
    checkpoint = (config.log_dir / "t-0" / "leader-epoch-checkpoint").read_text()
    assert checkpoint.splitlines()[-1].split()[0] == str(leader_epoch), checkpoint
    replicas.log_manager.shutdown()
    assert has_clean_shutdown_marker(config.log_dir)


def test_a_directory_with_a_failed_append_is_not_marked_clean(small_disk):
    """ENOSPC cuts an append off: the shutdown that follows writes no clean-shutdown marker,
    so the next start recovers the log (and keeps every batch that was appended)."""
    from log.records.builder import Record, build_batch

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
