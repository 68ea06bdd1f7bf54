"""One real 3-node cluster (node processes) shared by every command test in tests/cli: session
scoped (tests/conftest.py keeps the files using it on one pytest-xdist worker, so it starts once,
and stops it when that worker has run them: tests/group_lifetime.py).

The cluster comes from tests/node's harness, with Kafka's broker heartbeat and session (2 s,
9 s) instead of the harness's 0.2 s and 1.5 s: no command test stops a node, and an idle node
then uses ~1 % of a core less (3 nodes x ~8 minutes of a suite run); the fixture waits until
all three brokers are live before handing out the bootstrap servers. (cli_helpers.run_cli
invokes the commands in-process.)
"""

from __future__ import annotations

import os
import sys

import pytest
import trio

pytest.importorskip("cryptography", reason="quorum.raft needs the cryptography package")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "node"))
sys.path.insert(0, os.path.dirname(__file__))

from cli_helpers import started_cluster  # noqa: E402
from group_lifetime import CLI_CLUSTER_GROUP, stop_with_group  # noqa: E402

from tools.admin_client import AdminClient  # noqa: E402

CLUSTER_READY_TIMEOUT_S = 60


async def _wait_for_brokers(bootstrap: str, count: int) -> None:
    with trio.fail_after(CLUSTER_READY_TIMEOUT_S):
        while True:
            async with AdminClient(bootstrap) as admin:
                cluster = await admin.describe_cluster()
            if len(cluster.brokers) == count and cluster.controller_id in {
                b.node_id for b in cluster.brokers
            }:
                return
            await trio.sleep(0.2)


@pytest.fixture(scope="session")
def cli_cluster(tmp_path_factory):
    kafka_session = {"broker.heartbeat.interval.ms": 2000, "broker.session.timeout.ms": 9000}
    path = tmp_path_factory.mktemp("cli-cluster")
    with started_cluster(path, shared=True, extra_props=kafka_session) as cluster:
        stop_with_group(CLI_CLUSTER_GROUP, cluster.stop_all)  # stop_all: once is enough
        trio.run(_wait_for_brokers, cluster.layout.bootstrap_servers, 3)
        yield cluster


@pytest.fixture(scope="session")
def bootstrap(cli_cluster) -> str:
    return cli_cluster.layout.bootstrap_servers
