"""CPU per acks=all record over three in-process brokers, by request count (not by load).

Three real KafkaServers in one trio process (bench/local_quorum.py's LocalQuorum: real
controller decisions, no Raft) host one partition, RF 3, min.insync.replicas 2, with Kafka's
follower fetch settings (replica.fetch.wait.max.ms 500, min.bytes 1). A producer connection
sends one 100-byte record per acks=-1 Produce and waits for its answer before the next; a
consumer connection long-polls Fetch (max_wait_ms 500, min_bytes 1) from where it got to. So
each record costs the same requests whatever the box's load: one Produce, each follower's
fetch answered with the record (then parked again), and the consumer's fetch -- unlike
bench/e2e_latency.py at a fixed rate, where a loaded box batches records and the CPU per record
falls with it. Printed: process CPU per record (brokers and the two small clients, one
thread), the requests the brokers answered per record by kind (a Fetch by who asked and
whether it carried records), and with `--profile` cProfile's calls per record of the busiest
functions (call counts do not depend on the box's load; the times cProfile adds to do it do).

CPU time still moves 20-30 % with the box's load (other processes' cache use). Instructions do
not: run it under `valgrind --tool=callgrind` with two record counts (say 300 and 900; about
two minutes each) and divide the difference of the "Collected" totals by the difference of
the counts: instructions per record, the same on a loaded box as on an idle one.

    python -m bench.node_cpu [--records 3000] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import trio

from bench.local_quorum import LocalQuorum, node_config
from bench.rows import emit
from log.protocol.client_codec import ClientCodec
from log.protocol.fetch import FETCH_REQUEST
from log.protocol.produce import PRODUCE_REQUEST
from log.records.batch_header import iter_batches
from log.records.builder import Record, build_batch
from log.server.broker import KafkaServer
from log.storage.config import default_log_config
from log.storage.manager import LogManager
from quorum import controller

TOPIC = "cpu"
VALUE = b"x" * 100
FOLLOWER_PROPS = {"replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1}


class Client:
    """One connection, one request at a time (our ClientCodec over a trio stream)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream, self.codec = stream, ClientCodec(client_id="node-cpu")

    async def call(self, api_key: int, version: int, body):
        await self.stream.send_all(self.codec.encode_request(api_key, version, body))
        while True:
            data = await self.stream.receive_some(1 << 20)
            assert data, "the broker closed the connection"
            responses = self.codec.receive_data(data)
            if responses:
                return responses[0].body


async def _broker(nursery, quorum: LocalQuorum, workdir: Path, broker_id: int) -> KafkaServer:
    config = node_config(workdir / f"b{broker_id}", **{
        "node.id": broker_id, "process.roles": "broker",
        "listeners": "PLAINTEXT://127.0.0.1:9092", **FOLLOWER_PROPS,
    })  # fmt: skip
    server = KafkaServer(config, LogManager(config.log_dir, default_log_config(config)), quorum,
                         quorum, broker_epoch_getter=lambda: quorum.broker_epoch,
                         listen_port=0)  # fmt: skip
    port = await nursery.start(server.run)
    quorum.register(broker_id, "127.0.0.1", port)
    server.port = port
    return server


def _kind(request, body) -> str:
    """The API name; a Fetch answer also by who asked and whether it carried records."""
    if request.api_key != 1:
        return request.api.name
    fetch = request.body
    replica_id = fetch.replica_state.replica_id if request.api_version >= 15 else fetch.replica_id
    carried = any(p.records for t in body.responses for p in t.partitions)
    return f"Fetch {'follower' if replica_id >= 0 else 'consumer'} {'data' if carried else 'empty'}"


def _counted(server: KafkaServer, counts: collections.Counter) -> None:
    """Count the requests `server` answers by kind (instance attributes over the class's
    methods, so only this run's servers count): an acks=-1 Produce goes to `_append_produce`,
    every other request to `_dispatch`."""
    for name in ("_dispatch", "_append_produce"):
        method = getattr(server, name)

        async def counting(request, method=method):
            body = await method(request)
            counts[_kind(request, body)] += 1
            return body

        setattr(server, name, counting)


async def measure(workdir: Path, records: int, profile: cProfile.Profile | None) -> dict:
    quorum = LocalQuorum()
    counts: collections.Counter = collections.Counter()
    async with trio.open_nursery() as nursery:
        servers = {i: await _broker(nursery, quorum, workdir, i) for i in (1, 2, 3)}
        response = await quorum.create_topics(controller.CreateTopicsRequest((
            controller.CreatableTopic(TOPIC, 1, 3, {"min.insync.replicas": "2"}),
        )))  # fmt: skip
        assert response.results[0].error_code == 0
        leader = servers[quorum.image.topic(TOPIC).partitions[0].leader]
        leader.ctx.replica_manager.sync()
        hosted = leader.replica_manager.get(TOPIC, 0)
        with trio.fail_after(30):
            while hosted.state.isr != {1, 2, 3}:
                await trio.sleep(0.05)
        producer = Client(await trio.open_tcp_stream("127.0.0.1", leader.port))
        consumer = Client(await trio.open_tcp_stream("127.0.0.1", leader.port))
        P, F = PRODUCE_REQUEST.cls, FETCH_REQUEST.cls  # noqa: N806
        consumed = 0

        async def consume() -> None:
            nonlocal consumed
            while True:
                body = F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                         topics=[F.FetchTopic(topic=TOPIC, partitions=[F.FetchPartition(
                             partition=0, fetch_offset=consumed, partition_max_bytes=1 << 20,
                         )])])  # fmt: skip
                answer = (await consumer.call(1, 12, body)).responses[0].partitions[0]
                for _, header in iter_batches(bytes(answer.records), check_crc=False):
                    consumed = header.next_offset

        async def produce(count: int) -> None:
            for _ in range(count):
                body = P(acks=-1, timeout_ms=30_000, topic_data=[P.TopicProduceData(
                    name=TOPIC, partition_data=[P.PartitionProduceData(
                        index=0, records=build_batch([Record(VALUE)]))],
                )])  # fmt: skip
                answer = (await producer.call(0, 8, body)).responses[0]
                assert answer.partition_responses[0].error_code == 0

        nursery.start_soon(consume)
        await produce(200)  # warm-up
        with trio.fail_after(30):
            while consumed < 200:
                await trio.sleep(0.01)
        for server in servers.values():
            _counted(server, counts)
        cpu_s, wall_s = time.process_time(), time.perf_counter()
        if profile is not None:
            profile.enable()
        await produce(records)
        with trio.fail_after(30):
            while consumed < 200 + records:
                await trio.sleep(0.001)
        if profile is not None:
            profile.disable()
        cpu_s, wall_s = time.process_time() - cpu_s, time.perf_counter() - wall_s
        nursery.cancel_scope.cancel()
    return {"records": records, "cpu_ms_per_record": 1000 * cpu_s / records,
            "records_per_s": records / wall_s,
            "requests_per_record": {k: v / records for k, v in sorted(counts.items())}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rows = []
    for _ in range(args.rounds):
        profile = cProfile.Profile() if args.profile else None
        with tempfile.TemporaryDirectory(prefix="bench-node-cpu-") as tmp:
            row = trio.run(measure, Path(tmp), args.records, profile)
        rows.append(row)
        print(f"{row['cpu_ms_per_record']:.3f} ms CPU per record, "
              f"{row['records_per_s']:.0f} records/s, requests per record: "
              f"{row['requests_per_record']}")  # fmt: skip
        if profile is not None:
            stats = pstats.Stats(profile)
            calls = sorted(stats.stats.items(), key=lambda kv: -kv[1][1])  # type: ignore[attr-defined]
            for (path, line, name), (_, ncalls, *_rest) in calls[:40]:
                print(f"  {ncalls / args.records:8.1f}  {name}  {Path(path).name}:{line}")
    median = statistics.median(r["cpu_ms_per_record"] for r in rows)
    print(f"median {median:.3f} ms CPU per record over {len(rows)} rounds")
    emit("node_cpu", rows)


if __name__ == "__main__":
    main()
