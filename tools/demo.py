"""`quorumlog demo` (`make demo`): a 3-node cluster, a topic, a dataset written and verified.

1. Start a LocalCluster of DEMO_NODE_COUNT nodes in a temporary directory on free ports.
2. Create the topic (DEMO_PARTITIONS partitions, DEMO_REPLICATION_FACTOR replicas,
   min.insync.replicas DEMO_MIN_INSYNC_REPLICAS); the nodes use a short broker session
   (DEMO_NODE_PROPERTIES) so that a dead broker is fenced within seconds.
3. Fail-over drill, during the write: once FAILOVER_AT_FRACTION of the rows are in, the node
   leading partition 0 is killed with SIGKILL; the drill measures the fail-over time (kill ->
   the metadata shows partition 0 with another leader), restarts the node on the same
   directory after RESTART_DELAY_S and waits until it is ready again (its logs recover,
   its replicas catch up). The write goes on through all of it (acks=all, idempotent):
   the check below proves that no acknowledged row was lost or duplicated.
4. Write and verify a dataset. When the Spark pipeline (`spark/pipeline.py`) is importable,
   it does both: it writes --rows rows through the Spark data source with `exactlyOnce` on
   (each task's transaction prepared, the job committed as one), reads them back
   read_committed and checks counts and checksums per partition and, row by row, that no row
   is duplicated or missing; any of those fails the demo. Otherwise our
   own clients do it: the Producer's bulk path (send_many, keyed rows, acks=all,
   idempotent) writes the rows, the FetchClient reads every partition back from its log
   start to its high watermark, and each partition's record count and CRC-32 over its
   (key, value) pairs in offset order must match what the producer's acknowledgements said.
5. Print a report (records, throughput, fail-over, per-partition leader, ISR and offsets)
   and stop the
   cluster cleanly; Ctrl-C stops it too. The directory is removed unless --keep-data (or
   the demo failed: then its node logs are kept for inspection).
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import click
import trio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from log.common.errors import ErrorCode, KafkaError
from producer.fetch_client import FetchClient
from producer.producer import Producer
from tools.admin_client import AdminClient
from tools.cli_support import EXIT_ERROR, first_leaf
from tools.cluster_layout import ClusterLayout
from tools.interrupt import EXIT_INTERRUPTED, caused_by_interrupt
from tools.up import ClusterNotReadyError, LocalCluster

DEMO_NODE_COUNT = 3
DEMO_TOPIC = "demo-events"
DEMO_PARTITIONS = 6
DEMO_REPLICATION_FACTOR = 3
DEMO_MIN_INSYNC_REPLICAS = 2  # acks=all survives one node down
# Fence a dead broker quickly (defaults: 9000/2000 ms), so fail-over takes ~2 s; two-phase
# commit on, for the Spark pipeline's exactly-once write (KIP-939 prepared transactions).
DEMO_NODE_PROPERTIES = (
    ("broker.session.timeout.ms", 1500),
    ("broker.heartbeat.interval.ms", 300),
    ("transaction.two.phase.commit.enable", True),
)
FAILOVER_AT_FRACTION = 0.2  # kill the leader once this share of the rows is in
FAILOVER_POLL_S = 0.05
TRACK_INTERVAL_S = 0.5  # how often the Spark write's progress bar asks for the record count
RESTART_DELAY_S = 3.0  # the killed node stays down this long
FAILOVER_TIMEOUT_S = 60.0
ISR_SETTLE_TIMEOUT_S = 30.0  # after the restart: the node rejoins every ISR
DEFAULT_ROWS = 100_000  # about a minute end to end on 2 cores with Spark, seconds without
VALUE_BYTES = 100
CHUNK_ROWS = 10_000  # rows per send_many call
CREATE_TOPIC_TIMEOUT_S = 60.0  # brokers register with the controller right after READY
PORT_ATTEMPTS = 200


class DemoFailedError(Exception):
    """The data read back does not match what was written (or the pipeline said so)."""


@dataclass
class PartitionCheck:
    records: int = 0
    crc: int = 0
    first_offset: int = -1
    last_offset: int = -1


@dataclass
class DemoResult:
    path: str
    rows: int
    write_s: float
    read_s: float
    partitions: dict[int, dict] = field(default_factory=dict)
    failover: FailoverReport | None = None
    delivery: str = ""  # the Spark pipeline's computed delivery line ("exactly once ...")


@dataclass
class FailoverReport:
    killed_node_id: int = -1
    old_leader_epoch: int = -1
    killed_at_records: int = 0  # records in the topic when the kill happened
    was_controller: bool = False  # the victim was also the active controller (a Raft election)
    failover_ms: float | None = None  # kill -> partition 0 led by another broker (metadata)
    new_leader: int = -1
    restart_ready_ms: float | None = None  # restart -> the node said READY
    isr_restored_ms: float | None = None  # restart -> every partition's ISR full again
    note: str = ""


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port(node_count: int) -> int:
    """A base port whose Kafka, controller (+100) and Raft (+200) ports are all free now."""
    rng = random.Random()
    for _ in range(PORT_ATTEMPTS):
        base = rng.randrange(20000, 32000 - 200 - node_count)  # below the ephemeral range
        offsets = (0, 100, 200, 300)  # Kafka, controller, Raft, metrics
        if all(_port_free(base + k + i) for k in offsets for i in range(node_count)):
            return base
    raise click.ClickException("no free ports for the demo cluster")


def demo_row(index: int) -> tuple[bytes, bytes]:
    """Row `index` of the synthetic dataset: a key spreading rows over partitions, a value."""
    key = f"user-{index % 9973}".encode()
    body = f"row={index};".encode()
    return key, body + b"x" * max(0, VALUE_BYTES - len(body))


def fold(check: PartitionCheck, offset: int, key: bytes | None, value: bytes | None) -> None:
    """Add one record (in offset order) to a partition's count and CRC-32."""
    check.records += 1
    check.crc = zlib.crc32(value or b"", zlib.crc32(key or b"", check.crc))
    if check.first_offset < 0:
        check.first_offset = offset
    check.last_offset = offset


async def create_topic(bootstrap: str) -> None:
    """Create the demo topic, retrying while the brokers finish registering."""
    async with AdminClient(bootstrap) as admin:
        with trio.fail_after(CREATE_TOPIC_TIMEOUT_S):
            while True:
                try:
                    await admin.create_topic(
                        DEMO_TOPIC,
                        DEMO_PARTITIONS,
                        DEMO_REPLICATION_FACTOR,
                        {"min.insync.replicas": str(DEMO_MIN_INSYNC_REPLICAS)},
                    )
                    return
                except KafkaError as exc:
                    if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                        return
                    if exc.error_code not in (
                        ErrorCode.INVALID_REPLICATION_FACTOR,  # not every broker registered yet
                        ErrorCode.NOT_CONTROLLER,
                        ErrorCode.REQUEST_TIMED_OUT,
                        ErrorCode.NETWORK_EXCEPTION,
                        ErrorCode.BROKER_NOT_AVAILABLE,
                    ):
                        raise
                await trio.sleep(0.2)


async def _describe(bootstrap: str):  # noqa: ANN202 - TopicDescription or None
    """The demo topic as the metadata shows it now; None while no broker answers."""
    try:
        with trio.fail_after(3):
            async with AdminClient(bootstrap, request_timeout_ms=2000) as admin:
                return await admin.describe_topic(DEMO_TOPIC)
    except (KafkaError, OSError, trio.TooSlowError):
        return None


async def _active_controller(bootstrap: str) -> int | None:
    """The active controller's node (DescribeCluster names it: the demo's nodes are combined
    broker and controller nodes); None while no broker answers."""
    try:
        with trio.fail_after(3):
            async with AdminClient(bootstrap, request_timeout_ms=2000) as admin:
                return (await admin.describe_cluster()).controller_id
    except (KafkaError, OSError, trio.TooSlowError):
        return None


async def _records_in(bootstrap: str) -> int | None:
    try:
        with trio.fail_after(3):
            async with AdminClient(bootstrap, request_timeout_ms=2000) as admin:
                marks = await admin.high_watermarks(DEMO_TOPIC, range(DEMO_PARTITIONS))
        return sum(marks.values())
    except (KafkaError, OSError, trio.TooSlowError):
        return None


async def _track_records_in(bootstrap: str, progress: Progress, task) -> None:  # noqa: ANN001
    """Show the topic's record count (the sum of its high watermarks) until cancelled."""
    while True:
        count = await _records_in(bootstrap)
        if count is not None:
            progress.update(task, completed=count)
        await trio.sleep(TRACK_INTERVAL_S)


async def failover_drill(
    cluster: LocalCluster, rows: int, write_done: trio.Event, console: Console
) -> FailoverReport:
    """Kill -9 partition 0's leader during the write, time the fail-over, restart the node."""
    bootstrap = cluster.bootstrap_servers
    report = FailoverReport()
    threshold = max(1, int(rows * FAILOVER_AT_FRACTION))
    with trio.fail_after(FAILOVER_TIMEOUT_S * 5):  # the write itself may take minutes
        while True:
            count = await _records_in(bootstrap)
            if count is not None and count >= threshold:
                break
            if write_done.is_set():
                report.note = "the write finished before the kill (too few rows)"
                break
            await trio.sleep(FAILOVER_POLL_S)
    with trio.fail_after(FAILOVER_TIMEOUT_S):
        while (description := await _describe(bootstrap)) is None:
            await trio.sleep(FAILOVER_POLL_S)
    partition0 = description.partitions[0]
    victim = cluster.nodes[partition0.leader - 1]
    report.killed_node_id, report.old_leader_epoch = victim.node_id, partition0.leader_epoch
    report.killed_at_records = count or 0
    report.was_controller = await _active_controller(bootstrap) == victim.node_id
    killed_s = time.perf_counter()
    victim.signal(signal.SIGKILL)
    console.print(f"fail-over drill: SIGKILL node {victim.node_id} (leader of partition 0"
                  f"{_ALSO_CONTROLLER if report.was_controller else ''}, leader epoch "
                  f"{partition0.leader_epoch}) at {report.killed_at_records} records")  # fmt: skip
    with trio.fail_after(FAILOVER_TIMEOUT_S):
        while True:
            description = await _describe(bootstrap)
            if description is not None:
                leader = description.partitions[0].leader
                if leader >= 0 and leader != victim.node_id:
                    report.failover_ms = (time.perf_counter() - killed_s) * 1000
                    report.new_leader = leader
                    break
            await trio.sleep(FAILOVER_POLL_S)
    console.print(f"fail-over drill: partition 0 led by node {report.new_leader} after "
                  f"{report.failover_ms:.0f} ms")  # fmt: skip
    assert victim.process is not None
    await victim.process.wait()
    await trio.sleep(max(0.0, RESTART_DELAY_S - (time.perf_counter() - killed_s)))
    restarted_s = time.perf_counter()
    async with trio.open_nursery() as nursery:
        await victim.restart(nursery)
        with trio.fail_after(FAILOVER_TIMEOUT_S):
            await victim.ready.wait()
    report.restart_ready_ms = (time.perf_counter() - restarted_s) * 1000
    console.print(f"fail-over drill: node {victim.node_id} restarted, ready after "
                  f"{report.restart_ready_ms:.0f} ms")  # fmt: skip
    with trio.move_on_after(ISR_SETTLE_TIMEOUT_S):
        while True:
            description = await _describe(bootstrap)
            if description is not None and all(
                len(p.isr) == DEMO_REPLICATION_FACTOR for p in description.partitions
            ):
                report.isr_restored_ms = (time.perf_counter() - restarted_s) * 1000
                break
            await trio.sleep(0.2)
    await write_done.wait()
    return report


async def _with_drill(cluster: LocalCluster, rows: int, console: Console, write):  # noqa: ANN001, ANN202
    """Run `write()` (an async callable) while the fail-over drill runs; (its result, report)."""
    write_done = trio.Event()
    outcome: list = []
    reports: list[FailoverReport] = []

    async def drill() -> None:
        reports.append(await failover_drill(cluster, rows, write_done, console))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drill)
        try:
            outcome.append(await write())
        finally:
            write_done.set()
    return outcome[0], reports[0]


async def write_rows(bootstrap: str, rows: int, progress: Progress) -> dict[int, PartitionCheck]:
    """Produce the dataset (bulk path); per partition what the acknowledgements say."""
    task = progress.add_task("writing rows (Producer.send_many)", total=rows)
    written: dict[int, list[tuple[int, int]]] = {}  # partition -> [(offset, row index)]
    async with Producer(bootstrap, acks=-1, linger_ms=5, batch_size=256 * 1024) as producer:
        deliveries = []
        for start in range(0, rows, CHUNK_ROWS):
            indices = range(start, min(rows, start + CHUNK_ROWS))
            keyed = [demo_row(i) for i in indices]
            delivery = await producer.send_many(
                DEMO_TOPIC, [v for _, v in keyed], keys=[k for k, _ in keyed]
            )
            deliveries.append((indices, delivery))
            progress.advance(task, len(indices))
        for indices, delivery in deliveries:
            for index, metadata in zip(indices, await delivery.wait(), strict=True):
                written.setdefault(metadata.partition, []).append((metadata.offset, index))
    checks: dict[int, PartitionCheck] = {}
    for partition, entries in written.items():
        check = checks.setdefault(partition, PartitionCheck())
        for offset, index in sorted(entries):
            fold(check, offset, *demo_row(index))
    return checks


async def read_back(bootstrap: str, progress: Progress, total: int) -> dict[int, PartitionCheck]:
    task = progress.add_task("reading back (FetchClient)", total=total)
    checks: dict[int, PartitionCheck] = {}
    async with FetchClient(bootstrap) as client:
        for partition in range(await client.partition_count(DEMO_TOPIC)):
            check = checks.setdefault(partition, PartitionCheck())
            start = await client.earliest_offset(DEMO_TOPIC, partition)
            async for record in client.iter_records(DEMO_TOPIC, partition, start):
                fold(check, record.offset, record.key, record.value)
                if check.records % 1000 == 0:
                    progress.advance(task, 1000)
    progress.update(task, completed=sum(c.records for c in checks.values()))
    return checks


def _verify(written: dict[int, PartitionCheck], read: dict[int, PartitionCheck]) -> None:
    for partition in sorted(set(written) | set(read)):
        w = written.get(partition, PartitionCheck())
        r = read.get(partition, PartitionCheck())
        if (w.records, w.crc) != (r.records, r.crc):
            raise DemoFailedError(
                f"partition {partition}: wrote {w.records} records (crc {w.crc:08x}), "
                f"read {r.records} (crc {r.crc:08x})"
            )


def _load_pipeline():  # noqa: ANN202 - the spark.pipeline module or None
    try:
        import spark.pipeline as pipeline  # the `spark` branch; lazily, it pulls in pyspark
    except ImportError as exc:
        return None, f"{exc}"
    return pipeline, None


def _run_pipeline(pipeline, bootstrap: str, rows: int):  # noqa: ANN001, ANN202 - Verification
    """The pipeline with exactlyOnce on; its Verification (counted from the data read back)."""
    args = pipeline.parse_args(
        ["--bootstrap", bootstrap, "--topic", DEMO_TOPIC, "--rows", str(rows), "--exactly-once"]
    )
    verification = pipeline.verify_run(args)
    pipeline.print_verification(verification, DEMO_TOPIC, args.writer)
    return verification


class DemoInterruptedError(Exception):
    """SIGINT/SIGTERM arrived; the cluster was stopped."""


async def run_demo(
    data_dir: Path, rows: int, console: Console, base_port: int | None = None
) -> DemoResult:
    """The demo; SIGINT (Ctrl-C) or SIGTERM cancels it, and the cluster is stopped either way."""
    result: list[DemoResult] = []
    interrupted = False
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def work() -> None:
                result.append(await _demo(data_dir, rows, console, base_port))
                nursery.cancel_scope.cancel()

            async def watch() -> None:
                nonlocal interrupted
                async for _signum in signals:
                    interrupted = True
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(work)
            nursery.start_soon(watch)
    if interrupted or not result:
        raise DemoInterruptedError()
    return result[0]


async def _demo(data_dir: Path, rows: int, console: Console, base_port: int | None) -> DemoResult:
    layout = ClusterLayout(
        data_dir,
        DEMO_NODE_COUNT,
        base_port or free_base_port(DEMO_NODE_COUNT),
        extra_properties=DEMO_NODE_PROPERTIES,
    )
    with console.status(f"starting {DEMO_NODE_COUNT} nodes in {data_dir} ..."):
        cluster = LocalCluster(layout, echo=lambda m, err=False: console.print(m))
        await cluster.__aenter__()
    try:
        return await _run_on_cluster(cluster, rows, console)
    finally:
        with console.status("stopping the cluster ..."):
            await cluster.__aexit__(None, None, None)


async def _run_on_cluster(cluster: LocalCluster, rows: int, console: Console) -> DemoResult:
    bootstrap = cluster.bootstrap_servers
    console.print(f"[green]cluster ready[/]: bootstrap servers {bootstrap}")
    with console.status(f"creating topic {DEMO_TOPIC} ({DEMO_PARTITIONS} partitions) ..."):
        await create_topic(bootstrap)
    pipeline, why_not = _load_pipeline()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    if pipeline is not None:
        console.print("running the Spark pipeline (spark/pipeline.py) ...")
        start = time.perf_counter()

        async def spark_write():  # noqa: ANN202 - spark.pipeline.Verification
            return await trio.to_thread.run_sync(
                _run_pipeline, pipeline, bootstrap, rows, abandon_on_cancel=True
            )

        with Progress(*columns, console=console) as progress:
            task = progress.add_task("Spark write (records in the topic)", total=rows)
            async with trio.open_nursery() as tracking:
                tracking.start_soon(_track_records_in, bootstrap, progress, task)
                verification, failover = await _with_drill(cluster, rows, console, spark_write)
                tracking.cancel_scope.cancel()
        if not verification.ok:
            raise DemoFailedError(f"the Spark pipeline's check: {verification.delivery_line()}")
        result = DemoResult("Spark data source", rows, time.perf_counter() - start, 0.0)
        result.failover = failover
        result.delivery = verification.delivery_line()
    else:
        console.print(
            f"Spark pipeline not available ({why_not}); using our Producer and FetchClient"
        )
        with Progress(*columns, console=console) as progress:
            start = time.perf_counter()
            written, failover = await _with_drill(
                cluster, rows, console, lambda: write_rows(bootstrap, rows, progress)
            )
            write_s = time.perf_counter() - start
            start = time.perf_counter()
            read = await read_back(bootstrap, progress, rows)
            read_s = time.perf_counter() - start
        _verify(written, read)
        if sum(c.records for c in read.values()) != rows:
            raise DemoFailedError(f"read {sum(c.records for c in read.values())} of {rows} rows")
        result = DemoResult("Producer.send_many + FetchClient", rows, write_s, read_s)
        result.failover = failover
        for partition, check in sorted(read.items()):
            result.partitions[partition] = {"records": check.records, "crc32": f"{check.crc:08x}"}
    async with AdminClient(bootstrap) as admin:
        description = await admin.describe_topic(DEMO_TOPIC)
        partitions = [p.partition for p in description.partitions]
        starts = await admin.log_start_offsets(DEMO_TOPIC, partitions)
        marks = await admin.high_watermarks(DEMO_TOPIC, partitions)
    for p in description.partitions:
        entry = result.partitions.setdefault(p.partition, {})
        entry.update(leader=p.leader, isr=",".join(map(str, p.isr)),
                     log_start_offset=starts[p.partition],
                     high_watermark=marks[p.partition])  # fmt: skip
    return result


def print_report(console: Console, result: DemoResult) -> None:
    mb = result.rows * VALUE_BYTES / 1e6
    console.print(f"[bold green]demo passed[/]: {result.rows} rows via {result.path}, "
                  "counts and checksums match")  # fmt: skip
    if result.delivery:
        console.print(f"  {result.delivery}")
    if not result.read_s:  # the Spark pipeline: its own report above has the throughput
        console.print(f"  pipeline: {result.write_s:.1f} s end to end, Spark start-up included")
    else:
        console.print(f"  write: {result.write_s:.2f} s, {result.rows / result.write_s:,.0f} "
                      f"rows/s, {mb / result.write_s:.1f} MB/s")  # fmt: skip
        console.print(f"  read:  {result.read_s:.2f} s, {result.rows / result.read_s:,.0f} "
                      f"rows/s, {mb / result.read_s:.1f} MB/s")  # fmt: skip
    print_failover(console, result.failover)
    table = Table(title=f"topic {DEMO_TOPIC}", title_justify="left")
    # The records and checksum columns only where this path read and counted each partition
    # (the Spark pipeline verifies its own way and reports that above; with exactlyOnce the
    # offsets also hold transaction markers, so high watermark - log start is not a row count):
    # never a column of dashes.
    counted = any("records" in e for e in result.partitions.values())
    columns = ["partition", "leader", "isr", "log start", "high watermark"]
    for column in columns + (["records", "crc32"] if counted else []):
        table.add_column(column, justify="right")
    for partition, e in sorted(result.partitions.items()):
        cells = [str(partition), str(e.get("leader", "?")), e.get("isr", "?"),
                 str(e.get("log_start_offset")), str(e.get("high_watermark"))]  # fmt: skip
        counts = [str(e.get("records", "-")), e.get("crc32", "-")] if counted else []
        table.add_row(*cells, *counts)
    console.print(table)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


# A leader that was also the active controller: its fail-over waits for a Raft election too.
_ALSO_CONTROLLER = ", also the active controller: a Raft election comes first"


def print_failover(console: Console, failover: FailoverReport | None) -> None:
    if failover is None:
        return
    console.print(
        f"  fail-over: node {failover.killed_node_id} (leader of partition 0"
        f"{_ALSO_CONTROLLER if failover.was_controller else ''}) killed with SIGKILL at "
        f"{failover.killed_at_records} records; partition 0 led by node "
        f"{failover.new_leader} after {_ms(failover.failover_ms)} (fail-over time); restarted "
        f"node ready after {_ms(failover.restart_ready_ms)}; every ISR full again after "
        f"{_ms(failover.isr_restored_ms)}; no acknowledged row lost, none duplicated"
    )
    if failover.note:
        console.print(f"  fail-over note: {failover.note}")


@click.command("demo")
@click.option("--rows", type=click.IntRange(1), default=DEFAULT_ROWS, show_default=True,
              help="rows in the dataset")  # fmt: skip
@click.option("--keep-data", is_flag=True, help="keep the cluster directory afterwards")
@click.option("--base-port", type=click.IntRange(1024, 65000), default=None,
              help="first Kafka port (controller +100, Raft +200, metrics +300); default: free ones")  # fmt: skip
def demo(rows: int, keep_data: bool, base_port: int | None) -> None:
    """Start a 3-node cluster, write a dataset, read it back, verify it, report, stop.

    Uses the Spark pipeline (spark/pipeline.py) when it is installed, else our own
    Producer and FetchClient.

    \b
    Examples:
      quorumlog demo
      quorumlog demo --rows 20000 --keep-data
      quorumlog demo --base-port 29092
    """
    console = Console()
    data_dir = Path(tempfile.mkdtemp(prefix="quorumlog-demo-"))
    failed = True
    try:
        result = trio.run(run_demo, data_dir, rows, console, base_port)
        print_report(console, result)
        failed = False
    except (KeyboardInterrupt, DemoInterruptedError):
        console.print("interrupted: cluster stopped")
        failed = False  # nothing to inspect
        sys.exit(EXIT_INTERRUPTED)
    except (DemoFailedError, ClusterNotReadyError, KafkaError, trio.TooSlowError, OSError) as exc:
        console.print(
            f"[bold red]demo failed[/]: {' '.join(str(exc).split()) or type(exc).__name__}"
        )
        sys.exit(EXIT_ERROR)
    except BaseExceptionGroup as group:
        if caused_by_interrupt(group):
            console.print("interrupted: cluster stopped")
            sys.exit(EXIT_INTERRUPTED)
        leaf = first_leaf(group)
        console.print(f"[bold red]demo failed[/]: {type(leaf).__name__}: {leaf}")
        sys.exit(EXIT_ERROR)
    finally:
        if keep_data or failed:
            console.print(f"cluster data kept in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)
