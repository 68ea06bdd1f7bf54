"""CPU per acks=all record, RF 3: what one replication round costs the brokers, in CPU time.

Three in-process KafkaServers (tests/replication's harness: real sockets, real replica
fetchers, one trio loop, so this process's CPU time is the three brokers' plus the clients'),
one topic of one partition, min.insync.replicas 2. One connection sends single-record acks=-1
produces one after the other, so every record is a round of its own (no batching to hide a
cost); a consumer long-polls the partition. Printed: process CPU ms per record and wall ms per
record over `--records` after a warm-up.

On a shared box the latencies swing with the load; the CPU a round costs moves far less, so
compare code by running this from two trees alternately (it imports the code of the directory
it runs from):

    cd <tree> && python -m bench.round_cpu [--records 2000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import trio

from log.protocol.produce import PRODUCE_REQUEST
from log.records.builder import Record, build_batch
from log.replication.replica_fetcher import LeaderConnection
from tests.broker.conftest import LocalQuorum, WireClient, fetch_body
from tests.replication.test_replication_in_process import TOPIC, _replicated_topic, _start

FETCH_PROPS = {"replica.fetch.wait.max.ms": 500, "replica.fetch.backoff.ms": 1000}  # defaults
WARM_UP = 200
VALUE = b"x" * 100


async def measure(records: int, workdir: Path) -> tuple[float, float]:
    """(CPU ms, wall ms) per record."""
    P = PRODUCE_REQUEST.cls  # noqa: N806
    async with trio.open_nursery() as nursery:
        quorum = LocalQuorum()
        brokers = {i: await _start(nursery, quorum, workdir, i, FETCH_PROPS) for i in (1, 2, 3)}
        _, _, port, _ = await _replicated_topic(quorum, brokers, min_insync_replicas=2)
        producer = LeaderConnection("127.0.0.1", port, "round-cpu")
        consumer = await WireClient.connect(port)
        consumed = 0

        async def consume() -> None:
            nonlocal consumed
            while True:
                body = fetch_body(TOPIC, 0, consumed, max_wait_ms=500)
                partition = (await consumer.call(1, 11, body)).responses[0].partitions[0]
                if partition.records:
                    consumed = partition.high_watermark

        async def produce_one() -> None:
            partition_data = P.PartitionProduceData(index=0, records=build_batch([Record(VALUE)]))
            body = P(acks=-1, timeout_ms=5000, topic_data=[
                P.TopicProduceData(name=TOPIC, partition_data=[partition_data])
            ])  # fmt: skip
            response = await producer.request(0, 8, body)
            assert response.responses[0].partition_responses[0].error_code == 0

        nursery.start_soon(consume)
        for _ in range(WARM_UP):
            await produce_one()
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        for _ in range(records):
            await produce_one()
        while consumed < WARM_UP + records:
            await trio.sleep(0.001)
        cpu_s, wall_s = time.process_time() - cpu_start, time.perf_counter() - wall_start
        nursery.cancel_scope.cancel()
    await producer.aclose()
    await consumer.aclose()
    return 1000 * cpu_s / records, 1000 * wall_s / records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-round-cpu-") as tmp:
        cpu_ms, wall_ms = trio.run(measure, args.records, Path(tmp))
    print(f"acks=all RF 3, one record per produce, {args.records:,} records: "
          f"CPU {cpu_ms:.3f} ms/record, wall {wall_ms:.3f} ms/record")  # fmt: skip


if __name__ == "__main__":
    main()
