"""Progress bars: the counter the benchmark's send loop feeds, the bar's lifecycle, and
`perf produce` with the bar on against the real cluster (same report, every record acked)."""

from __future__ import annotations

import pytest

from tools.perf_cmd import run_produce_benchmark
from tools.progress import CountedValues, polled_progress


def test_counted_values_counts_iteration_and_slices():
    values = CountedValues(range(10))
    assert values.handed_out == 0
    taken = []
    for value in values:
        taken.append(value)
        assert values.handed_out == len(taken)
    assert taken == list(range(10))
    sliced = CountedValues(range(10))
    assert sliced[0:4] == [0, 1, 2, 3] and sliced.handed_out == 4
    assert sliced[4:100] == list(range(4, 10)) and sliced.handed_out == 10
    assert sliced[3] == 3 and sliced.handed_out == 10  # an index is not a hand-out


def test_polled_progress_polls_and_stops():
    calls = []
    with polled_progress("work", 10, lambda: calls.append(1) or len(calls)):
        pass
    with pytest.raises(ZeroDivisionError):  # the block's error passes through, thread stopped
        with polled_progress("work", 10, lambda: 0):
            1 / 0  # noqa: B018


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("bulk", [False, True])
def test_perf_produce_with_progress(bootstrap, bulk):
    report = run_produce_benchmark(
        bootstrap=bootstrap, topic="perf-progress", records=3000, record_size=50,
        acks="1", bulk=bulk, show_progress=True,
    )  # fmt: skip
    assert report["acknowledged"] == 3000 and report["records_per_s"] > 0
