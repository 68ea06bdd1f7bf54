"""KafkaPeer: a minimal single-node Kafka-protocol broker for the producer driver tests.

Not the product's broker (that is log/server, branch `broker`): a small trio server on top of
the sans-IO `ServerConnection`, keeping batches in memory, with the broker behaviour the
producer tests need and librdkafka's mock cluster lacks:

- idempotence as Kafka does it: per (producer id, partition) the last 5 batches' sequence
  ranges; a retried batch already written is answered with its original base offset (no
  duplicate append); a gap is OUT_OF_ORDER_SEQUENCE_NUMBER;
- `max_message_bytes`: a batch larger than this is refused with MESSAGE_TOO_LARGE;
- fault hooks: `drop_responses` (append the next N produce requests but drop the connection
  instead of answering: the client cannot know they were written).

APIs: ApiVersions, Metadata (topics auto-created with `partitions` partitions),
InitProducerId, Produce, Fetch, ListOffsets.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import trio

from log.common.errors import ErrorCode
from log.protocol.apis import api_versions_body
from log.protocol.connection import NEED_DATA, PAUSED, BadRequest, ServerConnection
from log.protocol.fetch import FETCH_RESPONSE
from log.protocol.metadata import METADATA_RESPONSE
from log.protocol.offsets import LIST_OFFSETS_RESPONSE
from log.protocol.produce import PRODUCE_RESPONSE
from log.protocol.producer_id import INIT_PRODUCER_ID_RESPONSE
from log.records.batch_header import NO_PRODUCER_ID, read_header, set_base_offset

PRODUCER_STATE_BATCHES = 5  # Kafka keeps the metadata of the last 5 batches per producer


class KafkaPeer:
    def __init__(self, *, partitions: int = 4, max_message_bytes: int = 1 << 20) -> None:
        self.partitions = partitions
        self.max_message_bytes = max_message_bytes
        self.node_id = 0
        self.port = 0
        self.logs: dict[tuple[str, int], list[tuple[int, bytes]]] = defaultdict(list)
        self.log_end_offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.producer_states: dict[tuple[int, str, int], list[tuple[int, int, int, int]]] = (
            defaultdict(list)
        )
        self.next_producer_id = 1000
        self.drop_responses = 0
        self.produce_request_count = 0
        self.duplicate_count = 0
        self.refused_too_large = 0
        self._scope: trio.CancelScope | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as self._scope:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            task_status.started(self)
            await trio.serve_listeners(self._handle, listeners)

    def stop(self) -> None:
        assert self._scope is not None
        self._scope.cancel()

    async def _handle(self, stream: trio.SocketStream) -> None:
        connection = ServerConnection()
        async with stream:
            while True:
                try:
                    data = await stream.receive_some(1 << 20)
                except trio.BrokenResourceError:
                    return
                if not data:
                    return
                connection.receive_data(data)
                while (request := connection.next_request()) not in (NEED_DATA, PAUSED):
                    if isinstance(request, BadRequest):
                        return
                    body = self._dispatch(request)
                    if body is None:
                        return  # drop the connection instead of answering
                    if request.expects_response:
                        out = connection.send_response(request, body)
                    else:
                        out = connection.no_response(request)
                    if out:
                        await stream.send_all(out)

    def _dispatch(self, request: Any) -> Any:
        api_key = request.api_key
        if api_key == 18:
            return api_versions_body()
        if api_key == 3:
            return self._metadata(request.body)
        if api_key == 22:
            self.next_producer_id += 1
            return INIT_PRODUCER_ID_RESPONSE.cls(
                throttle_time_ms=0,
                error_code=0,
                producer_id=self.next_producer_id,
                producer_epoch=0,
            )
        if api_key == 0:
            return self._produce(request.body)
        if api_key == 1:
            return self._fetch(request.body)
        if api_key == 2:
            return self._list_offsets(request.body)
        raise AssertionError(f"KafkaPeer does not handle api {api_key}")

    def _metadata(self, body: Any) -> Any:
        cls = METADATA_RESPONSE.cls
        topics = []
        for topic in body.topics or []:
            partitions = [
                cls.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=0,
                    partition_index=p,
                    leader_id=self.node_id,
                    leader_epoch=0,
                    replica_nodes=[self.node_id],
                    isr_nodes=[self.node_id],
                )
                for p in range(self.partitions)
            ]
            topics.append(
                cls.MetadataResponseTopic(error_code=0, name=topic.name, partitions=partitions)
            )
        return cls(
            brokers=[
                cls.MetadataResponseBroker(node_id=self.node_id, host="127.0.0.1", port=self.port)
            ],
            cluster_id="kafka-peer",
            controller_id=self.node_id,
            topics=topics,
        )

    def _produce(self, body: Any) -> Any:
        self.produce_request_count += 1
        cls = PRODUCE_RESPONSE.cls
        topics = []
        for topic in body.topic_data:
            partitions = []
            for partition in topic.partition_data:
                code, base_offset = self._append(topic.name, partition.index, partition.records)
                partitions.append(
                    cls.TopicProduceResponse.PartitionProduceResponse(
                        index=partition.index, error_code=code, base_offset=base_offset
                    )
                )
            topics.append(cls.TopicProduceResponse(name=topic.name, partition_responses=partitions))
        if self.drop_responses > 0:
            self.drop_responses -= 1
            return None
        return cls(responses=topics)

    def _append(self, topic: str, partition: int, records: Any) -> tuple[int, int]:
        data = bytearray(records)
        if len(data) > self.max_message_bytes:
            self.refused_too_large += 1
            return ErrorCode.MESSAGE_TOO_LARGE, -1
        header = read_header(data, 0)
        assert header.size_bytes == len(data), "one batch per partition"
        key = (topic, partition)
        state = None
        if header.producer_id != NO_PRODUCER_ID:
            state = self.producer_states[(header.producer_id, topic, partition)]
            first, last = header.base_sequence, header.last_sequence
            for epoch, seq_first, seq_last, offset in state:
                if (epoch, seq_first, seq_last) == (header.producer_epoch, first, last):
                    self.duplicate_count += 1
                    return ErrorCode.NONE, offset
            expected = state[-1][2] + 1 if state else 0
            if state and header.producer_epoch != state[-1][0]:
                expected = 0
            if first != expected:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        base_offset = self.log_end_offsets[key]
        set_base_offset(data, 0, base_offset)
        self.logs[key].append((base_offset, bytes(data)))
        self.log_end_offsets[key] = base_offset + header.record_count
        if state is not None:
            state.append((header.producer_epoch, first, last, base_offset))
            del state[:-PRODUCER_STATE_BATCHES]
        return ErrorCode.NONE, base_offset

    def _fetch(self, body: Any) -> Any:
        cls = FETCH_RESPONSE.cls
        topics = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                key = (topic.topic, p.partition)
                chunks, size = [], 0
                for base_offset, data in self.logs.get(key, []):
                    last_offset = base_offset + read_header(data, 0).record_count - 1
                    if last_offset < p.fetch_offset:
                        continue
                    if chunks and size + len(data) > p.partition_max_bytes:
                        break
                    chunks.append(data)
                    size += len(data)
                partitions.append(
                    cls.FetchableTopicResponse.PartitionData(
                        partition_index=p.partition,
                        error_code=0,
                        high_watermark=self.log_end_offsets[key],
                        last_stable_offset=self.log_end_offsets[key],
                        log_start_offset=0,
                        records=b"".join(chunks),
                    )
                )
            topics.append(cls.FetchableTopicResponse(topic=topic.topic, partitions=partitions))
        return cls(error_code=0, session_id=0, responses=topics)

    def _list_offsets(self, body: Any) -> Any:
        cls = LIST_OFFSETS_RESPONSE.cls
        topics = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                end = self.log_end_offsets[(topic.name, p.partition_index)]
                offset = 0 if p.timestamp == -2 else end
                partitions.append(
                    cls.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=0, timestamp=-1, offset=offset
                    )
                )
            topics.append(cls.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        return cls(topics=topics)


def batches_of(peer: KafkaPeer, topic: str, partition: int) -> list[Any]:
    """The stored batch headers of a partition, in offset order."""
    return [read_header(data, 0) for _, data in peer.logs.get((topic, partition), [])]
