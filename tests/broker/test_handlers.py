"""The broker's handlers through the wire with our own ClientCodec: happy paths and error paths."""

from __future__ import annotations

import trio
import trio.testing

from log.common.errors import ErrorCode
from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.metadata import METADATA_REQUEST
from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, fetch_body, produce_body


def batch(n: int = 3, start: int = 0) -> bytes:
    return build_batch([Record(b"v%d" % i, key=b"k") for i in range(start, start + n)])


async def test_api_versions_advertise_what_we_handle(broker):
    client = await WireClient.connect(broker.port)
    body = await client.call(18, 2, API_VERSIONS_REQUEST.cls())
    keys = {entry.api_key for entry in body.api_keys}
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
            28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 42, 43, 44, 45, 46, 47, 50, 51, 55, 57, 60, 61, 65,
            66, 68, 69, 75} == keys  # fmt: skip
    await client.aclose()


async def test_metadata_lists_broker_and_auto_creates(broker):
    client = await WireClient.connect(broker.port)
    M = METADATA_REQUEST.cls
    body = await client.call(3, 8, M(topics=[M.MetadataRequestTopic(name="auto")]))
    assert [(b.node_id, b.port) for b in body.brokers] == [(1, broker.port)]
    assert body.controller_id == 1
    assert body.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    body = await client.call(3, 8, M(topics=[M.MetadataRequestTopic(name="auto")]))
    topic = body.topics[0]
    assert topic.error_code == 0 and len(topic.partitions) == 2
    assert all(p.leader_id == 1 and p.isr_nodes == [1] for p in topic.partitions)
    body = await client.call(
        3, 8, M(topics=[M.MetadataRequestTopic(name="no")], allow_auto_topic_creation=False)
    )
    assert body.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    body = await client.call(3, 8, M(topics=[M.MetadataRequestTopic(name="bad name!")]))
    assert body.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    await client.aclose()


async def test_metadata_answers_from_the_newest_image(broker):
    """A topic's entry is made once per metadata image and shared by the requests answered
    from it: repeated requests give the same answer, and one after a change shows it."""
    from log.protocol.admin import CREATE_PARTITIONS_REQUEST

    await broker.create_topic("grows", 2)
    client = await WireClient.connect(broker.port)
    M = METADATA_REQUEST.cls
    ask = M(topics=[M.MetadataRequestTopic(name="grows")], allow_auto_topic_creation=False)

    async def partitions():
        body = await client.call(3, 12, ask)
        (topic,) = body.topics
        assert topic.error_code == 0
        return [(p.partition_index, p.leader_id, p.isr_nodes) for p in topic.partitions]

    assert await partitions() == await partitions() == [(0, 1, [1]), (1, 1, [1])]
    C = CREATE_PARTITIONS_REQUEST.cls
    grown = await client.call(37, 3, C(timeout_ms=10_000, validate_only=False, topics=[
        C.CreatePartitionsTopic(name="grows", count=4, assignments=None)]))  # fmt: skip
    assert [(r.name, r.error_code) for r in grown.results] == [("grows", 0)]
    assert await partitions() == [(i, 1, [1]) for i in range(4)]
    await client.aclose()


async def test_produce_then_fetch(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    body = await client.call(0, 8, produce_body("t", 0, batch(3)))
    p = body.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset, p.log_append_time_ms) == (0, 0, -1)
    body = await client.call(0, 8, produce_body("t", 0, batch(2), acks=-1))
    assert body.responses[0].partition_responses[0].base_offset == 3
    body = await client.call(1, 11, fetch_body("t", 0, 0))
    data = body.responses[0].partitions[0]
    assert data.error_code == 0 and data.high_watermark == 5
    headers = [h for _, h in iter_batches(bytes(data.records))]
    assert [(h.base_offset, h.record_count) for h in headers] == [(0, 3), (3, 2)]
    await client.aclose()


async def test_produce_error_paths(broker):
    await broker.create_topic("t", 1, **{"max.message.bytes": "200"})
    client = await WireClient.connect(broker.port)

    async def code(topic, partition, records, acks=1):
        body = await client.call(0, 8, produce_body(topic, partition, records, acks))
        return body.responses[0].partition_responses[0].error_code

    assert await code("missing", 0, batch()) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await code("t", 7, batch()) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    corrupt = bytearray(batch())
    corrupt[-1] ^= 0xFF
    assert await code("t", 0, bytes(corrupt)) == ErrorCode.CORRUPT_MESSAGE
    assert await code("t", 0, batch(2)) == 0
    big = build_batch([Record(b"x" * 300)])
    assert await code("t", 0, big) == ErrorCode.MESSAGE_TOO_LARGE
    assert await code("t", 0, batch(), acks=2) == ErrorCode.INVALID_REQUIRED_ACKS
    # Nothing but the one good batch was appended.
    log = broker.server.log_manager.get_log("t", 0)
    assert log.log_end_offset == 2
    await client.aclose()


async def test_min_insync_replicas(broker):
    await broker.create_topic("strict", 1, **{"min.insync.replicas": "2"})
    client = await WireClient.connect(broker.port)
    body = await client.call(0, 8, produce_body("strict", 0, batch(), acks=-1))
    assert body.responses[0].partition_responses[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    body = await client.call(0, 8, produce_body("strict", 0, batch(), acks=1))
    assert body.responses[0].partition_responses[0].error_code == 0
    await client.aclose()


async def test_not_leader(broker):
    await broker.create_topic("t", 1)
    hosted = broker.server.replica_manager.get("t", 0)
    hosted.is_leader = False  # as after a leader move, before the log is re-hosted
    client = await WireClient.connect(broker.port)
    body = await client.call(0, 8, produce_body("t", 0, batch()))
    assert body.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    body = await client.call(1, 11, fetch_body("t", 0, 0))
    assert body.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await client.aclose()


async def test_fetch_errors(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    await client.call(0, 8, produce_body("t", 0, batch()))
    body = await client.call(1, 11, fetch_body("t", 0, 99))
    assert body.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    body = await client.call(1, 11, fetch_body("t", 0, 0, current_leader_epoch=5))
    assert body.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    body = await client.call(1, 11, fetch_body("nope", 0, 0))
    assert body.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await client.aclose()


async def test_long_poll_fetch_wakes_on_append(broker):
    await broker.create_topic("t", 1)
    consumer = await WireClient.connect(broker.port)
    producer = await WireClient.connect(broker.port)
    await consumer.send(1, 11, fetch_body("t", 0, 0, max_wait_ms=20_000))
    result = {}

    async def fetch():
        result["body"] = await consumer.receive()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch)
            await trio.sleep(0.05)
            assert "body" not in result
            await producer.call(0, 8, produce_body("t", 0, batch(1)))
    assert result["body"].responses[0].partitions[0].high_watermark == 1
    await consumer.aclose()
    await producer.aclose()


async def test_acks_zero_error_closes_connection(broker):
    client = await WireClient.connect(broker.port)
    await client.send(0, 8, produce_body("missing", 0, batch(), acks=0))
    with trio.fail_after(5):
        assert await client.stream.receive_some(100) == b""


async def test_clean_shutdown_on_cancel(tmp_path):
    from log.storage.clean_shutdown import has_clean_shutdown_marker
    from tests.broker.conftest import start_broker

    async with trio.open_nursery() as nursery:
        running = await start_broker(nursery, tmp_path)
        await running.create_topic("t", 1)
        client = await WireClient.connect(running.port)
        await client.call(0, 8, produce_body("t", 0, batch(2)))
        await client.aclose()
        nursery.cancel_scope.cancel()
    manager = running.server.log_manager
    assert manager.is_shut_down and has_clean_shutdown_marker(manager.log_dir)


async def test_init_producer_id(broker):
    from log.protocol.producer_id import INIT_PRODUCER_ID_REQUEST

    client = await WireClient.connect(broker.port)
    R = INIT_PRODUCER_ID_REQUEST.cls
    ids = [
        (await client.call(22, 1, R(transactional_id=None, transaction_timeout_ms=1000)))
        for _ in range(3)
    ]
    assert [b.error_code for b in ids] == [0, 0, 0]
    assert [b.producer_id for b in ids] == [ids[0].producer_id + i for i in range(3)]
    # A transactional id goes to its transaction coordinator: none before __transaction_state
    # exists (tests/broker/test_txn_coordinator.py covers the rest).
    refused = await client.call(22, 1, R(transactional_id="tx", transaction_timeout_ms=1000))
    assert refused.error_code == ErrorCode.NOT_COORDINATOR
    await client.aclose()


async def test_list_offsets_and_epochs(broker):
    from log.protocol.offsets import LIST_OFFSETS_REQUEST, OFFSET_FOR_LEADER_EPOCH_REQUEST

    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    await client.call(0, 8, produce_body("t", 0, batch(4)))
    L = LIST_OFFSETS_REQUEST.cls

    async def list_offset(timestamp, epoch=-1):
        body = L(replica_id=-1, topics=[L.ListOffsetsTopic(name="t", partitions=[
            L.ListOffsetsPartition(partition_index=0, timestamp=timestamp,
                                   current_leader_epoch=epoch)])])  # fmt: skip
        return (await client.call(2, 5, body)).topics[0].partitions[0]

    assert (await list_offset(-2)).offset == 0
    latest = await list_offset(-1)
    assert (latest.offset, latest.leader_epoch) == (4, 0)
    assert (await list_offset(0)).offset == 0
    assert (await list_offset(2**40)).offset == -1
    assert (await list_offset(-1, epoch=3)).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    E = OFFSET_FOR_LEADER_EPOCH_REQUEST.cls
    body = E(replica_id=-1, topics=[E.OffsetForLeaderTopic(topic="t", partitions=[
        E.OffsetForLeaderPartition(partition=0, leader_epoch=0)])])  # fmt: skip
    answer = (await client.call(23, 3, body)).topics[0].partitions[0]
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, 0, 4)
    await client.aclose()


async def test_list_offsets_waits_while_a_new_leaders_high_watermark_lags(broker):
    """KIP-207: until a new leader's high watermark reaches the start of its epoch, a client's
    latest offset (and a timestamp past the high watermark) is OFFSET_NOT_AVAILABLE, so offsets
    never run backwards across a leader change; earliest and a timestamp found below the high
    watermark are answered. The state is set as a leader election leaves it (the transitions
    themselves: tests/replication_core/test_partition_state.py)."""
    from log.protocol.offsets import LIST_OFFSETS_REQUEST

    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    await client.call(0, 8, produce_body("t", 0, batch(4)))
    L = LIST_OFFSETS_REQUEST.cls

    async def list_offset(timestamp, replica_id=-1):
        body = L(replica_id=replica_id, topics=[L.ListOffsetsTopic(name="t", partitions=[
            L.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])  # fmt: skip
        return (await client.call(2, 5, body)).topics[0].partitions[0]

    state = broker.server.ctx.replica_manager.get("t", 0).state
    state.leader_epoch_start_offset = 6  # the epoch began at 6; the high watermark is 4
    assert (await list_offset(-1)).error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert (await list_offset(2**40)).error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert ((await list_offset(0)).error_code, (await list_offset(0)).offset) == (0, 0)
    assert ((await list_offset(-2)).error_code, (await list_offset(-2)).offset) == (0, 0)
    assert (await list_offset(-1, replica_id=2)).offset == 4  # a replica sees the log end
    state.leader_epoch_start_offset = 4  # the followers' fetches moved it up to the start
    latest = await list_offset(-1)
    assert (latest.error_code, latest.offset) == (0, 4)
    await client.aclose()


async def test_topic_deletion_deletes_the_log(broker):
    from quorum.controller import DeleteTopicsRequest

    await broker.create_topic("gone", 1)
    assert broker.server.log_manager.get_log("gone", 0) is not None
    await broker.quorum.delete_topics(DeleteTopicsRequest(("gone",)))
    broker.server.ctx.replica_manager.sync()
    assert broker.server.log_manager.get_log("gone", 0) is None
    assert broker.server.replica_manager.get("gone", 0) is None


async def test_long_poll_waits_for_min_bytes_then_times_out(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    start = trio.current_time()
    body = await client.call(1, 11, fetch_body("t", 0, 0, max_wait_ms=200, min_bytes=1))
    assert trio.current_time() - start >= 0.19
    assert not bytes(body.responses[0].partitions[0].records or b"")
    await client.aclose()


async def test_producer_id_blocks_prefetch(broker):
    from quorum.producer_id_manager import BLOCK_SIZE

    driver = broker.server.producer_ids
    ids = [await driver.generate_producer_id() for _ in range(int(BLOCK_SIZE * 0.9) + 1)]
    await trio.testing.wait_all_tasks_blocked()
    assert driver.manager.next_block is not None  # prefetched in the background at 90 %
    ids += [await driver.generate_producer_id() for _ in range(BLOCK_SIZE)]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert broker.quorum.image.next_producer_id >= 2 * BLOCK_SIZE


async def test_idempotent_retry_answers_original_offsets(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    records = [Record(b"a"), Record(b"b")]
    first = build_batch(records, producer_id=7, producer_epoch=0, base_sequence=0)
    second = build_batch(records, producer_id=7, producer_epoch=0, base_sequence=2)
    offsets = []
    for data in (first, second, first):
        body = await client.call(0, 8, produce_body("t", 0, data, acks=-1))
        p = body.responses[0].partition_responses[0]
        offsets.append((p.error_code, p.base_offset))
    assert offsets == [(0, 0), (0, 2), (0, 0)]
    assert broker.server.log_manager.get_log("t", 0).log_end_offset == 4
    gap = build_batch(records, producer_id=7, producer_epoch=0, base_sequence=9)
    body = await client.call(0, 8, produce_body("t", 0, gap))
    code = body.responses[0].partition_responses[0].error_code
    assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    await client.aclose()


async def test_replica_fetch_from_a_non_replica_is_refused(broker):
    """Replica fetches are validated by PartitionState: broker 2 is no replica of t-0 (RF 1);
    tests/replication covers real follower fetches reading to the log end offset."""
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    await client.call(0, 8, produce_body("t", 0, batch(2)))
    body = fetch_body("t", 0, 0)
    body = type(body)(
        **{**{f: getattr(body, f) for f in body.__dataclass_fields__}, "replica_id": 2}
    )
    data = (await client.call(1, 11, body)).responses[0].partitions[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await client.aclose()


async def test_alter_configs_reach_the_log(broker):
    from log.protocol.admin import ALTER_CONFIGS_REQUEST, INCREMENTAL_ALTER_CONFIGS_REQUEST

    await broker.create_topic("t", 1, **{"retention.ms": "5000"})
    log = broker.server.log_manager.get_log("t", 0)
    assert log.config.retention_ms == 5000
    client = await WireClient.connect(broker.port)
    A = ALTER_CONFIGS_REQUEST.cls
    body = A(resources=[A.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        A.AlterableConfig(name="segment.bytes", value="100000")])], validate_only=False)  # fmt: skip
    answer = await client.call(33, 1, body)
    assert answer.responses[0].error_code == 0
    assert log.config.segment_bytes == 100000
    assert log.config.retention_ms == broker.server.replica_manager.default_config.retention_ms
    assert broker.quorum.image.topic_configs("t") == {"segment.bytes": "100000"}
    Inc = INCREMENTAL_ALTER_CONFIGS_REQUEST.cls
    body = Inc(resources=[Inc.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        Inc.AlterableConfig(name="retention.ms", config_operation=0, value="-1"),
        Inc.AlterableConfig(name="nonsense", config_operation=0, value="1")])],
        validate_only=False)  # fmt: skip
    answer = await client.call(44, 1, body)
    assert answer.responses[0].error_code == ErrorCode.INVALID_CONFIG
    await client.aclose()


async def test_untyped_handler_failure_is_unknown_server_error(broker, monkeypatch, caplog):
    """A bug in a handler answers UNKNOWN_SERVER_ERROR (logged with its traceback); a
    KafkaError answers its own code; the connection and the server keep serving."""
    from log.common.errors import NotControllerError
    from log.protocol.admin import DESCRIBE_CLUSTER_REQUEST
    from log.server import handlers

    async def buggy(ctx, request):
        raise RuntimeError("bug")

    async def typed(ctx, request):
        raise NotControllerError("moved")

    client = await WireClient.connect(broker.port)
    request = DESCRIBE_CLUSTER_REQUEST.cls()
    monkeypatch.setitem(handlers.HANDLERS, 60, buggy)
    assert (await client.call(60, 0, request)).error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    monkeypatch.setitem(handlers.HANDLERS, 60, typed)
    assert (await client.call(60, 0, request)).error_code == ErrorCode.NOT_CONTROLLER
    monkeypatch.undo()
    assert (await client.call(60, 0, request)).error_code == 0
    assert any("bug" in (r.exc_text or "") for r in caplog.records)
    caplog.clear()  # the ERROR above was the point of this test
    await client.aclose()


async def test_fetch_sizes_return_at_least_one_batch(broker):
    await broker.create_topic("t", 2)
    client = await WireClient.connect(broker.port)
    for _ in range(3):
        await client.call(0, 8, produce_body("t", 0, batch(20)))
    size = len(batch(20))
    body = fetch_body("t", 0, 0)
    fields = {f: getattr(body, f) for f in body.__dataclass_fields__}
    topic = body.topics[0]
    part = topic.partitions[0]
    small_part = type(part)(**{**{f: getattr(part, f) for f in part.__dataclass_fields__},
                               "partition_max_bytes": 10})  # fmt: skip
    two = type(part)(**{**{f: getattr(part, f) for f in part.__dataclass_fields__},
                        "partition_max_bytes": 2 * size, "partition": 0})  # fmt: skip
    request = type(body)(**{**fields, "topics": [type(topic)(topic="t", partitions=[small_part])]})
    data = (await client.call(1, 11, request)).responses[0].partitions[0]
    assert len(bytes(data.records)) == size  # one whole batch although larger than the limit
    request = type(body)(**{**fields, "topics": [type(topic)(topic="t", partitions=[two])]})
    data = (await client.call(1, 11, request)).responses[0].partitions[0]
    assert len(bytes(data.records)) == 2 * size
    request = type(body)(**{**fields, "max_bytes": size,
                            "topics": [type(topic)(topic="t", partitions=[two, two])]})  # fmt: skip
    partitions = (await client.call(1, 11, request)).responses[0].partitions
    assert [len(bytes(p.records)) for p in partitions] == [size, 0]  # response max_bytes
    await client.aclose()


async def test_a_consumer_that_never_rotates_still_gets_every_partition(broker):
    """Six partitions with data, a response budget of two batches, the same request order
    each time: the broker starts where the last response left off (least recently fed first),
    so every partition gets data within three responses, and a new connection starts afresh."""
    from log.protocol.fetch import FETCH_REQUEST

    await broker.create_topic("fair", 6)
    client = await WireClient.connect(broker.port)
    for partition in range(6):
        await client.call(0, 8, produce_body("fair", partition, batch(20)))
    size = len(batch(20))
    F = FETCH_REQUEST.cls  # noqa: N806
    request = F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2 * size,
        topics=[F.FetchTopic(topic="fair", partitions=[
            F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
            for p in range(6)
        ])],
    )  # fmt: skip

    async def fed() -> list[int]:
        response = await client.call(1, 11, request)
        return [p.partition_index for p in response.responses[0].partitions if p.records]

    rounds = [await fed() for _ in range(3)]
    assert rounds == [[0, 1], [2, 3], [4, 5]]
    assert await fed() == [0, 1]  # then around again
    await client.aclose()
    client = await WireClient.connect(broker.port)
    assert await fed() == [0, 1]
    await client.aclose()
