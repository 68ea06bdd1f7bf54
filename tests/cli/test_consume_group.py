"""`quorumlog consume --group` against the shared real cluster: two runs in sequence, the
second resuming exactly after what the first printed and committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from cli_helpers import run_cli, start_with_default_sigint
from cluster_harness import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _records(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_second_group_run_resumes_after_the_first(bootstrap):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "grouped", "-p", "3"])
    values = [f"r{i}" for i in range(30)]
    run_cli(["produce", *b, "-t", "grouped"], input="".join(v + "\n" for v in values))

    first = run_cli(["consume", *b, "-t", "grouped", "--group", "g1", "--from-beginning",
                     "-n", "11", "--json"])  # fmt: skip
    first_records = _records(first)
    assert len(first_records) == 11
    assert "Processed a total of 11 records" in first.stderr
    second = _records(run_cli(["consume", *b, "-t", "grouped", "-g", "g1", "--json"]))
    seen = [(r["partition"], r["offset"]) for r in first_records + second]
    assert len(seen) == len(set(seen)) == 30  # nothing read twice, nothing skipped
    assert sorted(r["value"] for r in first_records + second) == sorted(values)
    assert all(r["timestamp"] > 0 for r in second)

    # the group's committed offsets are the ends: a third run prints nothing
    assert run_cli(["consume", *b, "-t", "grouped", "-g", "g1"]).stdout == ""
    described = json.loads(run_cli(["groups", "describe", *b, "g1", "--json"]).stdout)
    assert sum(o["lag"] for o in described["offsets"]) == 0
    # a new group without --from-beginning starts at the end (auto.offset.reset=latest)
    assert run_cli(["consume", *b, "-t", "grouped", "-g", "g2"]).stdout == ""
    # key-value format in group mode
    run_cli(["produce", *b, "-t", "grouped", "-K", ":"], input="k:v\n")
    pairs = run_cli(["consume", *b, "-t", "grouped", "-g", "g2", "--format", "key-value"])
    assert pairs.stdout == "k\tv\n"


def test_group_errors_are_one_line(bootstrap):
    b = ["--bootstrap", bootstrap]
    missing = run_cli(["consume", *b, "-t", "nope", "-g", "g"], exit_code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    bad = run_cli(["consume", *b, "-t", "nope", "-g", "g", "--offset", "5"], exit_code=2)
    assert "--group" in bad.output


def test_group_follow_interrupted_commits_what_it_printed(bootstrap):
    b = ["--bootstrap", bootstrap]
    run_cli(["topics", "create", *b, "-t", "followed", "-p", "2"])
    follower = start_with_default_sigint(
        [sys.executable, "-m", "tools", "consume", *b, "-t", "followed", "-g", "gf",
         "--from-beginning", "--follow"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": ""},  # as a user's shell: a block-buffered pipe
    )  # fmt: skip
    try:
        run_cli(["produce", *b, "-t", "followed"], input="one\ntwo\nthree\n")
        assert follower.stdout is not None
        printed = [follower.stdout.readline().strip() for _ in range(3)]
        follower.send_signal(signal.SIGINT)
        try:
            _, err = follower.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(_hung(follower)) from None
    finally:
        follower.kill()
    assert sorted(printed) == ["one", "three", "two"]
    assert follower.returncode == 130 and "interrupted" in err, err
    # what was printed before Ctrl-C was committed: the next member starts after it
    assert run_cli(["consume", *b, "-t", "followed", "-g", "gf"]).stdout == ""
    run_cli(["produce", *b, "-t", "followed"], input="four\n")
    assert run_cli(["consume", *b, "-t", "followed", "-g", "gf"]).stdout == "four\n"


def _hung(process: subprocess.Popen) -> str:
    """What a consume that did not exit after SIGINT was doing: every thread's stack, Python
    and native (py-spy, the dev extra), and its stderr."""
    spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
    stacks = "py-spy not installed"
    if os.path.exists(spy):
        dump = subprocess.run([spy, "dump", "--native", "--pid", str(process.pid)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        stacks = dump.stdout + dump.stderr
    process.kill()
    _, err = process.communicate()
    return f"consume --follow still running 30 s after SIGINT\n{stacks}\nstderr:\n{err[-4000:]}"
