"""SyncProducer: the trio Producer for synchronous callers (Spark executors, scripts).

    with SyncProducer("127.0.0.1:9092", linger_ms=5) as producer:
        future = producer.send("events", b"value", key=b"k")   # concurrent.futures.Future
        producer.send_many("events", values)                    # Future of a BulkDelivery
        producer.flush()
    future.result()                                             # RecordMetadata

Each SyncProducer owns one thread running `trio.run`, with a Producer inside it. Calls from
any thread append a command to a bounded queue (`max_pending_commands`; a full queue blocks the
caller: back-pressure reaches it) and wake the trio side with `TrioToken.run_sync_soon` only
when the queue was empty, so a burst of sends costs one wake-up. The trio side appends the
records (blocking there for metadata or buffer memory, at most max.block.ms) and completes
each Future from the record's handle callback. `close()` delivers everything, stops the loop
and joins the thread: nothing (thread, event loop, socket) outlives it, so producers can be
created and closed any number of times.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import trio

from producer.delivery_handle import DeliveryHandle
from producer.errors import ProducerClosedError
from producer.producer import Producer, build_config
from producer.producer_batch import RecordHandle

DEFAULT_MAX_PENDING_COMMANDS = 10000
_COMMANDS_PER_TURN = 1000  # how many queued commands the trio side takes at once


def _settle(future: Future, handle: DeliveryHandle | RecordHandle) -> None:
    if handle.error is not None:
        future.set_exception(handle.error)
    else:
        future.set_result(handle.result())


class SyncProducer:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        config: Mapping[str, object] | None = None,
        *,
        max_pending_commands: int = DEFAULT_MAX_PENDING_COMMANDS,
        **overrides: object,
    ) -> None:
        assert max_pending_commands >= 1
        self.config = build_config(bootstrap_servers, config, overrides)  # fail fast, here
        self._max_pending = max_pending_commands
        self._commands: collections.deque[tuple[str, tuple, Future]] = collections.deque()
        self._condition = threading.Condition()
        self._closed = False
        self._token: trio.lowlevel.TrioToken | None = None
        self._wakeup: trio.Event | None = None
        self._started = threading.Event()
        self._startup_error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._thread_main, name="quorumlog-producer", daemon=True
        )
        self._thread.start()
        self._started.wait()
        if self._startup_error is not None:
            self._thread.join()
            raise self._startup_error

    # -- the trio side --------------------------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to the constructor or to pending futures
            if not self._started.is_set():
                self._startup_error = exc
            self._fail_pending(exc)
        finally:
            self._started.set()

    async def _main(self) -> None:
        async with Producer(config=_as_properties(self.config)) as producer:
            self._token = trio.lowlevel.current_trio_token()
            self._wakeup = trio.Event()
            self._started.set()
            await self._serve(producer)

    async def _serve(self, producer: Producer) -> None:
        while True:
            assert self._wakeup is not None
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            while True:
                with self._condition:
                    count = min(len(self._commands), _COMMANDS_PER_TURN)
                    commands = [self._commands.popleft() for _ in range(count)]
                    self._condition.notify_all()
                if not commands:
                    break
                for kind, args, future in commands:
                    if await self._run_command(producer, kind, args, future):
                        return

    async def _run_command(
        self, producer: Producer, kind: str, args: tuple, future: Future
    ) -> bool:
        """Run one command; True when it was `close`."""
        try:
            if kind == "send":
                handle = await producer.send(*args)  # the inline path, when it applies
                handle.add_callback(lambda h, f=future: _settle(f, h))
            elif kind == "send_many":
                delivery = await producer.send_many(*args)
                delivery.add_callback(lambda d, f=future: f.set_result(d))
            elif kind == "flush":
                await producer.flush()
                future.set_result(None)
            else:
                assert kind == "close"
                await producer.close(args[0])
                future.set_result(None)
                return True
        except Exception as exc:
            future.set_exception(exc)
        return False

    def _fail_pending(self, error: BaseException) -> None:
        with self._condition:
            self._closed = True
            commands = list(self._commands)
            self._commands.clear()
            self._condition.notify_all()
        for _kind, _args, future in commands:
            if not future.done():
                future.set_exception(ProducerClosedError(f"producer thread ended: {error!r}"))

    # -- the caller side ------------------------------------------------------------------------

    def _submit(self, kind: str, args: tuple) -> Future:
        future: Future = Future()
        with self._condition:
            while len(self._commands) >= self._max_pending and not self._closed:
                self._condition.wait()
            if self._closed:
                raise ProducerClosedError("producer is closed")
            was_empty = not self._commands
            self._commands.append((kind, args, future))
            if kind == "close":
                self._closed = True
        if was_empty:
            assert self._token is not None
            try:
                self._token.run_sync_soon(self._wake)
            except trio.RunFinishedError:
                raise ProducerClosedError("producer thread has stopped") from None
        return future

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[Any] | None = None,
        timestamp_ms: int | None = None,
    ) -> Future:
        """Queue one record; the Future resolves to RecordMetadata or the delivery error."""
        return self._submit("send", (topic, value, key, partition, headers, timestamp_ms))

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future:
        """Queue many records at once (the bulk path); the Future resolves to the BulkDelivery
        once every record is complete: `.check()` raises the first error, `.results()` gives
        [RecordMetadata] in call order."""
        return self._submit("send_many", (topic, values, keys, partition, timestamp_ms))

    send_batch = send_many

    def flush(self, timeout_s: float | None = None) -> None:
        """Block until everything sent before this call is complete."""
        self._submit("flush", ()).result(timeout_s)

    def close(self, timeout_ms: int | None = None) -> None:
        """Deliver (or, after `timeout_ms`, abort) what is pending; stop and join the thread."""
        with self._condition:
            already_closed = self._closed
        if not already_closed and self._thread.is_alive():
            try:
                self._submit("close", (timeout_ms,)).result()
            except ProducerClosedError:
                pass
        self._thread.join()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close(None if exc_info[0] is None else 0)


def _as_properties(config: Any) -> dict[str, object]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
