"""Recovery progress: LogManager reports each partition log it loads (index of total, with a
duration), and `quorumlog node`'s progress bar consumes exactly those reports."""

from __future__ import annotations

from log.storage.manager import LogManager
from tools.node_cmd import RecoveryProgress


def test_log_manager_reports_each_loaded_log(tmp_path):
    manager = LogManager(tmp_path)
    for topic, partition in (("a", 0), ("a", 1), ("b", 0)):
        manager.get_or_create_log(topic, partition)
    manager.shutdown()
    (tmp_path / "a-7.0123abcd-delete").mkdir()  # a log being deleted: not counted, not loaded
    (tmp_path / "not-a-partition").mkdir()

    reports = []
    reopened = LogManager(tmp_path, on_log_loaded=lambda *args: reports.append(args))
    assert [(t, p, i, n) for t, p, _, i, n in reports] == [
        ("a", 0, 1, 3),
        ("a", 1, 2, 3),
        ("b", 0, 3, 3),
    ]
    assert all(elapsed_ms >= 0 for _, _, elapsed_ms, _, _ in reports)
    assert set(reopened.logs) == {("a", 0), ("a", 1), ("b", 0)}
    reopened.shutdown()
    assert LogManager(tmp_path).logs.keys() == reopened.logs.keys()  # no hook: same result


def test_recovery_progress_bar_ends_with_the_last_log():
    progress = RecoveryProgress()
    progress("a", 0, 1.0, 1, 2)
    assert progress._progress is not None and progress._progress.live.is_started
    progress("a", 1, 1.0, 2, 2)
    assert not progress._progress.live.is_started
    progress.stop()  # idempotent
