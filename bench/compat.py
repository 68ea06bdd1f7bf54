"""`make compat`: peers' own test suites against a local 3-node quorumlog cluster.

Each suite runs against a 3-node `quorumlog up`-style cluster of its own (tools/up.py's
LocalCluster; a suite that lists ACLs or groups finds only its own) on free ports, formatted
with the two settings librdkafka's own test clusters use (`num.partitions` 4,
`default.replication.factor` 3):

- librdkafka's `tests/test-runner` (Debian bookworm's librdkafka 2.0.2 source package, built
  under build/compat/ by `make compat-deps`): one test per process (a hang costs its own kill
  timeout, not the run), quick mode (`-Q`), broker tests only (`-L`), no socket emulation
  (`-E`); `--rdkafka-tests` picks test numbers (default: every one in test.c);
- confluent-kafka-python's integration tests (the release matching the venv's confluent-kafka,
  unpacked under build/compat/ by `make compat-deps`: its PyPI sdist ships no tests) in their
  bring-your-own-cluster mode (`BROKERS=...`), Schema Registry and share-group (KIP-932, not
  implemented) tests left out;
- kafka-python's integration tests (the release tag matching the venv's kafka-python: its
  sdist's copy lacks test/service.py) in their external-broker mode (`KAFKA_URI`, one broker),
  on a cluster of their own with their fixture's group settings (KAFKA_PYTHON_SETTINGS).

Prints one table (suite, passed, failed, skipped) and writes it, with each test's result, to
bench/results/compat.json, which `make bench` adds to its REPORT.md. A suite whose source is
missing is reported "not run" with the reason, never silently left out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from tools.cluster_layout import ClusterLayout
from tools.up import LocalCluster

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "compat"
RESULTS = ROOT / "bench" / "results" / "compat.json"
LIBRDKAFKA_DIR = BUILD / "librdkafka-2.0.2"
# librdkafka's test clusters' settings (its tests assume 4 partitions and RF 3 by default),
# ACLs on but allowing what no ACL names, as Kafka's test clusters (0081's ACL subtests).
NODE_SETTINGS = (
    ("num.partitions", 4),
    ("default.replication.factor", 3),
    ("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
    ("allow.everyone.if.no.acl.found", True),
    # Kafka's default (`quorumlog up` sets 0, as Kafka's quickstart): 0102 and 0118 have two
    # consumers join one after the other and expect a single rebalance.
    ("group.initial.rebalance.delay.ms", 3000),
)
SUITES = ("librdkafka", "confluent-python", "kafka-python")
# kafka-python's integration tests run on a cluster of their own with what their fixture's
# kafka.properties (servers/resources/default) sets for groups: test_group's consumers use a
# 3 s session timeout, below Kafka's default minimum of 6 s (INVALID_SESSION_TIMEOUT).
KAFKA_PYTHON_SETTINGS = (
    *(setting for setting in NODE_SETTINGS if setting[0] != "group.initial.rebalance.delay.ms"),
    ("group.min.session.timeout.ms", 1000),
    ("group.initial.rebalance.delay.ms", 0),
)
# Per test: its clients' own default API timeout is 60 s (test_kafka_consumer_offsets_for_times_
# errors waits that long for its KafkaTimeoutError), so a 60 s kill cut it short.
KAFKA_PYTHON_TEST_TIMEOUT_S = 90
# kafka-python's tests pin their clients to this broker version's request versions (no
# ApiVersions negotiation): Kafka 4.3's, the newest its master knows, now that we answer what
# Kafka 4.0-4.3 added (tests/compat/kafka-python.md has the runs at 3.7.0, 4.0.0 and 4.3.0).
KAFKA_VERSION = os.environ.get("COMPAT_KAFKA_VERSION", "4.3.0")
RDKAFKA_KILL_S = 240  # per test number; the slowest passing test takes ~60 s on 2 busy cores
# Quick mode turns these into no-ops: run them without -Q.
RDKAFKA_NOT_QUICK = {"0018", "0019", "0022", "0026", "0045", "0061", "0102", "0122", "0132"}
RDKAFKA_NOT_QUICK |= {"0137"}
# Tests that run only in a named scenario, on a second cluster (noautocreate:
# auto.create.topics.enable=false, else a producer's metadata request recreates a deleted topic).
RDKAFKA_SCENARIOS = {"0107": "noautocreate"}
# Tests that run Kafka's tools: they get a KAFKA_PATH whose bin/kafka-acls.sh runs
# bench/kafka_acls.py (Kafka's flags -> `quorumlog acls`; 0109, 0115, 0119 add ACLs) and whose
# bin/kafka-topics.sh runs bench/kafka_topics.py (`--create` -> `quorumlog topics create`; 0052
# and 0077 create topics with configs), and BROKERS, where test.c's kafka-topics.sh call looks.
RDKAFKA_KAFKA_TOOLS = {"0052", "0077", "0109", "0115", "0119"}
# 0081 stops at its first failing admin API: run each API's subtest on its own.
RDKAFKA_SUBTESTS = {"0081": ["do_test_CreateTopics", "do_test_DeleteTopics",
    "do_test_CreatePartitions", "do_test_AlterConfigs", "do_test_DescribeConfigs",
    "do_test_CreateAcls", "do_test_DescribeAcls", "do_test_DeleteAcls", "do_test_DeleteRecords",
    "do_test_DeleteGroups", "do_test_ListConsumerGroups", "do_test_DescribeConsumerGroups",
    "do_test_DeleteConsumerGroupOffsets", "do_test_AlterConsumerGroupOffsets",
    "do_test_ListConsumerGroupOffsets", "do_test_unclean_destroy"]}  # fmt: skip
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RESULT_LINE = re.compile(r"^\|\s+(\d{4}_\w+)\s+\|\s+(PASSED|FAILED|SKIPPED)\s+\|\s+([\d.]+)s", re.M)


@dataclass
class SuiteResult:
    suite: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    not_run: str = ""  # why the suite did not run at all
    seconds: float = 0.0
    detail: dict[str, str] = field(default_factory=dict)  # test -> result as printed

    def merge(self, other: SuiteResult) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.detail |= other.detail
        self.seconds += other.seconds

    def row(self) -> dict:
        return {
            "suite": self.suite,
            "passed": len(self.passed),
            "failed": len(self.failed),
            "skipped": len(self.skipped),
            "not_run": self.not_run,
            "seconds": round(self.seconds),
            "failures": self.failed,
            "detail": self.detail,
        }


def free_base_port() -> int:
    """A base port with the Kafka, controller, Raft and metrics ports of 3 nodes free."""
    import random
    import socket

    rng = random.Random(os.getpid() ^ time.time_ns())
    for _ in range(200):
        base = rng.randrange(10000, 32000)
        ports = [base + k + i for k in (0, 100, 200, 300) for i in range(3)]
        try:
            for port in ports:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


def rdkafka_test_numbers() -> list[str]:
    test_c = (LIBRDKAFKA_DIR / "tests" / "test.c").read_text()
    numbers = re.findall(r"^\s*_TEST\((\d{4})_", test_c, re.MULTILINE)
    return sorted(set(numbers) - {"0000", "8000"})  # unit tests and the manual test


FAILED_LINE = re.compile(r'^### Test "(\d{4}_\w+)[ "]', re.M)


def parse_rdkafka(output: str) -> dict[str, str]:
    """The summary table's rows: {"0001_multiobj": "PASSED", ...}; a test that aborted the
    runner before its summary counts FAILED by its `### Test "NNNN_name" failed` line."""
    text = ANSI.sub("", output)
    found = {name: "FAILED" for name in FAILED_LINE.findall(text)}
    return found | {name: result for name, result, _ in RESULT_LINE.findall(text)}


def run_rdkafka(bootstrap: str, numbers: list[str], log_dir: Path) -> SuiteResult:
    result = SuiteResult("librdkafka 2.0.2 test-runner")
    runner = LIBRDKAFKA_DIR / "tests" / "test-runner"
    if not runner.exists():
        result.not_run = f"{runner} not built (`make compat-deps` as root builds it)"
        return result
    tests_dir = runner.parent
    conf = log_dir / "test.conf"
    conf.write_text(f"bootstrap.servers={bootstrap}\ntest.timeout.multiplier=2\n")
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": "../src:../src-cpp",
        "TEST_KAFKA_VERSION": "3.7.0",  # what our ApiVersions answer matches
        "RDKAFKA_TEST_CONF": str(conf),
    }
    kafka_path = _kafka_tools_shim(log_dir / "kafka-path")
    start = time.monotonic()
    runs = [(n, s) for n in numbers for s in (RDKAFKA_SUBTESTS.get(n) or [""])]
    for number, subtest in runs:
        command = ["./test-runner", "-p1", "-E", "-L"]
        command += [] if number in RDKAFKA_NOT_QUICK else ["-Q"]
        if number in RDKAFKA_SCENARIOS:
            command += ["-s", RDKAFKA_SCENARIOS[number]]
        run_env = {**env, "SUBTESTS": f"{subtest}:"} if subtest else env
        if number in RDKAFKA_KAFKA_TOOLS:
            run_env = {**run_env, "KAFKA_PATH": str(kafka_path), "BROKERS": bootstrap}
        output, code = _run(command + [number], tests_dir, run_env, RDKAFKA_KILL_S)
        (log_dir / f"rdkafka-{number}{subtest and '-' + subtest}.log").write_text(output)
        rows = parse_rdkafka(output)
        own = {name: res for name, res in rows.items() if name.startswith(number)}
        if subtest:  # one row per subtest: the first failing one no longer hides the rest
            own = {f"{name} {subtest}": res for name, res in own.items()}
            number = f"{number} {subtest}"
        if code is None:
            own = {name: res for name, res in own.items() if res != "PASSED"}
            own[f"{number} (killed after {RDKAFKA_KILL_S} s)"] = "FAILED"
        elif not own:
            own[number] = "PASSED" if code == 0 else "FAILED"
        elif code != 0 and all(res != "FAILED" for res in own.values()):
            own[f"{number} (exit {code})"] = "FAILED"
        for name, res in own.items():
            result.detail[name] = res
            {"PASSED": result.passed, "FAILED": result.failed, "SKIPPED": result.skipped}[
                res
            ].append(name)
        print(f"  {number}: {', '.join(f'{n} {r}' for n, r in own.items())}", flush=True)
    result.seconds = time.monotonic() - start
    return result


def _kafka_tools_shim(directory: Path) -> Path:
    """A KAFKA_PATH directory whose bin/kafka-acls.sh is bench/kafka_acls.py and whose
    bin/kafka-topics.sh is bench/kafka_topics.py."""
    for tool, module in (("kafka-acls.sh", "kafka_acls"), ("kafka-topics.sh", "kafka_topics")):
        script = directory / "bin" / tool
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(
            f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m bench.{module} "$@"\n'
        )
        script.chmod(0o755)
    return directory


def run_confluent_python(bootstrap: str, tests_root: Path | None, log_dir: Path) -> SuiteResult:
    import confluent_kafka

    version = confluent_kafka.__version__
    root = tests_root or BUILD / f"confluent-kafka-python-{version}"
    result = SuiteResult(f"confluent-kafka-python {version} integration ({root.name}'s tests)")
    if not (root / "tests" / "integration").is_dir():
        result.not_run = f"{root}/tests/integration missing (`make compat-deps` fetches it)"
        return result
    report = log_dir / "confluent-python.xml"
    python = BUILD / "ck-venv" / "bin" / "python"  # its tests' needs (trivup, ...), not ours
    command = [str(python if python.exists() else sys.executable), "-m", "pytest", "-q",
               "-p", "no:cacheprovider", "-o", "addopts=", "--timeout", "300",
               "--junitxml", str(report), "tests/integration",
               "--ignore", "tests/integration/schema_registry",
               # share groups (KIP-932, ShareFetch/ShareAcknowledge) are not implemented
               "--ignore", "tests/integration/share_consumer",
               "-k", "not schema_registry and not sasl and not oauth"]  # fmt: skip
    env = {**os.environ, "BROKERS": bootstrap, "PYTHONPATH": str(root)}
    start = time.monotonic()
    output, _ = _run(command, root, env, 1800)
    result.seconds = time.monotonic() - start
    (log_dir / "confluent-python.log").write_text(output)
    if not report.exists():
        result.not_run = "pytest wrote no report (see confluent-python.log)"
        return result
    _read_junit(report, result)
    return result


def run_kafka_python(bootstrap: str, tests_root: Path | None, log_dir: Path) -> SuiteResult:
    """kafka-python's integration tests in their external-broker mode (KAFKA_URI, one broker:
    the first of ours) for a given KAFKA_VERSION (what they may use)."""
    import kafka

    root = tests_root or BUILD / f"kafka-python-{kafka.__version__}"
    result = SuiteResult(f"kafka-python {kafka.__version__} integration ({root.name}'s tests)")
    if not (root / "test" / "integration").is_dir():
        result.not_run = f"{root}/test/integration missing (`make compat-deps` fetches it)"
        return result
    report = log_dir / "kafka-python.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
               "--timeout", str(KAFKA_PYTHON_TEST_TIMEOUT_S), "--junitxml", str(report),
               "test/integration"]  # fmt: skip
    first = bootstrap.split(",")[0]
    # Its fixtures check that a Kafka distribution directory exists even for an external broker
    # (they create topics with the admin client, never run its scripts then): an empty one.
    kafka_root = log_dir / "kafka-root"
    kafka_root.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "KAFKA_URI": f"PLAINTEXT://{first}",
        "KAFKA_VERSION": KAFKA_VERSION,
        "KAFKA_ROOT": str(kafka_root),
        "PYTHONPATH": str(root),  # its `test` package, not the standard library's
    }
    start = time.monotonic()
    output, _ = _run(command, root, env, 1800)
    result.seconds = time.monotonic() - start
    (log_dir / "kafka-python.log").write_text(output)
    if not report.exists():
        result.not_run = "pytest wrote no report (see kafka-python.log)"
        return result
    _read_junit(report, result)
    return result


def _read_junit(report: Path, result: SuiteResult) -> None:
    import xml.etree.ElementTree as ET

    cases = list(ET.parse(report).getroot().iter("testcase"))
    ran = [case for case in cases if case.find("skipped") is None]
    if ran and all(case.find("error") is not None for case in ran):
        result.not_run = "every test errored in the suite's own fixtures (see its log)"
        return
    for case in cases:
        name = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            result.failed.append(name)
            result.detail[name] = "FAILED"
        elif "skipped" in tags:
            result.skipped.append(name)
            result.detail[name] = "SKIPPED"
        else:
            result.passed.append(name)
            result.detail[name] = "PASSED"


def _run(command: list[str], cwd: Path, env: dict, timeout_s: float) -> tuple[str, int | None]:
    """Output and exit code of `command` (None: killed at the timeout, with its group)."""
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
        try:
            code: int | None = process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        out.seek(0)
        return out.read().decode(errors="replace"), code


def table(results: list[SuiteResult]) -> str:
    lines = ["| suite | passed | failed | skipped | seconds |", "|---|---:|---:|---:|---:|"]
    for r in results:
        if r.not_run:
            lines.append(f"| {r.suite} | - | - | - | not run: {r.not_run} |")
        else:
            counts = f"{len(r.passed)} | {len(r.failed)} | {len(r.skipped)}"
            lines.append(f"| {r.suite} | {counts} | {r.seconds:.0f} |")
    return "\n".join(lines)


@asynccontextmanager
async def _cluster(
    directory: Path, base_port: int, settings: tuple, label: str
) -> AsyncIterator[str]:
    """A fresh 3-node LocalCluster for one suite (suites do not share one: each finds only its
    own ACLs, groups and topics, as on a cluster of its own); yields its bootstrap servers."""
    layout = ClusterLayout(directory, 3, base_port, extra_properties=settings)
    async with LocalCluster(layout) as cluster:
        print(f"cluster ({label}): {cluster.bootstrap_servers}", flush=True)
        yield cluster.bootstrap_servers


async def run_all(args: argparse.Namespace, work: Path) -> list[SuiteResult]:
    log_dir = work / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    numbers: list[str] = []
    if "librdkafka" in args.suites and LIBRDKAFKA_DIR.exists():
        numbers = args.rdkafka_tests or rdkafka_test_numbers()
    results = []
    rdkafka = None
    if "librdkafka" in args.suites:
        ours = [n for n in numbers if n not in RDKAFKA_SCENARIOS]
        async with _cluster(work / "cluster", args.base_port or free_base_port(), NODE_SETTINGS,
                            f"librdkafka's settings, {work}") as bootstrap:  # fmt: skip
            rdkafka = await trio.to_thread.run_sync(run_rdkafka, bootstrap, ours, log_dir)
        results.append(rdkafka)
    if "confluent-python" in args.suites:
        async with _cluster(work / "cluster-confluent-python", free_base_port(), NODE_SETTINGS,
                            "confluent-kafka-python") as bootstrap:  # fmt: skip
            results.append(
                await trio.to_thread.run_sync(
                    run_confluent_python, bootstrap, args.ck_tests, log_dir
                )
            )
    if "kafka-python" in args.suites:
        async with _cluster(work / "cluster-kafka-python", free_base_port(), KAFKA_PYTHON_SETTINGS,
                            "kafka-python's group settings") as bootstrap:  # fmt: skip
            results.append(
                await trio.to_thread.run_sync(run_kafka_python, bootstrap, args.kp_tests, log_dir)
            )
    scenario = [n for n in numbers if n in RDKAFKA_SCENARIOS]
    if scenario and rdkafka is not None:  # a second cluster, as the noautocreate scenario wants
        settings = (*NODE_SETTINGS, ("auto.create.topics.enable", False))
        async with _cluster(work / "cluster-noautocreate", free_base_port(), settings,
                            "auto.create.topics.enable=false") as bootstrap:  # fmt: skip
            more = await trio.to_thread.run_sync(run_rdkafka, bootstrap, scenario, log_dir)
        rdkafka.merge(more)
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    parser.add_argument("--rdkafka-tests", nargs="+", metavar="NNNN", help="test numbers")
    parser.add_argument("--ck-tests", type=Path, help="a confluent-kafka-python source tree")
    parser.add_argument("--kp-tests", type=Path, help="a kafka-python source tree")
    parser.add_argument("--base-port", type=int, help="Kafka port of node 1 [a free one]")
    parser.add_argument("--work-dir", type=Path, help="cluster and logs [a temporary dir]")
    args = parser.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="quorumlog-compat-"))
    results = trio.run(run_all, args, work)
    print("\n" + table(results))
    print(f"\nlogs: {work / 'logs'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                   "rows": [r.row() for r in results]}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
