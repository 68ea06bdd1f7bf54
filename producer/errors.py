"""Client-side producer failures, typed and carrying the Kafka error code a user would expect.

Kafka's client raises `TimeoutException` (REQUEST_TIMED_OUT) both when `buffer.memory` stays
exhausted for `max.block.ms` and when a batch outlives `delivery.timeout.ms`.
"""

from __future__ import annotations

from log.common.errors import ErrorCode, KafkaError


class BufferExhaustedError(KafkaError):
    """No memory became free in the buffer pool within max_block_ms."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class DeliveryTimeoutError(KafkaError):
    """A batch was not acknowledged within delivery_timeout_ms of its creation."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class ProducerClosedError(KafkaError):
    """The producer (or its buffer pool / accumulator) was closed while the call was pending."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class ProducerThreadEndedError(ProducerClosedError):
    """A SyncProducer's thread ended (its trio loop failed or returned) without `close()`: the
    call was pending then, or came later. `__cause__` is what ended it."""


def root_error(error: BaseException) -> BaseException:
    """The one error inside nested single-member exception groups (what a failed trio task
    raised), else `error` itself."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error
