"""Produce throughput of KafkaServer beside an honest limit, both driven by confluent-kafka.

Setup (same for both servers): the server runs in its own process (its own GIL) on 127.0.0.1;
the client is one confluent-kafka Producer (librdkafka) in this process, acks=1, linger.ms=5,
batching on (batch.size 1 MB, up to 10,000 messages), producing `--count` 100-byte values with
no key to one single-partition topic, timed from the first produce() to flush() returning.

* `broker`: the real KafkaServer (log/server/broker.py) with a one-node in-process quorum
  without Raft (bench/local_quorum.py, which the broker tests use too), appending through
  UnifiedLog (header + CRC-32C check, offset/epoch patching, index, producer state, pwritev),
  no fsync (Kafka's default).
* `limit`: a trio server on the same sans-IO ServerConnection that answers ApiVersions,
  Metadata and Produce and appends each produce request's raw record bytes to a plain file with
  f.write -- the same sockets, framing, request decoding and response encoding, minus the
  broker's handlers and storage layer. It is the ceiling this design could reach in Python.

A second table measures the worker-thread hop the broker does NOT take for appends: the same
~16 KB batch appended with UnifiedLog.append_as_leader inline vs through trio.to_thread.run_sync.

With one producer process the client itself (one Python thread calling produce()) can be the
bottleneck for both servers; `--producers N` runs N producer processes at once (wall time from
the common start to the last flush) to load the server harder.

    python -m bench.broker_produce [--count 300000] [--repeat 2] [--producers 1]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from bench.rows import emit
from tools.confluent_produce import produce_waiting

VALUE_BYTES = 100
TOPIC = "bench"


# -- servers (run in a child process) ---------------------------------------------------------


async def serve_broker(directory: str, port_file: str) -> None:
    from bench.local_quorum import NODE_ID, LocalQuorum, node_config
    from log.server.broker import KafkaServer
    from log.storage.config import default_log_config
    from log.storage.manager import LogManager
    from quorum.controller import CreatableTopic, CreateTopicsRequest

    config = node_config(Path(directory))
    quorum = LocalQuorum()
    log_manager = LogManager(config.log_dir, default_log_config(config))
    server = KafkaServer(config, log_manager, quorum, quorum, listen_port=0,
                         broker_epoch_getter=lambda: quorum.broker_epoch)  # fmt: skip
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        quorum.register(NODE_ID, "127.0.0.1", port)
        await quorum.create_topics(CreateTopicsRequest((CreatableTopic(TOPIC, 1, 1),)))
        Path(port_file).write_text(str(port))


async def serve_limit(directory: str, port_file: str) -> None:
    from log.protocol.apis import api_versions_body
    from log.protocol.connection import NEED_DATA, PAUSED, BadRequest, ServerConnection
    from log.protocol.metadata import METADATA_RESPONSE
    from log.protocol.produce import PRODUCE_RESPONSE
    from log.records.batch_header import read_header

    M, P = METADATA_RESPONSE.cls, PRODUCE_RESPONSE.cls
    out = open(os.path.join(directory, "limit.bin"), "wb")  # noqa: SIM115
    state = {"next_offset": 0, "port": 0}

    def answer(request):
        if request.api_key == 18:
            return api_versions_body(frozenset({0, 1, 3, 18}))  # Fetch: librdkafka MsgVer2
        if request.api_key == 3:
            return M(
                brokers=[M.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=state["port"])],
                cluster_id="limit", controller_id=1,
                topics=[M.MetadataResponseTopic(error_code=0, name=TOPIC, partitions=[
                    M.MetadataResponsePartition(error_code=0, partition_index=0, leader_id=1,
                        leader_epoch=0, replica_nodes=[1], isr_nodes=[1])])],
            )  # fmt: skip
        topics = []
        for t in request.body.topic_data:
            partitions = []
            for p in t.partition_data:
                header = read_header(p.records)
                out.write(p.records)
                base = state["next_offset"]
                state["next_offset"] += header.last_offset_delta + 1
                partitions.append(P.PartitionProduceResponse(index=p.index, error_code=0,
                                                             base_offset=base))  # fmt: skip
            topics.append(P.TopicProduceResponse(name=t.name, partition_responses=partitions))
        return P(responses=topics)

    async def connection(stream):
        conn = ServerConnection(max_frame_bytes=1 << 27)
        async with stream:
            while True:
                event = conn.next_request()
                if event is NEED_DATA or event is PAUSED:
                    data = await stream.receive_some(1 << 18)
                    if not data:
                        return
                    conn.receive_data(data)
                    continue
                if isinstance(event, BadRequest):
                    await stream.send_all(event.data_to_send)
                    if event.close_connection:
                        return
                    continue
                await stream.send_all(b"".join(conn.send_response_parts(event, answer(event))))

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    state["port"] = listeners[0].socket.getsockname()[1]
    Path(port_file).write_text(str(state["port"]))
    await trio.serve_listeners(connection, listeners)


# -- client ------------------------------------------------------------------------------------


def produce(port: int, count: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "1", "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    value = os.urandom(VALUE_BYTES)
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    producer.produce(TOPIC, value, on_delivery=on_delivery)  # connect and warm up
    producer.flush(10)
    start = time.perf_counter()
    for _ in range(count):
        produce_waiting(producer, TOPIC, value, poll_s=0.001, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    elapsed = time.perf_counter() - start
    assert not errors, errors[:3]
    return elapsed


def run_server(kind: str, count: int, producers: int) -> float:
    with tempfile.TemporaryDirectory() as directory:
        port_file = os.path.join(directory, "port")
        child = subprocess.Popen(
            [sys.executable, "-m", "bench.broker_produce", "--serve", kind, "--dir", directory],
            cwd=Path(__file__).resolve().parent.parent,
        )
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(port_file) or not Path(port_file).read_text():
                assert time.monotonic() < deadline and child.poll() is None, "server did not start"
                time.sleep(0.05)
            port = int(Path(port_file).read_text())
            if producers == 1:
                return produce(port, count)
            # Several producer processes at once (one client process alone may be the limit):
            # the wall time from the common start to the last flush.
            with multiprocessing.get_context("spawn").Pool(producers) as pool:
                start = time.perf_counter()
                pool.starmap(produce, [(port, count // producers)] * producers)
                return time.perf_counter() - start
        finally:
            child.terminate()
            child.wait(10)


# -- append inline vs worker thread -----------------------------------------------------------


def bench_append_hop(batch_count: int = 3000) -> tuple[float, float]:
    from log.records.builder import Record, build_batch
    from log.storage.config import LogConfig
    from log.storage.log_loader import load_log

    batch = build_batch([Record(os.urandom(VALUE_BYTES))] * 150)  # ~16 KB
    results = []
    for threaded in (False, True):
        with tempfile.TemporaryDirectory() as directory:
            log = load_log(os.path.join(directory, "hop-0"), LogConfig())

            async def main(log=log, threaded=threaded) -> float:
                start = time.perf_counter()
                for i in range(batch_count):
                    if threaded:
                        await trio.to_thread.run_sync(log.append_as_leader, batch, 0, i)
                    else:
                        log.append_as_leader(batch, 0, i)
                    await trio.lowlevel.checkpoint()
                return time.perf_counter() - start

            results.append(trio.run(main) / batch_count * 1e6)
            log.close()
    return results[0], results[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--producers", type=int, default=1, help="producer processes")
    parser.add_argument("--serve", choices=["broker", "limit"])
    parser.add_argument("--dir")
    args = parser.parse_args()
    if args.serve:
        serve = serve_broker if args.serve == "broker" else serve_limit
        trio.run(serve, args.dir, os.path.join(args.dir, "port"))
        return
    best = {}
    for kind in ("limit", "broker"):
        best[kind] = min(run_server(kind, args.count, args.producers) for _ in range(args.repeat))
    mb = args.count * VALUE_BYTES / 1e6
    print(f"{args.producers} confluent-kafka producer process(es), acks=1, linger.ms=5, "
          f"{args.count} x {VALUE_BYTES} B values in all (best of {args.repeat})")  # fmt: skip
    print(f"{'server':<8} {'records/s':>12} {'MB/s':>8} {'vs limit':>9}")
    for kind in ("limit", "broker"):
        rate = args.count / best[kind]
        ratio = best["limit"] / best[kind]
        print(f"{kind:<8} {rate:>12,.0f} {mb / best[kind]:>8.1f} {ratio:>9.2f}")
    emit("broker_produce", [
        {"server": kind, "producers": args.producers, "records_per_s": args.count / best[kind],
         "mb_per_s": mb / best[kind], "vs_limit": best["limit"] / best[kind]}
        for kind in ("limit", "broker")
    ])  # fmt: skip
    inline_us, thread_us = bench_append_hop()
    print("\nUnifiedLog.append_as_leader of a ~16 KB batch, per append")
    print(f"inline {inline_us:.1f} us   trio.to_thread.run_sync {thread_us:.1f} us")


if __name__ == "__main__":
    main()
