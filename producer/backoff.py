"""Exponential retry backoff, capped: the delay before the n-th retry is `base_ms * 2**(n-1)`,
at most `max_ms` (Kafka's retry.backoff.ms / retry.backoff.max.ms). Pure arithmetic; callers
add jitter where Kafka does (the accumulator's produce retries)."""

from __future__ import annotations

MAX_DOUBLINGS = 62  # past this every base >= 1 is far beyond any cap; keeps the int small


def backoff_ms(base_ms: int, retry: int, max_ms: int) -> int:
    """The delay before retry number `retry` (1 = the first retry)."""
    assert retry >= 1
    return min(base_ms * 2 ** min(retry - 1, MAX_DOUBLINGS), max_ms)
