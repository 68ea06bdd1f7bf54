"""TransactionClient: the transaction coordinator's requests, for the transactional producer and
for a process that ends another one's prepared transaction (KIP-939 two-phase commit).

    async with TransactionClient.open("127.0.0.1:9092") as client:
        init = await client.init_producer_id("job-7-p3", 60_000, enable_2pc=True,
                                             keep_prepared_txn=True)
        if init.ongoing == (producer_id, producer_epoch):
            await client.end_txn("job-7-p3", producer_id, producer_epoch, commit=True)

Each call finds the transactional id's coordinator (FindCoordinator key_type 1) and retries,
with backoff up to `request_timeout_ms` in all, what Kafka's TransactionManager retries:
COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS as they are, NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE (and a lost connection) after finding the coordinator again. Any
other error is raised as the KafkaError of its code.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import trio

from log.common.errors import ErrorCode, KafkaError, error_for
from log.protocol.coordinator import find_coordinator_request, single_coordinator
from log.protocol.producer_id import INIT_PRODUCER_ID_REQUEST
from log.protocol.transaction_admin import LIST_TRANSACTIONS_REQUEST
from log.protocol.transactions import ADD_PARTITIONS_TO_TXN_REQUEST, END_TXN_REQUEST
from producer.backoff import backoff_ms
from producer.connection import BrokerConnection, BrokerConnections, parse_bootstrap_servers
from producer.metadata import BrokerAddress, MetadataUpdater, ProducerMetadata

FIND_COORDINATOR_KEY = 10
INIT_PRODUCER_ID_KEY = 22
ADD_PARTITIONS_TO_TXN_KEY = 24
END_TXN_KEY = 26
LIST_TRANSACTIONS_KEY = 66
TRANSACTION_KEY_TYPE = 1
RETRY_BACKOFF_MAX_MS = 1000
_RETRY_SAME = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
LIST_TIMEOUT_MS = 60_000  # Kafka's default.api.timeout.ms, for ListTransactions' rounds
_RETRY_LIST = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_RETRY_FIND = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


@dataclasses.dataclass(frozen=True)
class InitResult:
    producer_id: int
    producer_epoch: int
    # KIP-939 keep_prepared_txn: the transaction left open, (-1, -1) when there is none
    ongoing: tuple[int, int] = (-1, -1)


class TransactionClient:
    def __init__(
        self,
        metadata: ProducerMetadata,
        connections: BrokerConnections,
        *,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        updater: MetadataUpdater | None = None,
    ) -> None:
        self.metadata = metadata
        self.updater = updater
        self.connections = connections
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._coordinators: dict[str, BrokerAddress] = {}  # transactional id -> coordinator

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "quorumlog-transactions",
        request_timeout_ms: int = 30000,
    ) -> AsyncIterator[TransactionClient]:
        """A client with its own connections, for a process that is not a producer."""
        async with trio.open_nursery() as nursery:
            connections = BrokerConnections(
                nursery, client_id=client_id, max_in_flight=5,
                request_timeout_ms=request_timeout_ms,
            )  # fmt: skip
            metadata = ProducerMetadata(parse_bootstrap_servers(bootstrap_servers))
            updater = MetadataUpdater(metadata, connections, request_timeout_ms=request_timeout_ms)
            nursery.start_soon(updater.run)
            try:
                yield cls(
                    metadata, connections, request_timeout_ms=request_timeout_ms, updater=updater
                )
            finally:
                updater.close()
                connections.close()
                nursery.cancel_scope.cancel()

    # -- the requests ---------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        *,
        enable_2pc: bool = False,
        keep_prepared_txn: bool = False,
    ) -> InitResult:
        request: Any = INIT_PRODUCER_ID_REQUEST.cls  # made at run time by schema.py: untyped
        body = request(
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            enable2_pc=enable_2pc,
            keep_prepared_txn=keep_prepared_txn,
        )
        version = 6 if enable_2pc or keep_prepared_txn else None
        response = await self._call(
            transactional_id, INIT_PRODUCER_ID_KEY, body, lambda r: r.error_code, version
        )
        ongoing = (
            getattr(response, "ongoing_txn_producer_id", -1),
            getattr(response, "ongoing_txn_producer_epoch", -1),
        )
        return InitResult(response.producer_id, response.producer_epoch, ongoing)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> None:
        """AddPartitionsToTxn (v3 and below: the client's own request)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request: Any = ADD_PARTITIONS_TO_TXN_REQUEST.cls
        body = request(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=[
                request.AddPartitionsToTxnTopic(name=t, partitions=sorted(p))
                for t, p in by_topic.items()
            ],
        )

        def first_error(response: Any) -> int:
            for topic in response.results_by_topic_v3_and_below:
                for result in topic.results_by_partition:
                    if result.partition_error_code != ErrorCode.NONE:
                        return int(result.partition_error_code)
            return ErrorCode.NONE

        await self._call(transactional_id, ADD_PARTITIONS_TO_TXN_KEY, body, first_error)

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, *, commit: bool
    ) -> None:
        request: Any = END_TXN_REQUEST.cls
        body = request(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=commit,
        )
        await self._call(transactional_id, END_TXN_KEY, body, lambda r: r.error_code)

    async def list_transactions(self, states: Sequence[str] = ()) -> list[tuple[str, int, str]]:
        """ListTransactions at every broker (each answers for the coordinators it leads):
        (transactional id, producer id, state name) for the states asked (all if none).

        As Kafka's admin client: a broker that cannot be reached or times out (a dead one not
        yet fenced) is asked again after the metadata is refreshed, until LIST_TIMEOUT_MS. A
        round with a failure is asked again whole, of the brokers the new metadata names: a
        dead broker's coordinators move to the others, which may have answered before that."""
        request: Any = LIST_TRANSACTIONS_REQUEST.cls
        body = request(state_filters=list(states), producer_id_filters=[])
        last: KafkaError | None = None
        attempt = 0
        with trio.move_on_after(LIST_TIMEOUT_MS / 1000):
            while True:
                await self._await_brokers()
                try:
                    return await self._list_round(body)
                except KafkaError as exc:
                    if exc.error_code not in _RETRY_LIST:
                        raise
                    last = exc
                if self.updater is not None:
                    self.updater.request_update()
                attempt += 1
                await trio.sleep(
                    backoff_ms(self.retry_backoff_ms, attempt, RETRY_BACKOFF_MAX_MS) / 1000
                )
        raise last or error_for(ErrorCode.REQUEST_TIMED_OUT, "ListTransactions")

    async def _await_brokers(self) -> None:
        with trio.fail_after(self.request_timeout_ms / 1000):
            while not self.metadata.brokers and self.updater is not None:
                self.updater.request_update()
                await self.updater.wait_for_update()
                if not self.metadata.brokers:
                    await trio.sleep(self.retry_backoff_ms / 1000)

    async def _list_round(self, body: Any) -> list[tuple[str, int, str]]:
        found: list[tuple[str, int, str]] = []
        for address in list(self.metadata.brokers.values()) or self.metadata.bootstrap:
            try:
                with trio.fail_after(self.request_timeout_ms / 1000):
                    connection = await self.connections.connected(
                        address.node_id, address.host, address.port
                    )
            except trio.TooSlowError:
                raise error_for(ErrorCode.REQUEST_TIMED_OUT, f"connecting to {address}") from None
            response = await connection.request(LIST_TRANSACTIONS_KEY, body)
            if response.error_code != ErrorCode.NONE:
                raise error_for(response.error_code, f"ListTransactions at {address}")
            found += [
                (t.transactional_id, t.producer_id, t.transaction_state)
                for t in response.transaction_states
            ]
        return found

    # -- finding the coordinator, retrying ------------------------------------------------------

    async def _call(
        self,
        transactional_id: str,
        api_key: int,
        body: Any,
        error_of: Callable[[Any], int],
        version: int | None = None,
    ) -> Any:
        last: KafkaError | None = None
        attempt = 0
        with trio.move_on_after(self.request_timeout_ms / 1000):
            while True:
                try:
                    connection = await self._coordinator(transactional_id)
                    response = await connection.request(api_key, body, version)
                    code = ErrorCode(error_of(response))
                except KafkaError as exc:
                    code = ErrorCode(exc.error_code)
                    if code not in _RETRY_FIND:
                        raise
                    last = exc
                else:
                    if code == ErrorCode.NONE:
                        return response
                    last = error_for(code, f"api {api_key} for {transactional_id!r}")
                    if code not in _RETRY_SAME and code not in _RETRY_FIND:
                        raise last
                if code in _RETRY_FIND:
                    self._coordinators.pop(transactional_id, None)
                attempt += 1
                await trio.sleep(
                    backoff_ms(self.retry_backoff_ms, attempt, RETRY_BACKOFF_MAX_MS) / 1000
                )
        raise last or error_for(ErrorCode.REQUEST_TIMED_OUT, f"api {api_key}: no coordinator")

    async def _coordinator(self, transactional_id: str) -> BrokerConnection:
        address = self._coordinators.get(transactional_id)
        if address is None:
            address = await self._find_coordinator(transactional_id)
            self._coordinators[transactional_id] = address
        return await self.connections.connected(address.node_id, address.host, address.port)

    async def _find_coordinator(self, transactional_id: str) -> BrokerAddress:
        body = find_coordinator_request(transactional_id, TRANSACTION_KEY_TYPE)
        error: KafkaError | None = None
        for address in self.metadata.candidate_nodes():
            try:
                connection = await self.connections.connected(
                    address.node_id, address.host, address.port
                )
                response = await connection.request(FIND_COORDINATOR_KEY, body)
            except KafkaError as exc:
                error = exc
                continue
            code, node_id, host, port = single_coordinator(response)
            if code == ErrorCode.NONE:
                return BrokerAddress(node_id, host, port)
            error = error_for(code, f"FindCoordinator {transactional_id!r}")
        raise error or error_for(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no broker answered")
