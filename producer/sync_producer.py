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

However the thread ends other than by `close()` (one of the producer's tasks failed, the
loop returned early), its last act fails every Future still open: queued commands, the ones
being run, records awaiting delivery. From then on every call (send, flush, close) raises
ProducerThreadEndedError at once. Its __cause__ is what ended the thread.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

import trio

from producer.delivery_handle import DeliveryHandle
from producer.errors import ProducerClosedError, ProducerThreadEndedError, root_error
from producer.producer import Producer, build_config
from producer.producer_batch import RecordHandle

if TYPE_CHECKING:
    from producer.bulk import BulkDelivery

DEFAULT_MAX_PENDING_COMMANDS = 10000
_COMMANDS_PER_TURN = 1000  # how many queued commands the trio side takes at once


def _settle(future: Future, handle: DeliveryHandle | RecordHandle) -> None:
    if handle.error is not None:
        _set_exception(future, handle.error)
    else:
        _set_result(future, handle.result())


# A caller may cancel a Future we hold (then setting it raises InvalidStateError): that must
# not raise inside the trio loop, where it would end the producer's tasks and thread.
def _set_result(future: Future, value: object) -> None:
    try:
        future.set_result(value)
    except InvalidStateError:
        pass


def _set_exception(future: Future, error: BaseException) -> None:
    try:
        future.set_exception(error)
    except InvalidStateError:
        pass


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
        # The trio side's own: commands taken off the queue and not yet run to the end, and
        # send/send_many Futures that wait for their records' delivery.
        self._taken: collections.deque[tuple[str, tuple, Future]] = collections.deque()
        self._unsettled: set[Future] = set()
        self._condition = threading.Condition()
        self._closed = False
        self._served_close = False  # the loop stopped because `close` asked it to
        self._serve_error: BaseException | None = None  # what ended the serving loop
        self._end_cause: BaseException | None = None  # set when the thread ended uncleanly
        self._thread_ended = False
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
        error: BaseException | None = None
        try:
            trio.run(self._main)
        except BaseException as exc:  # every end of the thread is reported: see _end
            error = exc
        finally:
            self._end(error)

    async def _main(self) -> None:
        async with Producer(config=_as_properties(self.config)) as producer:
            self._token = trio.lowlevel.current_trio_token()
            self._wakeup = trio.Event()
            self._started.set()
            try:
                await self._serve(producer)
            except BaseException as exc:  # Cancelled by a failed task; the nursery may eat it
                self._serve_error = exc
                raise

    async def _serve(self, producer: Producer) -> None:
        taken = self._taken
        while True:
            assert self._wakeup is not None
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            while True:
                with self._condition:
                    count = min(len(self._commands), _COMMANDS_PER_TURN)
                    for _ in range(count):
                        taken.append(self._commands.popleft())
                    self._condition.notify_all()
                if not taken:
                    break
                while taken:
                    kind, args, future = taken[0]
                    closing = await self._run_command(producer, kind, args, future)
                    taken.popleft()  # only once run: a command cut short is failed by _end
                    if closing:
                        self._served_close = True
                        return

    async def _run_command(
        self, producer: Producer, kind: str, args: tuple, future: Future
    ) -> bool:
        """Run one command; True when it was `close`."""
        unsettled = self._unsettled
        try:
            if kind == "send":
                handle = await producer.send(*args)  # the inline path, when it applies
                unsettled.add(future)

                def on_record_done(done: DeliveryHandle | RecordHandle) -> None:
                    unsettled.discard(future)
                    _settle(future, done)

                handle.add_callback(on_record_done)
            elif kind == "send_encoded":
                deliveries = [await producer.send_encoded(*item) for item in args[0]]
                unsettled.add(future)
                remaining = [len(deliveries)]

                def on_one_done(_done: BulkDelivery) -> None:
                    remaining[0] -= 1
                    if not remaining[0]:
                        unsettled.discard(future)
                        _set_result(future, deliveries)

                for delivery in deliveries:
                    delivery.add_callback(on_one_done)
                if not deliveries:
                    unsettled.discard(future)
                    _set_result(future, deliveries)
            elif kind == "send_many":
                delivery = await producer.send_many(*args)
                unsettled.add(future)

                def on_bulk_done(done: BulkDelivery) -> None:
                    unsettled.discard(future)
                    _set_result(future, done)

                delivery.add_callback(on_bulk_done)
            elif kind == "flush":
                await producer.flush()
                _set_result(future, None)
            elif kind == "partition_count":
                _set_result(future, await producer.partition_count(*args))
            elif kind == "transaction":
                name, call_args = args
                method = getattr(producer, name)
                result = method(*call_args)
                if name != "begin_transaction":  # the others are coroutines
                    result = await result
                _set_result(future, result)
            else:
                assert kind == "close"
                try:
                    await producer.close(args[0])
                except Exception as exc:
                    _set_exception(future, exc)
                else:
                    _set_result(future, None)
                return True  # stop serving either way: `close()` joins the thread
        except Exception as exc:
            _set_exception(future, exc)
        return False

    def _end(self, error: BaseException | None) -> None:
        """The thread's last act, however it ends: no Future may wait on it any more."""
        clean = error is None and self._served_close
        cause = error if error is not None else self._serve_error
        with self._condition:
            if not clean:
                self._end_cause = root_error(cause) if cause is not None else None
            self._closed = True
            self._thread_ended = True
            pending = [*self._taken, *self._commands]
            self._taken.clear()
            self._commands.clear()
            self._condition.notify_all()
        futures = [future for _kind, _args, future in pending] + list(self._unsettled)
        self._unsettled.clear()
        if not self._started.is_set():
            self._startup_error = error or self._ended_error()
        self._started.set()
        for future in futures:
            if not future.done():
                _set_exception(future, self._ended_error())

    def _ended_error(self) -> ProducerThreadEndedError:
        cause = self._end_cause
        if cause is None:
            error = ProducerThreadEndedError(
                "the producer's thread ended: its trio loop returned without close()"
            )
        else:
            error = ProducerThreadEndedError(f"the producer's thread ended: {cause!r}")
        error.__cause__ = cause
        return error

    # -- the caller side ------------------------------------------------------------------------

    def _submit(self, kind: str, args: tuple) -> Future:
        future: Future = Future()
        with self._condition:
            while len(self._commands) >= self._max_pending and not self._closed:
                self._condition.wait()
            if self._closed:
                if self._thread_ended and not self._served_close:
                    raise self._ended_error()
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
                pass  # the thread is ending: its _end fails this command's Future
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

    def send_encoded(self, batches: Sequence[tuple]) -> Future:
        """Queue batches of already-encoded records, each the arguments of
        Producer.send_encoded (topic, partition, keys, values, records[, timestamp_range,
        has_headers]), in one hand-over to the producer's
        thread. The Future resolves to their BulkDeliveries, in order, once all are
        complete (each may have failed: see its `error`)."""
        return self._submit("send_encoded", (list(batches),))

    def flush(self, timeout_s: float | None = None) -> None:
        """Block until everything sent before this call is complete."""
        self._submit("flush", ()).result(timeout_s)

    def partition_count(self, topic: str) -> Future:
        """A Future of the topic's partition count (Producer.partition_count): asked at once,
        so that the metadata request overlaps whatever the caller does until it needs it."""
        return self._submit("partition_count", (topic,))

    # Transactions (transactional.id set): Producer's methods, run on the producer's thread.
    def init_transactions(self, keep_prepared_txn: bool = False) -> Any:
        return self._submit("transaction", ("init_transactions", (keep_prepared_txn,))).result()

    def begin_transaction(self) -> None:
        self._submit("transaction", ("begin_transaction", ())).result()

    def prepare_transaction(self) -> tuple[int, int]:
        result: tuple[int, int] = self._submit("transaction", ("prepare_transaction", ())).result()
        return result

    def commit_transaction(self) -> None:
        self._submit("transaction", ("commit_transaction", ())).result()

    def abort_transaction(self) -> None:
        self._submit("transaction", ("abort_transaction", ())).result()

    def close(self, timeout_ms: int | None = None) -> None:
        """Deliver (or, after `timeout_ms`, abort) what is pending; stop and join the thread.

        Raises ProducerThreadEndedError when the thread had ended (or ends meanwhile) for
        another reason: what was pending then was not delivered."""
        with self._condition:
            already_closed = self._closed
        try:
            if not already_closed:
                try:
                    self._submit("close", (timeout_ms,)).result()
                except ProducerClosedError:
                    pass  # closed by another thread meanwhile, or ended: see below
        finally:
            self._thread.join()
        if not self._served_close:
            raise self._ended_error()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close(0)
        except ProducerThreadEndedError as ended:
            # The exception already on its way out is the one to report; say this too.
            if isinstance(exc, BaseException):
                exc.add_note(f"quorumlog: {ended} (cause: {ended.__cause__!r})")


def _as_properties(config: Any) -> dict[str, object]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
