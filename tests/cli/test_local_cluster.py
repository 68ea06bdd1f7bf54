"""LocalCluster (tools/up.py) in-process: ready inside, every node stopped cleanly on exit,
the body's exception propagating unchanged, and a cancelled body still stopping the nodes."""

from __future__ import annotations

import pytest
import trio
from cluster_harness import free_base_port

from tools.admin_client import AdminClient
from tools.cluster_layout import ClusterLayout
from tools.up import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


class _BodyError(Exception):
    pass


async def test_local_cluster_ready_inside_stopped_after(tmp_path):
    layout = ClusterLayout(tmp_path, 1, free_base_port(1))
    with pytest.raises(_BodyError):  # not an ExceptionGroup: the caller sees its own error
        async with LocalCluster(layout) as cluster:
            assert [n.node_id for n in cluster.ready_nodes] == [1]
            async with AdminClient(cluster.bootstrap_servers) as admin:
                with trio.fail_after(20):
                    while not (await admin.describe_cluster()).brokers:
                        await trio.sleep(0.1)
            raise _BodyError()
    assert all(n.process.returncode == 0 for n in cluster.nodes)
    assert (layout.node_dir(1) / "kafka-logs" / ".kafka_cleanshutdown").exists()

    # the same directory again, cancelled from outside while inside: still stopped cleanly
    with trio.CancelScope() as scope:
        async with LocalCluster(layout) as again:
            assert len(again.ready_nodes) == 1
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert all(n.process.returncode == 0 for n in again.nodes)
