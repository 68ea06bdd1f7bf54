"""The broker's Prometheus endpoint and its state-change log lines, on an in-process broker."""

from __future__ import annotations

import logging
import urllib.request

import trio
from prometheus_client.parser import text_string_to_metric_families

from log.records.builder import Record, build_batch
from tests.broker.conftest import WireClient, fetch_body, produce_body


def batch(count: int) -> bytes:
    return build_batch([Record(b"v%d" % i) for i in range(count)])


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_endpoint_after_produce_and_fetch(broker):
    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    for _ in range(3):
        await client.call(0, 8, produce_body("t", 0, batch(4)))
    await client.call(0, 8, produce_body("t", 0, batch(2), acks=-1))
    body = await client.call(1, 11, fetch_body("t", 0, 0))
    assert body.responses[0].partitions[0].high_watermark == 14
    await client.aclose()

    metrics = broker.server.metrics
    port = metrics.serve("127.0.0.1", 0)
    try:
        samples = await trio.to_thread.run_sync(scrape, port)
    finally:
        metrics.close()
    produce = ("api", "Produce")
    assert samples[("quorumlog_request_latency_seconds_count", (produce,))] == 4
    assert samples[("quorumlog_request_latency_seconds_count", (("api", "Fetch"),))] == 1
    assert samples[("quorumlog_request_latency_seconds_sum", (produce,))] > 0
    assert samples[("quorumlog_bytes_in_total", ())] > 4 * 61
    assert samples[("quorumlog_bytes_out_total", ())] > 14 * 2
    assert samples[("quorumlog_produce_acks_all_waiting", ())] == 0
    assert samples[("quorumlog_under_replicated_partitions", ())] == 0
    assert samples[("quorumlog_leader_changes_total", ())] == 1
    assert samples[("quorumlog_metadata_offset", ())] == broker.quorum.image.last_offset >= 0
    assert samples[("quorumlog_isr_shrinks_total", ())] == 0


async def test_leadership_change_logs_one_structured_line(broker, caplog):
    caplog.set_level(logging.INFO, logger="log.replication.replica_manager")
    await broker.create_topic("logged", 2)
    lines = [r.getMessage() for r in caplog.records if "partition state change" in r.getMessage()]
    assert len(lines) == 2, lines
    assert all("node=1 topic=logged" in line and "role=leader" in line for line in lines), lines
    assert any("partition=1 " in line for line in lines)


async def test_a_wide_image_lists_some_state_changes_and_counts_the_rest(broker, caplog):
    """An image that changes more partitions than LISTED_STATE_CHANGES (a new topic of many)
    lists that many at INFO and counts the rest in one line; each is at DEBUG."""
    from log.replication.replica_manager import LISTED_STATE_CHANGES

    caplog.set_level(logging.DEBUG, logger="log.replication.replica_manager")
    await broker.create_topic("wide", LISTED_STATE_CHANGES + 5)
    changes = [r for r in caplog.records if "partition state change" in r.getMessage()]
    info = [r.getMessage() for r in changes if r.levelno == logging.INFO]
    debug = [r.getMessage() for r in changes if r.levelno == logging.DEBUG]
    assert len(info) == LISTED_STATE_CHANGES + 1 and len(debug) == 5, info
    assert info[-1] == (
        f"partition state change node=1: 5 more partitions in this image, logged at DEBUG "
        f"(all: {LISTED_STATE_CHANGES + 5} leader)"
    )


async def test_transaction_gauges(broker):
    from tests.broker.test_txn_markers import codes, markers_body, txn_batch

    await broker.create_topic("t", 1)
    client = await WireClient.connect(broker.port)
    await client.call(0, 8, produce_body("t", 0, txn_batch(0)))  # offsets 0-1, left open
    await client.call(0, 8, produce_body("t", 0, batch(3)))  # 2-4
    metrics = broker.server.metrics
    port = metrics.serve("127.0.0.1", 0)
    try:
        samples = await trio.to_thread.run_sync(scrape, port)
        assert samples[("quorumlog_partition_open_transactions", ())] == 1
        assert samples[("quorumlog_last_stable_offset_lag_max", ())] == 5  # HW 5, LSO 0
        body = await client.call(27, 1, markers_body((4000, 0, True, 0, {"t": [0]})))
        assert set(codes(body).values()) == {0}
        samples = await trio.to_thread.run_sync(scrape, port)
        assert samples[("quorumlog_partition_open_transactions", ())] == 0
        assert samples[("quorumlog_last_stable_offset_lag_max", ())] == 0
    finally:
        metrics.close()
        await client.aclose()
