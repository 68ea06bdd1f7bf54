"""quorum.raft_checkpoint.CheckpointFiles on real files: newest few kept, damaged ones flagged.

(Ported from the file tests of quorum.checkpoint's former write_checkpoint/load_newest_checkpoint,
now with the state of a real MetadataStateMachine inside the Raft checkpoint file.)"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "quorum_core"))

from quorum_core_harness import Cluster  # noqa: E402

from quorum.raft_checkpoint import (  # noqa: E402
    CheckpointFiles,
    CorruptCheckpointFileError,
    RaftCheckpoint,
    checkpoint_file_name,
    encode_checkpoint,
)
from quorum.records import NoOpRecord  # noqa: E402
from quorum.state_machine import MetadataStateMachine  # noqa: E402


def write(files: CheckpointFiles, state_machine: MetadataStateMachine) -> str:
    """What the Raft binding's serializer does: fsynced bytes, then publish (a hard link)."""
    offset = state_machine.last_applied_offset
    checkpoint = RaftCheckpoint(
        offset, 1, offset - 1, 1, b"\x00l", b"\x00p", state_machine.to_checkpoint()
    )
    source = os.path.join(files.directory, "raft.checkpoint.tmp")
    with open(source, "wb") as f:
        f.write(encode_checkpoint(checkpoint))
    path = files.publish(offset, source)
    os.replace(source, os.path.join(files.directory, "raft.checkpoint"))  # pysyncobj's rename
    return path


def newest_valid(files: CheckpointFiles) -> MetadataStateMachine | None:
    for _, _, found in files.read_all():
        if isinstance(found, RaftCheckpoint):
            return MetadataStateMachine.from_checkpoint(found.state)
    return None


def cluster_with_data() -> Cluster:
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    cluster.create_topic("orders", 3, 2)
    return cluster


def test_publish_keeps_newest_three_and_the_newest_loads(tmp_path):
    files = CheckpointFiles(str(tmp_path), keep=3)
    cluster = cluster_with_data()
    offsets = []
    for _ in range(5):
        cluster.commit([NoOpRecord()])
        write(files, cluster.sm)
        offsets.append(cluster.sm.last_applied_offset)
    assert [o for o, _ in files.list()] == offsets[::-1][:3]
    names = sorted(checkpoint_file_name(o) for o in offsets[-3:]) + ["raft.checkpoint"]
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    assert files.retain_from_index() == offsets[-3] - 1  # the oldest kept one's prev entry
    # raft.checkpoint (what pysyncobj sends followers) is the newest file, not a copy.
    assert os.path.samefile(tmp_path / "raft.checkpoint", files.list()[0][1])
    loaded = newest_valid(files)
    assert loaded == cluster.sm and loaded.last_applied_offset == offsets[-1]


def test_damaged_newest_is_flagged_and_the_older_one_still_loads(tmp_path):
    files = CheckpointFiles(str(tmp_path), keep=3)
    cluster = cluster_with_data()
    write(files, cluster.sm)
    older = MetadataStateMachine.from_checkpoint(cluster.sm.to_checkpoint())
    cluster.create_topic("later", 1, 1)
    newest_path = write(files, cluster.sm)
    with open(newest_path, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\xff\xff\xff")
    found = [x for _, _, x in files.read_all()]
    assert isinstance(found[0], CorruptCheckpointFileError) and isinstance(found[1], RaftCheckpoint)
    loaded = newest_valid(files)
    assert loaded == older and loaded.image.topic("later") is None
    files.quarantine(newest_path)
    assert [p for _, p in files.list()] == [files.list()[0][1]] and os.path.exists(
        newest_path + ".corrupt"
    )
    # Truncate the older one too: nothing trustworthy left.
    with open(files.list()[0][1], "r+b") as f:
        f.truncate(10)
    assert newest_valid(files) is None


def test_a_file_whose_name_disagrees_with_its_content_is_damaged(tmp_path):
    files = CheckpointFiles(str(tmp_path))
    cluster = cluster_with_data()
    path = write(files, cluster.sm)
    os.rename(path, tmp_path / checkpoint_file_name(cluster.sm.last_applied_offset + 5))
    ((_, _, found),) = list(files.read_all())
    assert isinstance(found, CorruptCheckpointFileError)


def test_no_files_stale_tmp_and_unrelated_files(tmp_path):
    files = CheckpointFiles(str(tmp_path))
    (tmp_path / "unrelated.txt").write_text("x")
    (tmp_path / (checkpoint_file_name(5) + ".tmp")).write_bytes(b"partial")
    assert files.list() == [] and files.retain_from_index() is None
    files.remove_stale_tmp()
    assert os.listdir(tmp_path) == ["unrelated.txt"]


def test_remove_all_but_keeps_only_the_installed_snapshot(tmp_path):
    files = CheckpointFiles(str(tmp_path))
    cluster = cluster_with_data()
    for _ in range(3):
        cluster.commit([NoOpRecord()])
        write(files, cluster.sm)
    installed = files.list()[1][0]
    files.remove_all_but(installed)
    assert [o for o, _ in files.list()] == [installed]


def test_metadata_command_offline_skips_a_damaged_newest_checkpoint(tmp_path):
    from tools.metadata_cmd import read_offline

    metadata_dir = tmp_path / "metadata"
    metadata_dir.mkdir()
    files = CheckpointFiles(str(metadata_dir))
    cluster = cluster_with_data()
    write(files, cluster.sm)
    older = MetadataStateMachine.from_checkpoint(cluster.sm.to_checkpoint())
    cluster.create_topic("later", 1, 1)
    newest_path = write(files, cluster.sm)
    machine, _ = read_offline(tmp_path)
    assert machine == cluster.sm
    with open(newest_path, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\xff\xff\xff")
    machine, lines = read_offline(tmp_path)
    assert machine == older and machine.image.topic("later") is None
    assert any("skipped damaged checkpoint" in str(line) for _, line in lines)


def test_prune_drops_the_extra_a_crash_left_but_never_the_protected_one(tmp_path):
    files = CheckpointFiles(str(tmp_path), keep=2)
    cluster = cluster_with_data()
    for _ in range(2):
        cluster.commit([NoOpRecord()])
        write(files, cluster.sm)
    oldest = files.list()[-1][0]
    files.keep = 1  # as if a kill came between the newest publish and its prune
    files.prune(protect=oldest)
    assert len(files.list()) == 2
    files.prune()
    assert [o for o, _ in files.list()] == [cluster.sm.last_applied_offset]
