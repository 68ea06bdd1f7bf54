"""An activated controller writes Kafka's ELR safety records (KIP-966): a one-voter
ControllerService on real loopback sockets, configured with a static min.insync.replicas of 2,
holds the cluster default min.insync.replicas=2 once it is active, as a Kafka 4.1+ controller of
a new cluster does; brokers then describe it on every topic as DYNAMIC_DEFAULT_BROKER_CONFIG."""

from __future__ import annotations

import pytest
import trio
from cluster_harness import free_base_port, one_node_config

from log.common.node_config import NodeConfig
from quorum.service import ControllerService

pytestmark = pytest.mark.timeout(60)


async def test_activation_writes_the_cluster_default_min_insync_replicas(tmp_path):
    base = one_node_config(tmp_path, free_base_port(1))
    config = NodeConfig.from_properties(tmp_path, {**base.props, "min.insync.replicas": 2})
    service = ControllerService(config, seed=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        with trio.fail_after(20):
            while service.image.broker_configs("").get("min.insync.replicas") != "2":
                await trio.sleep(0.01)
        assert service.is_active
        nursery.cancel_scope.cancel()
