"""End-to-end latency: produce (acks=all, RF 3) to consume, at fixed rates.

A 3-node cluster on `quorumlog up` defaults, one topic of 3 partitions, RF 3,
min.insync.replicas 2. One confluent-kafka producer per `--linger-ms` setting (acks=all,
idempotent; default linger.ms 0 and 1, each row run with each) writes 100-byte values carrying
their send time at `--rates` records/s (default 500) and at `--shares` of the measured peak
(default 10 % and 50 %; paced in 1 ms steps); one confluent-kafka consumer (fetch.wait.max.ms
100, fetch.min.bytes 1) in another thread reads them; latency = consume time - send time on
the same clock, and beside it the producer's send-to-acknowledgement time. The settings are printed with the table. The
peak rate (as fast as the producer goes, `--peak-count` records) is measured first and each
rate printed as its share of it; `--shares` adds rows at shares of the peak, which swing with
the peak (it moves 2-3x with the box's load). Beside each row: librdkafka's own split of the
producer's time (RequestStats: a produce request's round trip, send to answer, p50/p99, and a
record's wait in the client's queue before it goes into a request, p99; medians over the row's
one-second windows and the brokers), the CPU the three nodes and this
client process used meanwhile (percent of one core, and the nodes' CPU per record, which
the box's load moves far less than the latencies; on a small box the client's librdkafka
threads compete with the nodes, and a node waiting for a core is latency) and the 1-minute load
average at the row's end.

Why linger.ms 1 beside 0 (measured 2026-11-26 at 29,600 records/s, 10 % of that run's peak, two
cores, per-thread CPU from /proc): with linger.ms 0 librdkafka's three producer broker threads
used 29-32 % of a core each (the producer process 108 %, its Python thread 10 %): a partition
with its 5 idempotent requests in flight has records whose linger has already run out, so the
broker thread's next wake-up is already due and it polls without sleeping until an answer
frees a slot (src/rdkafka_broker.c computes the wake-up from the queued records' linger before
it checks the in-flight limit). linger.ms 0.2 spun the same (97 %). On two cores that left
the three nodes waiting for a core: p50 8-11 ms, p99 23-31 ms, the producer's
measured request round trip (librdkafka's `rtt` statistic) p50 4.3-6.4 ms. With linger.ms 1 the
producer process used 26-35 %, rtt p50 1.1-1.5 ms, and e2e p50 2.5-3.0 ms, p99 9.5-14 ms in
the same window (load 2-3, other work on the box). librdkafka's default is 5 ms and Kafka's
Java producer's is 5 ms since 4.0; 1 ms keeps the bench a low-latency setting. At 500/s it adds
~1.4 ms to a record's latency (a record waits its linger when no batch is being sent), so each
row runs with both. Two runs of this bench on a calm box (load 1.2-4.3, mostly its own), p50 /
p99 / p99.9 ms, the client process's CPU in % of a core:

    row                        linger.ms 0                   linger.ms 1
    500/s                      1.1 / 2.9-3.2 / 6.3-7.9, 9 %  2.5-2.6 / 5.3-5.5 / 8.3-9.1, 10 %
    10 % of peak (46-55k/s)    10-11 / 31-46 / 40-68, 121 %  2.7-3.1 / 11-14 / 15-21, 42-53 %
    50 % of peak (229-276k/s)  16-17 / 89-102 / 109-132      15-16 / 85-115 / 109-161

The 10 % row at linger.ms 1 is short of the 5 ms p99 goal: the producer's request round trip
(librdkafka's `rtt`) is p50 1.2-1.5 ms but p99 6-9 ms, and records queue behind a slow round
for one of the 5 in-flight slots (`int_latency` p99 6-8 ms); the nodes use 84-86 % of a core
and the client ~45 % of the box's two. Running the nodes under SCHED_BATCH (no wake-up
preemption) cut their involuntary context switches from ~1,430/s to ~920/s and changed no
percentile the runs could resolve (four runs alternated, load 0.3-2.1); a consumer in its own
process instead of a thread the same. At 500/s a round costs the nodes ~1.45 ms of CPU, at
46k/s ~0.28 ms (3 partitions x ~1,000 produce requests/s): at 500/s each request wakes an idle
node, at 46k/s a node's event-loop turn finds several waiting.

Where the time goes (traced 2026-11 at 10,000/s on 2 cores): the leader answers an acks=all
produce one replication round after the append (follower's long poll answered -> follower
appends -> its next fetch moves the HW), p50 ~2.2 ms, of which each follower's own work is
~0.3 ms; the rest is each process waiting for its turn: its event loop finishing other tasks'
steps and the OS giving it a core.

Traced again 2026-11-26 (timestamps at each step in the three nodes, 300 and 1,000 records/s,
a box loaded by other work): each step of the round is prompt -- follower receive -> append
0.07 ms, append -> next fetch 0.03 ms, HW move -> produce answered 0.2 ms and -> parked consumer
fetch answered 0.2 ms (p50s); no timer, no fsync, TCP_NODELAY on every socket (librdkafka's
too), GC pauses <= 3 ms of CPU. The tail was the connection: the broker took a connection's
next request only after answering the one before, so a produce queued behind another acks=all
produce was appended only after that one's round, and one stalled round (a process waiting for
a core) cost each request queued behind it (up to the client's 5 in flight) a round of its own:
at 300/s those records took p50 17 ms / p90 100 ms from send to append, the others 0.2 ms. Now
the broker appends a pipelined produce at once and only its answer waits its turn
(log/server/broker.py). At 1,000/s, three runs each way alternated on the same box (load 10-14):
records appended before any HW move since their send 14-16 % -> 45-52 %, after 3+ moves
30-31 % -> <= 1 %; e2e p50 39-45 ms -> 14-19 ms, p99 302-524 ms -> 110-315 ms. What is left is
the round itself (append -> HW p50 6.5 ms, p99 52 ms at that load: three processes' turns in
a row) and the client waiting for one of its 5 in-flight slots.

Per hop, 2026-11-26 (lat20; timestamps in the three nodes joined by offset with the client's
send, ack and consume times; 500 records/s; p50 / p99 in ms; the box shared with other work):

    hop                                              load 7.3        load 9.8
    send -> leader has decoded the produce           0.42 / 43.5     3.10 / 71.3
    decoded -> appended                              0.07 / 1.7      0.12 / 9.3
    appended -> 1st follower has the answer          0.67 / 21.2     3.46 / 31.4
    appended -> 2nd follower has the answer          1.44 / 31.5     8.11 / 63.9
    follower's append                                0.06 / 2.1      0.12 / 5.9
    2nd follower appended -> its fetch moved the HW  0.60 / 10.7     2.12 / 19.5
    appended -> HW (the replication round)           2.46 / 35.6     11.3 / 70.7
    HW -> produce answered / sent                    0.17 / 0.59 p50 0.43 / 1.92 p50
    HW -> consumer's parked fetch answered           0.17 / 7.3      0.44 / 15.4
    fetch answered -> record in the consumer thread  1.35 / 9.9 (*)  0.63 / 13.8
    send -> consumed                                 5.1 / 84.9      20.9 / 115.5

(*) with the consumer's old consume(1000, 0.001), which waited out its 1 ms: now poll().
Every step is prompt in CPU terms (a follower's append ~0.1 ms, the leader's answer to a fetch
~0.2-0.3 ms); the time is the five processes' turns in a row on two shared cores: the 2nd
follower gets its answer ~0.8 ms after the 1st at p50 (the leader answers them one after the
other, and a send on loopback wakes the receiver, which often takes the core from the sender),
and every hop's p99 is a process waiting for a core. At 5,000/s the same round makes records
wait in librdkafka for one of its 5 in-flight slots (send -> decoded p50 13.5 ms at load 9).
The nodes spend ~1.4 ms of CPU per record at 500/s (70 % of a core; 4 % idle): ~10 requests
per record across the three (the produce, two follower fetches answered and two sent again,
the consumer's fetch), ~0.15 ms each through decode, handler, encode and trio's socket calls.

Fixed in that session: the periodic checkpoint writes (two fsyncs, ~10 ms median and up to
~50 ms on this disk) stalled each node's event loop every 5 s: they run in a worker thread now
(log/server/broker.py, log/storage/manager.py). An append that leaves the HW where it was
wakes only the followers' fetches, and a HW moved by a follower's fetch no longer wakes the
followers' parked fetches nor re-reads the mover's own session: fetch reads per acks=all record at the leader 9 -> 6 (three
in-process brokers and a long-polling consumer, counted). Nothing else blocks: no timer in
the round, no fsync on the produce path (flush.messages/flush.ms unset, as Kafka), TCP_NODELAY
on every socket (trio sets it on each SocketStream; librdkafka 2.16 sets it by default: seen
with strace), GC pauses <= 2.4 ms (27 young collections in a node's whole run, no full one).

Checked 2026-11-26 (lat21). The leader answers its two followers in the same event-loop turn:
strace of a leader at 500/s shows no epoll_wait between the two sendmsg calls (the send lock's
checkpoint lets every answer an append woke be encoded before the first is sent;
tests/replication/test_follower_answers_together.py). The gap left between them (0.3-1.4 ms
under strace) is the kernel: a send on loopback wakes the follower on the sender's core and it
often takes that core before the leader's second sendmsg. Nodes under SCHED_BATCH (no wake-up
preemption), three runs each way alternated at load 22-30: no difference the noise would show
(p50 3-425 ms either way). The HW is the smallest log end offset of the maximal ISR, as in
Kafka (Partition.maybeIncrementLeaderHW): an acks=all wait ends when the last ISR follower has
fetched past it -- ending it at a majority would acknowledge records the controller may then
elect a leader without. Followers re-fetch at once after an answer (replica.fetch.wait.max.ms
500 and replica.fetch.min.bytes 1, Kafka's defaults; backoff only after an error). CPU
(py-spy --gil of a node at 5,000/s): flat; trio's cancel scopes were 12.5 % of the samples,
most of it a deadline around every socket read for connections.max.idle.ms, now one sweep
over the waiting connections. A read of a request costs 27.5 -> 20.5 us with it gone and the
raw socket read (microbenchmark, the recv itself ~20 us), a byte count 0.24 -> 0.02 us: ~30 us
of the 1.0-1.5 ms of CPU a record costs the three nodes, ~2 %, below what runs on this box
resolve. CPU per acks=all record over three in-process brokers (a one-off script, not kept),
old vs new alternated: medians 1.44 -> 1.21 ms in six rounds (load 17-36), 1.54 -> 1.68 ms
in four more (load 19-31). This bench at 500/s,
ten rounds each way alternated (load 13-30): nodes' CPU per record 0.9-1.4 ms either way (0.4
where records queued up and went in batches), e2e p99 160-730 ms (old) and 170-870 ms (new),
p50 3-220 / 4-210 ms: at that load the latencies are the box's, not the code's, and the 5 ms
goal needs a calm box.

CPU per record, counted 2026-11-26 (cpu22; the three nodes at 500 records/s, counts from
hooks in the nodes, CPU from /proc, shares from py-spy --gil over 20 s; box load 3-14). Per
acks=all record the nodes answer 4 requests and apply 2 fetch answers, not ~10:

    per record, all three nodes                    count        before -> after this session
    Produce acks=-1 answered (leader)              0.89-1.00
    Fetch from a follower, answered with records   1.81-1.89
    Fetch from a follower, answered empty          <= 0.002     (its 500 ms max wait ran out)
    Fetch from the consumer, answered with records 0.90-0.94
    fetch answers applied by the followers         1.81-1.89
    Raft AppendEntries / answers                   0.075 each   (the 50 ms heartbeat, 37/s)
    trio task steps, per Produce                                19.5-20.4 -> 14.5-14.7
    event-loop turns (epoll waits), per Produce                 9.7-11.2 -> 7.9-8.3
    CPU ms per record (this bench, 6 rows each way
    alternated, load 7-14; sys 0.14-0.21)                       1.35-1.87 -> 1.24-1.66
                                                                (medians 1.63 -> 1.48)

    user CPU by kind (py-spy --gil)                share before -> after
    follower: fetch request, answer, append        23 % -> 23 %
    connection: read, decode, encode, send         22 % -> 21 %
    leader: Fetch handler (session, read, wait)    19 % -> 21 %
    trio scheduler (task steps, epoll)             16 % -> 15 %
    leader: acks=all wait and answer                8 % -> 7 %
    leader: acks=all append                         4 % -> 4 %
    Raft tick thread                                3 % -> 4 %
    unattributed (truncated stacks)                 4 % -> 5 %

No follower fetch is answered empty per produce: the fetch that carries a follower's new
offset (and moves the HW) is the one that waits for the next record, and carries the new HW
with it. Idle, the three nodes use 0.08-0.10 of a core (Raft's 50 ms heartbeats, the
followers' 500 ms long polls): 0.16-0.20 ms per record at 500/s. (Since 2026-11-27 Raft
heartbeats every 75 ms and a follower's tick thread wakes only for them: an idle 3-node test
cluster 9.3 % of a core against 11.7 %.) No function holds more than ~3 %
of the samples: each request costs ~0.1-0.15 ms of Python spread over decoding, the handler,
encoding and trio's task steps, and the same four requests cost about half as much between
three brokers in one process (bench/node_cpu.py, 0.8-0.9 ms per record with its clients): a
node woken by a peer's message runs on caches the other processes just used, and pays its own
event-loop turn. Cut this session: trio's socket methods (a failed recv and an exception before
every wait, a scheduler checkpoint after every send: log/common/socket_io.py reads once after
readiness and writes with writev) and the codec's flexible-version paths (one-byte lengths and
empty tagged sections without a call: Fetch v17 decode 8.1 -> 5.8 us), and the segment keeps the
headers of the newest batches read (no header pread per fetch of the newest batch). Instructions
per record (bench/node_cpu.py under callgrind, which load does not move): 5.60 M -> 4.95 M
(-12 %; the rows above were run before the header cache, which is 1 % of it). In those six
rows each way, e2e p50 1.8-16 ms (old) and 1.5-5.7 ms (new), p99 47-305 and 10-301 ms: at load
7-14 the latencies are the box's, not the code's. Tried and dropped: answering non-Fetch
requests without the send lock's checkpoint (no change in instructions; fewer turns per produce
did not show). Halving it needs fewer Python layers per request (a handler path for a
one-partition follower session, the answer encoded without the response dataclasses), not
fewer requests.

    python -m bench.e2e_latency [--rates 500 5000] [--shares 0.1 0.5] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path

from bench.defaults_cluster import defaults_cluster  # noqa: E402
from bench.process_cpu import cpu_seconds
from bench.rows import emit
from tools.confluent_produce import produce_waiting
from tools.perf_measure import percentile

TOPIC = "e2e"
STAMP = struct.Struct(">d")
VALUE_BYTES = 100
PRODUCER_SETTINGS = {"acks": "all", "enable.idempotence": True}  # linger.ms: per row
CONSUMER_SETTINGS = {"auto.offset.reset": "latest", "enable.auto.commit": False,
                     "fetch.wait.max.ms": 100, "fetch.min.bytes": 1}  # fmt: skip


class Consumer:
    def __init__(self, bootstrap: str, group: str) -> None:
        from confluent_kafka import Consumer as KafkaConsumer

        self.consumer = KafkaConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_SETTINGS}
        )
        self.latencies: list[float] = []
        self.count = 0
        self.stop = threading.Event()
        self.assigned = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.consumer.subscribe([TOPIC], on_assign=lambda c, parts: self.assigned.set())
        while not self.stop.is_set():
            # poll() returns as soon as a record is there. consume(n, timeout) waits for all n
            # or the timeout, so its timeout was measured as latency (with 1 ms: +0.8 ms p50,
            # traced per hop: the consumer's fetch answered -> the record in this thread).
            message = self.consumer.poll(0.05)
            if message is not None and message.error() is None:
                now = time.monotonic()
                self.latencies.append(now - STAMP.unpack_from(message.value())[0])
                self.count += 1
        self.consumer.close()


class RequestStats:
    """librdkafka's own figures for each produce request, from its statistics callback (one
    JSON document per `statistics.interval.ms`, per broker: `rtt`, the request's round trip
    from send to answer, and `int_latency`, a record's wait in the client's queue before it is
    put in a request; each a histogram over the interval, in microseconds)."""

    INTERVAL_MS = 1000

    def __init__(self) -> None:
        self.windows: list[tuple[float, float, float]] = []  # (rtt p50, rtt p99, queue p99)
        self.recording = False

    def on_stats(self, document: str) -> None:
        if not self.recording:
            return
        for broker in json.loads(document).get("brokers", {}).values():
            rtt, queue = broker.get("rtt", {}), broker.get("int_latency", {})
            if rtt.get("cnt"):
                self.windows.append((rtt["p50"] / 1000, rtt["p99"] / 1000, queue["p99"] / 1000))

    def summary(self) -> dict:
        """The medians over the row's windows and brokers (ms)."""
        if not self.windows:
            return {}
        rtt50, rtt99, queue99 = (statistics.median(w[i] for w in self.windows) for i in range(3))
        return {"rtt_p50_ms": rtt50, "rtt_p99_ms": rtt99, "queue_p99_ms": queue99}


def _serve_callbacks(producer, serving: threading.Event) -> None:
    while serving.is_set():
        producer.poll(0.05)  # blocks in librdkafka (GIL released) until a callback is due


def produce(producer, count: int, rate_per_s: float | None, acked: list | None = None) -> float:
    """Send `count` stamped records (paced when `rate_per_s`); seconds it took to ack all.
    With `acked`, each record's send-to-acknowledgement seconds are appended to it."""
    padding = b"x" * (VALUE_BYTES - STAMP.size)
    options = {}
    start = time.monotonic()
    for i in range(count):
        if rate_per_s is not None:
            # Sleep, never poll(timeout), to wait: confluent-kafka truncates a poll timeout to
            # whole milliseconds, so poll(<1 ms) spins and the client eats a core the nodes need.
            if (delay := start + i / rate_per_s - time.monotonic()) > 0:
                time.sleep(max(delay, 0.001))
                producer.poll(0)
        sent = time.monotonic()
        if acked is not None:
            options["on_delivery"] = lambda _error, _message, sent=sent: acked.append(
                time.monotonic() - sent
            )
        produce_waiting(producer, TOPIC, STAMP.pack(sent) + padding, poll_s=0.001, **options)
        producer.poll(0)
    producer.flush(120)
    return time.monotonic() - start


def run(args: argparse.Namespace, workdir: Path) -> list[dict]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = defaults_cluster(workdir, 3)
    cluster.start_all()
    try:
        bootstrap = cluster.layout.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(60)
        producers, request_stats = {}, {}
        for linger_ms in args.linger_ms:
            settings = {**PRODUCER_SETTINGS, "linger.ms": linger_ms}
            stats = request_stats[linger_ms] = RequestStats()
            producers[linger_ms] = Producer({"bootstrap.servers": bootstrap, **settings,
                                             "statistics.interval.ms": stats.INTERVAL_MS,
                                             "stats_cb": stats.on_stats})  # fmt: skip
            produce(producers[linger_ms], 1000, None)  # warm-up: connections, producer id
        # The peak: the fastest of the settings (a higher peak makes its shares harder).
        peak = max(args.peak_count / produce(p, args.peak_count, None) for p in producers.values())
        node_pids = [p.pid for p in cluster.processes.values()]
        rows = []
        # Fixed rates first, the shares of the peak after, ascending: a row leaves the box's
        # load average raised for the next (the 50 % row saturates the client).
        loads = [(f"{rate:,.0f}/s ({rate / peak:.1%} of peak)", rate) for rate in args.rates]
        loads += [(f"{share:.0%} of peak", peak * share) for share in sorted(args.shares)]
        for label, rate in loads:
            for linger_ms, producer in producers.items():
                stats = request_stats[linger_ms]
                stats.windows.clear()
                stats.recording = True
                row = _row(args, bootstrap, producer, node_pids, label, rate)
                stats.recording = False
                rows.append({**row, **stats.summary(), "linger_ms": linger_ms,
                             "peak_per_s": peak})  # fmt: skip
        return rows
    finally:
        cluster.stop_all()


def _row(args: argparse.Namespace, bootstrap: str, producer, node_pids: list[int], label: str,
         rate: float) -> dict:  # fmt: skip
    """One row: `rate` records/s for `args.seconds` through `producer`, read by a new consumer."""
    consumer = Consumer(bootstrap, f"e2e-{label}-{time.monotonic()}")
    consumer.thread.start()
    consumer.assigned.wait(60)
    time.sleep(1)  # the consumer's first fetches are in flight
    count = int(rate * args.seconds)
    nodes_before, client_before = cpu_seconds(node_pids), cpu_seconds([os.getpid()])
    start = time.monotonic()
    acked: list[float] = []
    # Delivery callbacks run in whichever thread polls: this one serves them as they
    # arrive (the produce loop polls only after each pacing sleep, up to 2 ms late).
    serving = threading.Event()
    server = threading.Thread(target=_serve_callbacks, args=(producer, serving))
    serving.set()
    server.start()
    produce(producer, count, rate, acked)
    serving.clear()
    server.join(30)
    deadline = time.monotonic() + 30
    while consumer.count < count and time.monotonic() < deadline:
        time.sleep(0.05)
    elapsed = time.monotonic() - start
    nodes_cpu_s = cpu_seconds(node_pids) - nodes_before
    client_cpu = (cpu_seconds([os.getpid()]) - client_before) / elapsed
    consumer.stop.set()
    consumer.thread.join(30)
    samples = sorted(s * 1000 for s in consumer.latencies)
    acks = sorted(s * 1000 for s in acked)
    return {"load": label, "rate_per_s": rate, "received": len(samples), "sent": count,
            "p50_ms": statistics.median(samples), "p99_ms": percentile(samples, 0.99),
            "p999_ms": percentile(samples, 0.999),
            "ack_p50_ms": statistics.median(acks), "ack_p99_ms": percentile(acks, 0.99),
            "nodes_cpu_pct": 100 * nodes_cpu_s / elapsed, "client_cpu_pct": 100 * client_cpu,
            "nodes_cpu_ms_per_record": 1000 * nodes_cpu_s / count,
            "load_avg_1m": os.getloadavg()[0], "cores": os.cpu_count()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shares", type=float, nargs="*", default=[0.1, 0.5])
    parser.add_argument("--rates", type=float, nargs="*", default=[500])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--peak-count", type=int, default=50_000)
    parser.add_argument("--linger-ms", type=float, nargs="+", default=[0, 1])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        rows = run(args, Path(tmp))
    print(f"producer {PRODUCER_SETTINGS} (linger.ms per row), consumer {CONSUMER_SETTINGS}, "
          f"{VALUE_BYTES}-byte values, 3 partitions, RF 3, min.insync.replicas 2")  # fmt: skip
    print(f"peak {rows[0]['peak_per_s']:,.0f}/s; CPU in % of one core, {os.cpu_count()} cores; "
          "load: the 1-minute load average at the row's end")  # fmt: skip
    print(
        "| load | linger.ms | records/s | received | p50 ms | p99 ms | p99.9 ms "
        "| acked p50 / p99 ms | request rtt p50 / p99 ms | queue p99 ms | nodes CPU "
        "| nodes CPU ms/record | client CPU | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['load']} | {r['linger_ms']:g} | {r['rate_per_s']:,.0f} "
              f"| {r['received']:,}/{r['sent']:,} "
              f"| {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['p999_ms']:.1f} "
              f"| {r['ack_p50_ms']:.1f} / {r['ack_p99_ms']:.1f} "
              f"| {r.get('rtt_p50_ms', 0):.1f} / {r.get('rtt_p99_ms', 0):.1f} "
              f"| {r.get('queue_p99_ms', 0):.1f} "
              f"| {r['nodes_cpu_pct']:.0f} % | {r['nodes_cpu_ms_per_record']:.2f} "
              f"| {r['client_cpu_pct']:.0f} % "
              f"| {r['load_avg_1m']:.1f} |")  # fmt: skip
    emit("e2e_latency", rows)


if __name__ == "__main__":
    main()
