"""Progress bars: the counter the benchmark's send loop feeds, the bar's lifecycle, and
`perf produce` and `perf consume` with the bar on against the real cluster."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from tools.perf_cmd import run_produce_benchmark
from tools.perf_consume import run_consume_benchmark
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


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", ["quorumlog", "confluent"])
def test_perf_consume_reads_what_is_there(bootstrap, client):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "perf-read", "-p", "3", "--if-not-exists"])
    if client == "quorumlog":  # the first run fills the topic for both
        run_cli(["produce", *b, "-t", "perf-read"], input="".join(f"{i:04}\n" for i in range(900)))
    whole = json.loads(run_cli(["perf", "consume", *b, "--topic", "perf-read", "--client",
                                client, "--json"]).stdout)  # fmt: skip
    assert whole["records"] == 900 and whole["bytes"] == 900 * 4 and whole["records_per_s"] > 0
    some = run_consume_benchmark(
        bootstrap=bootstrap, topic="perf-read", records=250, client=client, show_progress=True
    )
    assert some["records"] == 250
    run_cli(["topics", "create", *b, "-t", "perf-empty", "--if-not-exists"])
    empty = run_cli(["perf", "consume", *b, "--topic", "perf-empty", "--client", client],
                    exit_code=1)  # fmt: skip
    assert "no records" in empty.stderr
    missing = run_cli(["perf", "consume", *b, "--topic", "perf-missing"], exit_code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
