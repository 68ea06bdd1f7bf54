"""DeliveryHandle: what `Producer.send` returns, the future of one record's delivery.

`await handle.wait()` gives the record's RecordMetadata (topic, partition, offset, timestamp)
or raises its error; `done`, `error`, `result()` and `add_callback(callback)` (called with a
handle on completion, at once if already complete) are the synchronous side, for drivers and
callbacks. Every handle completes exactly once.

Two kinds, one interface:

* `bulk.ColumnarRecordHandle`: a record `send` appended to an open ColumnarBatch (records
  without headers, the common case). It is only a reference to its batch and its index in it;
  offset and timestamp are read from the batch when asked (base offset + index), so the
  batch keeps no per-record handle unless a callback was added.
* `RecordDeliveryHandle`: wraps the eager `producer_batch.RecordHandle` of a record appended
  to a ProducerBatch (records with headers). Its callbacks get the RecordHandle.

The awaiting lives here, in a driver module, because the batches and RecordHandle are sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from producer.producer_batch import RecordHandle, RecordMetadata


class DeliveryHandle:
    """One record's delivery; see the module docstring."""

    __slots__ = ()

    @property
    def done(self) -> bool:
        raise NotImplementedError

    @property
    def error(self) -> BaseException | None:
        raise NotImplementedError

    def result(self) -> RecordMetadata:
        """The delivered record's metadata; raises its error if delivery failed."""
        raise NotImplementedError

    def add_callback(self, callback: Callable[[Any], None]) -> None:
        raise NotImplementedError

    @property
    def record_handle(self) -> Any:
        """What callbacks receive and what `wait_all` takes: the handle itself, or for a
        RecordDeliveryHandle the RecordHandle it wraps (the API before handles were lazy)."""
        return self

    async def wait(self) -> RecordMetadata:
        """Wait for delivery: RecordMetadata, or the record's error raised."""
        await wait_completed(self)
        return self.result()


class RecordDeliveryHandle(DeliveryHandle):
    """A DeliveryHandle over an eager RecordHandle (a record with headers)."""

    __slots__ = ("_handle",)

    def __init__(self, handle: RecordHandle) -> None:
        self._handle = handle

    @property
    def done(self) -> bool:
        return self._handle.done

    @property
    def error(self) -> BaseException | None:
        return self._handle.error

    @property
    def record_handle(self) -> RecordHandle:
        return self._handle

    def result(self) -> RecordMetadata:
        return self._handle.result()

    def add_callback(self, callback: Callable[[Any], None]) -> None:
        self._handle.add_callback(callback)


async def wait_completed(handle: DeliveryHandle | RecordHandle) -> None:
    """Wait for a record's completion without raising its error."""
    if not handle.done:
        event = trio.Event()
        handle.add_callback(lambda _handle: event.set())
        await event.wait()
