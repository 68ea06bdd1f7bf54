"""GcTuning: the collector is tuned while producers are open and restored after the last."""

from __future__ import annotations

import gc

import pytest

from producer.gc_tuning import YOUNG_THRESHOLD, GcTuning


@pytest.fixture(autouse=True)
def restore_gc():
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if enabled:
        gc.enable()
    else:
        gc.disable()


def _still_frozen(frozen: int) -> bool:
    """The freeze of `frozen` objects was neither undone (unfreeze: 0) nor done again. Frozen
    objects may be freed meanwhile (threads of earlier tests drop theirs), so the count may
    only fall, never to 0."""
    return 0 < gc.get_freeze_count() <= frozen


def test_tuned_while_open_and_restored_after_the_last_exit():
    tuning = GcTuning()
    tuning.enter()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    frozen = gc.get_freeze_count()
    assert frozen > 0
    tuning.enter()  # a second producer changes nothing
    assert _still_frozen(frozen)
    tuning.exit()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert _still_frozen(frozen)
    tuning.exit()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
    assert tuning.active_count == 0


def test_an_applications_own_settings_are_kept():
    tuning = GcTuning()
    gc.set_threshold(50_000, 20, 20)
    tuning.enter()
    assert gc.get_threshold() == (50_000, 20, 20)
    tuning.exit()
    assert gc.get_threshold() == (50_000, 20, 20)
    # changed by the application while a producer ran: not reset at exit
    tuning.enter()
    gc.set_threshold(900, 10, 10)
    tuning.exit()
    assert gc.get_threshold() == (900, 10, 10)


def test_an_applications_freeze_is_not_undone():
    gc.freeze()
    frozen = gc.get_freeze_count()
    tuning = GcTuning()
    tuning.enter()
    tuning.exit()
    assert _still_frozen(frozen)


def test_nothing_is_done_with_the_collector_disabled():
    gc.disable()
    tuning = GcTuning()
    tuning.enter()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
    gc.enable()  # enabled meanwhile: exit still restores nothing it did not change
    tuning.exit()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_exit_without_enter_is_a_bug():
    with pytest.raises(AssertionError):
        GcTuning().exit()
