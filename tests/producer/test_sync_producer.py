"""SyncProducer from plain threads, against librdkafka's mock cluster."""

from __future__ import annotations

import threading

import pytest
import trio

from log.common.errors import InvalidConfigError
from producer.errors import ProducerClosedError
from producer.fetch_client import FetchClient
from producer.sync_producer import SyncProducer


def test_sync_producer_from_many_threads(mock_cluster):
    futures: dict[int, list] = {}
    with SyncProducer(mock_cluster.bootstrap, {"linger.ms": "2"}) as producer:

        def worker(n):
            futures[n] = [producer.send("sync", b"%d-%d" % (n, i), partition=n) for i in range(300)]

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.flush()
        assert all(f.done() for fs in futures.values() for f in fs)
        bulk = producer.send_many("sync", [b"bulk-%d" % i for i in range(1000)], partition=0)
    results = bulk.result(timeout=10).results()
    assert [r.offset for r in results] == list(range(results[0].offset, results[0].offset + 1000))
    for n, fs in futures.items():
        offsets = [f.result().offset for f in fs]
        assert offsets == list(range(offsets[0], offsets[0] + 300))
        assert all(f.result().partition == n for f in fs)

    async def read():
        async with FetchClient(mock_cluster.bootstrap) as client:
            return await client.read_all("sync", 3)

    values = [r.value for r in trio.run(read)]
    assert values == [b"3-%d" % i for i in range(300)]


def test_create_and_close_many_times_leaks_no_threads(mock_cluster):
    before = threading.active_count()
    for i in range(10):
        producer = SyncProducer(mock_cluster.bootstrap, linger_ms=0)
        producer.send("churn", b"%d" % i).result(timeout=10)
        producer.close()
        with pytest.raises(ProducerClosedError):
            producer.send("churn", b"late")
    assert threading.active_count() == before


def test_bad_configuration_fails_in_the_constructor():
    with pytest.raises(InvalidConfigError):
        SyncProducer("127.0.0.1:1", {"linger.ms": "soon"})
