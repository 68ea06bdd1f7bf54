"""confluent-kafka's produce, waiting while librdkafka's local queue is full.

`Producer.produce` raises BufferError when the client's queue (queue.buffering.max.messages /
.kbytes) is full; polling serves delivery callbacks, which frees room. Every driver here that
pushes records as fast as it can (perf produce, the benchmarks) waits the same way.
"""

from __future__ import annotations

from typing import Any


def produce_waiting(
    producer: Any, topic: str, value: bytes, *, poll_s: float, **kwargs: Any
) -> None:
    """producer.produce(topic, value, **kwargs), polling `poll_s` seconds at a time until the
    local queue takes the record."""
    while True:
        try:
            producer.produce(topic, value, **kwargs)
            return
        except BufferError:
            producer.poll(poll_s)
