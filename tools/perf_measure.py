"""What the perf commands and the benchmarks measure with: a run's wall and CPU window, per-send
latencies, and one percentile definition.

`percentile` is kafka-producer-perf-test's: the sample at index int(fraction * count) of the
sorted samples (clamped to the last one), so p50/p99 mean the same here, in bench/ and in Kafka's
tool. `LatencyLog.timer()` is taken just before a send and handed to the client as its
acknowledgement callback: it records the milliseconds from the send call to the callback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass
class RunWindow:
    """The timed part of one run: wall seconds and this process's CPU seconds (every thread's,
    so librdkafka's and kafka-python's I/O threads count), from the first send to the last
    acknowledgement; connecting and warming up happen before `begin`."""

    wall_start_s: float = 0.0
    cpu_start_s: float = 0.0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0

    def begin(self) -> None:
        self.wall_start_s, self.cpu_start_s = time.perf_counter(), time.process_time()

    def end(self) -> float:
        self.elapsed_s = time.perf_counter() - self.wall_start_s
        self.cpu_s = time.process_time() - self.cpu_start_s
        return self.elapsed_s


class LatencyLog:
    """Latencies in ms, one per acknowledged record, in the order the callbacks ran."""

    def __init__(self) -> None:
        self.ms: list[float] = []

    def timer(self, record_count: int = 1) -> _Acknowledgement:
        """A callback for a send of `record_count` records made now: when called (with any
        arguments), it records the time since, once per record."""
        return _Acknowledgement(self.ms, time.perf_counter(), record_count)


class _Acknowledgement:
    # One small object per send (not a closure with its cells): a run keeps up to hundreds of
    # thousands in flight, and fewer GC-tracked objects keep collections out of the timings.
    __slots__ = ("latencies_ms", "sent_at_s", "record_count")

    def __init__(self, latencies_ms: list[float], sent_at_s: float, record_count: int) -> None:
        self.latencies_ms = latencies_ms
        self.sent_at_s = sent_at_s
        self.record_count = record_count

    def __call__(self, *_: Any) -> None:
        latency_ms = (time.perf_counter() - self.sent_at_s) * 1000
        if self.record_count == 1:
            self.latencies_ms.append(latency_ms)
        else:
            self.latencies_ms.extend([latency_ms] * self.record_count)


def percentile(sorted_samples: list[float], fraction: float) -> float:
    """The sample at int(fraction * count) of ascending samples, clamped; NaN when empty."""
    if not sorted_samples:
        return float("nan")
    return sorted_samples[min(len(sorted_samples) - 1, int(fraction * len(sorted_samples)))]
