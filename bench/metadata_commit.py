"""Metadata commit benchmark: quorum.raft on 3 local controller processes vs raw pysyncobj.

    python bench/metadata_commit.py [--records N] [--quick]

Starts 3 controller processes on loopback (each `RaftNode` with fsync'd journals in a temp dir),
then measures on the leader:
  * single records, one at a time: commit latency p50/p99 and committed records/s;
  * single records, 32 proposers at once;
  * batches of 100 records (100 B each) per proposal, one at a time and 8 at once;
then 3 raw pysyncobj processes (its own `ReplCounter`, default SyncObjConf, in-memory journal:
how pysyncobj's README benchmark runs) for the reference rate: sequential `sync=True` increments
and pipelined increments with callbacks (1000 in flight). Prints one table.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD_BYTES = 100
BATCH_RECORDS = 100


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def summarize(latencies_s: list[float], elapsed_s: float, records: int) -> dict:
    latencies_s = sorted(latencies_s)
    n = len(latencies_s)
    return {
        "records_per_s": records / elapsed_s,
        "p50_ms": latencies_s[n // 2] * 1e3 if n else None,
        "p99_ms": latencies_s[min(n - 1, int(n * 0.99))] * 1e3 if n else None,
        "proposals": n,
    }


# -- node processes ---------------------------------------------------------------------------


class CountingStateMachine:
    """Counts applied records; the checkpoint is the count (with a CRC, like the real one)."""

    def __init__(self, count: int = 0) -> None:
        self.count = count
        self.last_applied_offset = 0

    def apply(self, metadata_offset: int, payload: bytes) -> object:
        self.count += max(1, len(payload) // RECORD_BYTES)
        self.last_applied_offset = metadata_offset
        return self.count

    def to_checkpoint(self) -> bytes:
        import crc32c

        body = self.count.to_bytes(8, "little")
        return body + crc32c.crc32c(body).to_bytes(4, "little")

    @classmethod
    def from_checkpoint(cls, data: bytes) -> CountingStateMachine:
        import crc32c

        if len(data) != 12 or crc32c.crc32c(data[:8]) != int.from_bytes(data[8:], "little"):
            raise ValueError("bad checkpoint")
        return cls(int.from_bytes(data[:8], "little"))


def quorum_node(addresses: list[str], index: int, data_dir: str) -> None:
    import trio

    from quorum.raft import RaftConfig, RaftNode

    config = RaftConfig(
        self_address=addresses[index],
        partner_addresses=tuple(a for i, a in enumerate(addresses) if i != index),
        data_dir=data_dir,
        password="bench-password",
    )

    async def bench(node: RaftNode, cmd: dict) -> dict:
        n, batch_records, concurrency = cmd["n"], cmd["batch_records"], cmd["concurrency"]
        payload = os.urandom(RECORD_BYTES * batch_records)
        latencies: list[float] = []
        remaining = [n]

        async def proposer() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                start = time.perf_counter()
                with trio.fail_after(10):
                    await node.propose(payload)
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(proposer)
        return summarize(latencies, time.perf_counter() - start, n * batch_records)

    async def main() -> None:
        stdin = trio.lowlevel.FdStream(os.dup(0))
        async with RaftNode(config, state_machine_factory=CountingStateMachine) as node:
            out({"ev": "ready"})
            buffer = b""
            while True:
                chunk = await stdin.receive_some(65536)
                if not chunk:
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    cmd = json.loads(line)
                    if cmd["op"] == "status":
                        out({"is_leader": node.is_leader})
                    elif cmd["op"] == "propose_one":
                        try:
                            with trio.fail_after(2):
                                await node.propose(b"x" * RECORD_BYTES)
                            out({"ok": True})
                        except Exception as e:
                            out({"ok": False, "error": repr(e)})
                    elif cmd["op"] == "bench":
                        out(await bench(node, cmd))

    trio.run(main)


def raw_bench_async(counter, n: int, window: int) -> dict:
    from pysyncobj import FAIL_REASON

    in_flight = threading.Semaphore(window)
    done = threading.Event()
    state = {"done": 0, "ok": 0}
    lock = threading.Lock()

    def callback(result, error):
        with lock:
            state["done"] += 1
            state["ok"] += error == FAIL_REASON.SUCCESS
            if state["done"] == n:
                done.set()
        in_flight.release()

    start = time.perf_counter()
    for _ in range(n):
        in_flight.acquire()
        counter.inc(callback=callback)
    done.wait(60)
    return summarize([], time.perf_counter() - start, state["ok"])


def raw_node(addresses: list[str], index: int) -> None:
    from pysyncobj import SyncObj
    from pysyncobj.batteries import ReplCounter

    counter = ReplCounter()
    others = [a for i, a in enumerate(addresses) if i != index]
    node = SyncObj(addresses[index], others, consumers=[counter])  # pysyncobj's defaults
    out({"ev": "ready"})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "status":
            out({"is_leader": node._isLeader()})
        elif cmd["op"] == "bench_sync":
            latencies = []
            start = time.perf_counter()
            for _ in range(cmd["n"]):
                t = time.perf_counter()
                counter.inc(sync=True, timeout=10)
                latencies.append(time.perf_counter() - t)
            out(summarize(latencies, time.perf_counter() - start, cmd["n"]))
        elif cmd["op"] == "bench_async":
            out(raw_bench_async(counter, cmd["n"], cmd["window"]))
    node.destroy()


# -- driver -----------------------------------------------------------------------------------


class Proc:
    def __init__(self, args: list[str]) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.get(30)["ev"] == "ready"

    def _pump(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(json.loads(raw))

    def get(self, timeout_s: float) -> dict:
        return self.lines.get(timeout=timeout_s)

    def request(self, timeout_s: float = 120, **cmd: object) -> dict:
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        return self.get(timeout_s)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


RAW_TIMEOUT_S = 60  # one raw pysyncobj case; it fails (no answer) if leadership moves


def free_addresses(count: int) -> list[str]:
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    addresses = [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]
    for s in socks:
        s.close()
    return addresses


def find_leader(procs: list[Proc]) -> Proc:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for p in procs:
            if p.request(op="status")["is_leader"]:
                return p
        time.sleep(0.05)
    raise RuntimeError("no leader")


def measure_failover(procs: list[Proc], args_for: list[list[str]], rounds: int) -> dict:
    """kill -9 the leader `rounds` times: time to a new leader and to its first commit."""
    elected_s, committed_s = [], []
    for _ in range(rounds):
        leader = find_leader(procs)
        index = procs.index(leader)
        leader.kill()
        killed_at = time.perf_counter()
        survivors = [p for p in procs if p is not leader]
        new_leader = None
        while new_leader is None and time.perf_counter() - killed_at < 10:
            new_leader = next((p for p in survivors if p.request(op="status")["is_leader"]), None)
        assert new_leader is not None, "no new leader within 10 s"
        elected_s.append(time.perf_counter() - killed_at)
        while not new_leader.request(op="propose_one")["ok"]:
            time.sleep(0.01)
        committed_s.append(time.perf_counter() - killed_at)
        procs[index] = Proc(args_for[index])  # restart on its own files
        time.sleep(1.0)  # let it catch up before the next round
    return {"elected_s": sorted(elected_s), "committed_s": sorted(committed_s)}


def run(records: int, failover_rounds: int) -> tuple[list[tuple[str, dict]], dict]:
    rows = []
    addresses = free_addresses(3)
    with tempfile.TemporaryDirectory() as tmp:
        args_for = [["quorum-node", json.dumps(addresses), str(i), f"{tmp}/n{i}"] for i in range(3)]
        procs = [Proc(args) for args in args_for]
        try:
            leader = find_leader(procs)
            leader.request(op="bench", n=20, batch_records=1, concurrency=1)  # warm-up
            cases = [
                ("quorum.raft  1 record/commit, sequential", records, 1, 1),
                ("quorum.raft  1 record/commit, 32 concurrent", records * 4, 1, 32),
                (f"quorum.raft  {BATCH_RECORDS} records/commit, sequential", records // 2, 100, 1),
                (f"quorum.raft  {BATCH_RECORDS} records/commit, 8 concurrent", records, 100, 8),
            ]
            for name, n, batch, concurrency in cases:
                result = leader.request(
                    op="bench", n=n, batch_records=batch, concurrency=concurrency
                )
                rows.append((name, result))
            failover = measure_failover(procs, args_for, failover_rounds)
        finally:
            for p in procs:
                p.kill()
    addresses = free_addresses(3)
    procs = [Proc(["raw-node", json.dumps(addresses), str(i)]) for i in range(3)]
    raw_cases = [
        ("raw pysyncobj ReplCounter, defaults, sync=True", {"op": "bench_sync", "n": 30}),
        ("raw pysyncobj ReplCounter, defaults, pipelined",
         {"op": "bench_async", "n": records * 20, "window": 1000}),
    ]  # fmt: skip
    try:
        for name, cmd in raw_cases:
            try:  # the peer: a failure (e.g. lost leadership on a loaded machine) is a row
                rows.append((name, find_leader(procs).request(timeout_s=RAW_TIMEOUT_S, **cmd)))
            except (queue.Empty, RuntimeError, OSError) as exc:
                print(f"{name}: failed ({type(exc).__name__})", file=sys.stderr)
                rows.append((name, {"records_per_s": None, "p50_ms": None, "p99_ms": None,
                                    "proposals": None, "error": "failed"}))  # fmt: skip
    finally:
        for p in procs:
            p.kill()
    return rows, failover


def emit_rows(rows: list[tuple[str, dict]], failover: dict) -> None:
    """Rows as data for `python -m bench` (bench/rows.py's format; this script runs by path)."""
    path = os.environ.get("QUORUMLOG_BENCH_JSON")
    if path:
        with open(path, "a") as out:
            cases = [{"case": name, **result} for name, result in rows]
            out.write(json.dumps({"section": "metadata_commit", "rows": cases}) + "\n")
            out.write(json.dumps({"section": "metadata_failover", "rows": [failover]}) + "\n")


def print_table(rows: list[tuple[str, dict]]) -> None:
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f}"

    header = f"{'case':<52} {'records/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'commits':>8}"
    print(header)
    print("-" * len(header))
    for name, r in rows:
        print(
            f"{name:<52} {fmt(r['records_per_s']):>11} {fmt(r['p50_ms']):>8} "
            f"{fmt(r['p99_ms']):>8} {r['proposals'] or '-':>8}"
        )


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "quorum-node":
        quorum_node(json.loads(args[1]), int(args[2]), args[3])
    elif args and args[0] == "raw-node":
        raw_node(json.loads(args[1]), int(args[2]))
    else:
        records = 100 if "--quick" in args else 500
        if "--records" in args:
            records = int(args[args.index("--records") + 1])
        rows, failover = run(records, failover_rounds=3 if "--quick" in args else 5)
        print_table(rows)
        emit_rows(rows, failover)
        for key, label in (("elected_s", "new leader"), ("committed_s", "first commit")):
            values = ", ".join(f"{v:.2f}" for v in failover[key])
            print(f"kill -9 leader -> {label} (s, sorted): {values}")


if __name__ == "__main__":
    main()
