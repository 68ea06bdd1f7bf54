"""Our trio Producer (idempotent, acks=all) through a kill -9 of a partition leader, against
three real `quorumlog node` processes (RF 3, min.insync.replicas 2, short broker sessions: the
replication tests' harness).

Keyed records carry per-key sequence numbers and are sent continuously; the leader of
partition 0 is killed mid-stream, sending goes on, the node is restarted. With a generous
delivery.timeout.ms every handle must succeed; read back with the fetch client, every
acknowledged record is there exactly once, at the offset its handle reported, and each
partition holds its records in send order. Then `quorumlog perf produce --client quorumlog
--acks all` runs against the same (healed) cluster.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import pytest
import trio

HERE = Path(__file__).resolve().parent
for _path in (HERE.parent / "node", HERE.parent / "replication"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

from cluster_harness import kill_started, wait_until  # noqa: E402
from replication_harness import TOPIC, create_topic, partition_state, start_cluster  # noqa: E402

from producer.fetch_client import FetchClient  # noqa: E402
from producer.producer import Producer  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(280)]

PARTITIONS = 3
KEYS = [b"key-%d" % i for i in range(12)]
RECORDS = 6000
KILL_AT = 1500  # records sent before the leader is killed
RESTART_AT = 3500  # records sent before it is restarted


@pytest.fixture(autouse=True)
def _kill_node_processes():
    """No node process outlives the test, whatever the test did."""
    yield
    kill_started()


async def _wait_isr(cluster, expected: set[int], timeout_s: float = 60) -> None:
    async def complete():
        states = [await partition_state(cluster, p) for p in range(PARTITIONS)]
        return all(set(s.isr) == expected for s in states)

    await wait_until(complete, timeout_s, interval_s=0.2)


def _perf_produce(bootstrap: str) -> dict:
    from click.testing import CliRunner

    from tools.cli import main

    args = ["perf", "produce", "--bootstrap", bootstrap, "--topic", TOPIC, "--records", "3000"]
    args += ["--record-size", "100", "--acks", "all", "--client", "quorumlog", "--json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


async def test_idempotent_producer_through_leader_kill9_keeps_order_without_duplicates(tmp_path):
    cluster = await trio.to_thread.run_sync(start_cluster, tmp_path)
    bootstrap = cluster.layout.bootstrap_servers
    await trio.to_thread.run_sync(create_topic, bootstrap, PARTITIONS)
    sent: list[tuple[bytes, bytes, object]] = []  # (key, value, handle) in send order
    next_sequence = collections.Counter()
    killed: int | None = None
    async with Producer(
        bootstrap,
        enable_idempotence=True,
        acks=-1,
        linger_ms=5,
        delivery_timeout_ms=120_000,
        request_timeout_ms=5000,
        retry_backoff_ms=50,
        retry_backoff_max_ms=200,
        metadata_max_age_ms=1000,
        seed=7,
    ) as producer:
        for i in range(RECORDS):
            key = KEYS[i % len(KEYS)]
            value = b"%s:%d" % (key, next_sequence[key])
            next_sequence[key] += 1
            sent.append((key, value, await producer.send(TOPIC, value, key=key)))
            if i % 20 == 19:
                await trio.sleep(0.005)  # a continuous stream, not one burst
            if i == KILL_AT:
                with trio.fail_after(60):
                    while not all(h.done for _, _, h in sent[: KILL_AT // 2]):
                        await trio.sleep(0.05)  # the stream is flowing before the kill
                killed = (await partition_state(cluster, 0)).leader
                cluster.kill9(killed)
            if i == RESTART_AT:  # once a new leader was elected, with records still queued
                with trio.fail_after(30):
                    while (await partition_state(cluster, 0)).leader in (killed, -1):
                        await trio.sleep(0.1)
                cluster.start(killed)
        with trio.fail_after(150):
            await producer.flush()
        await trio.to_thread.run_sync(cluster.wait_ready, killed)

    errors = [(value, h.record_handle.error) for _, value, h in sent if h.record_handle.error]
    assert errors == [], errors[:5]
    results = {value: h.result() for _, value, h in sent}
    state = await partition_state(cluster, 0)
    assert state.leader_epoch >= 1, state  # a fail-over happened

    fetched: dict[int, list] = {}
    async with FetchClient(bootstrap) as client:
        for partition in range(PARTITIONS):
            earliest = await client.earliest_offset(TOPIC, partition)
            latest = await client.latest_offset(TOPIC, partition)
            fetched[partition] = await client.read_all(TOPIC, partition, earliest, latest)
    all_values = [r.value for records in fetched.values() for r in records]
    duplicates = [v for v, n in collections.Counter(all_values).items() if n > 1]
    assert duplicates == [], duplicates[:5]
    assert set(all_values) == set(results)  # every acknowledged record, nothing else
    for partition, records in fetched.items():
        in_send_order = [value for _, value, _ in sent if results[value].partition == partition]
        assert [r.value for r in records] == in_send_order, partition
        assert all(results[r.value].offset == r.offset for r in records), partition
        assert all(results[r.value].partition == partition for r in records)
    for key in KEYS:  # per key: one partition, sequence numbers 0.. in order
        partitions = {results[v].partition for k, v, _ in sent if k == key}
        assert len(partitions) == 1, key
        (partition,) = partitions
        sequences = [
            int(r.value.split(b":")[1]) for r in fetched[partition] if r.key == key
        ]  # fmt: skip
        assert sequences == list(range(next_sequence[key])), key

    await _wait_isr(cluster, set(cluster.layout.node_ids))
    report = await trio.to_thread.run_sync(_perf_produce, bootstrap)
    assert report["acknowledged"] == 3000, report
    assert report["records_per_s"] > 0
