"""`metadata-quorum`'s controller side in process (one-voter quorum on loopback sockets): describe,
the refusals that keep a voter change from stalling the quorum, and a broker learning where a
controller added at run time listens (RegisterControllerRecord)."""

from __future__ import annotations

import pytest
import trio
from cluster_harness import free_base_port, one_node_config

from log.common.errors import ErrorCode, InvalidRequestError
from log.common.node_config import Voter
from quorum import metadata_quorum as mq
from quorum.broker_lifecycle import BrokerLifecycle
from quorum.controller_client import ControllerClient
from quorum.records import RegisterControllerRecord
from quorum.service import ControllerService

pytestmark = pytest.mark.timeout(60)


async def test_describe_refusals_and_brokers_learning_new_controllers(tmp_path):
    base = free_base_port(1)
    config = one_node_config(tmp_path, base)
    service = ControllerService(config, seed=1)
    secret = config.props["controller.quorum.password"]
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        voters = config.controller_voters
        lifecycle = BrokerLifecycle(
            config, ControllerClient(voters, secret=secret), ControllerClient(voters, secret=secret)
        )
        channel = ControllerClient(voters, secret=secret)
        with trio.fail_after(20):
            await nursery.start(lifecycle.run)
            await lifecycle.unfenced.wait()
        lifecycle.add_controller_client(channel)
        tool = ControllerClient(voters, secret=secret, client_id="test-metadata-quorum")
        with trio.fail_after(20):
            quorum = await tool.describe_quorum()
        assert quorum.error_code == ErrorCode.NONE and quorum.leader_id == 1
        assert [(v.voter_id, v.raft_endpoint, v.connected) for v in quorum.voters] == [
            (1, f"127.0.0.1:{base + 200}", True)
        ]
        assert quorum.high_watermark > 0

        # Nothing listens on the new voter's Raft port: adding it would stall a 1-voter
        # quorum (2 of 2 needed), so it is refused and nothing changes.
        dead = mq.AddRaftVoterRequest(2, f"127.0.0.1:{base + 201}", f"127.0.0.1:{base + 101}")
        with trio.fail_after(20), pytest.raises(InvalidRequestError, match="does not answer"):
            await tool.add_raft_voter(dead)
        with trio.fail_after(20), pytest.raises(InvalidRequestError, match="it is the leader"):
            await tool.remove_raft_voter(mq.RemoveRaftVoterRequest(1))
        with trio.fail_after(20), pytest.raises(InvalidRequestError, match="not a voter"):
            await tool.remove_raft_voter(mq.RemoveRaftVoterRequest(7))
        assert service.raft is not None and len(service.raft.voters) == 1
        assert 2 not in service.image.controllers

        # Where a controller added later listens reaches every controller client of brokers.
        record = RegisterControllerRecord(9, "127.0.0.9", 9193, "127.0.0.9", 9093)
        with trio.fail_after(20):
            await service._decide(lambda image: ([record], None))
            await lifecycle.wait_for_image(service.image.last_offset)
        for client in (lifecycle.client, lifecycle.fetch_client, channel):
            assert Voter(9, "127.0.0.9", 9093) in client.voters
        assert service.voter_directory()[9].controller_endpoint == "127.0.0.9:9093"
        await tool.aclose()
        await channel.aclose()
        nursery.cancel_scope.cancel()


async def test_a_broker_whose_configuration_lacks_the_leader_finds_it(tmp_path):
    """A broker's node.toml written before a controller was added names controllers that are
    not the leader (here: one nobody runs); registering fails, so it asks any controller it can
    reach (its metadata client's) where the voters listen, and registers with the leader."""
    base = free_base_port(1)
    config = one_node_config(tmp_path, base)
    service = ControllerService(config, seed=1)
    secret = config.props["controller.quorum.password"]
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        stale = [Voter(5, "127.0.0.1", base + 105)]  # nobody listens there
        lifecycle = BrokerLifecycle(
            config,
            ControllerClient(stale, secret=secret, max_attempts=2),
            ControllerClient(config.controller_voters, secret=secret),
        )
        with trio.fail_after(30):
            await nursery.start(lifecycle.run)
            await lifecycle.unfenced.wait()
        assert Voter(1, "127.0.0.1", base + 100) in lifecycle.client.voters
        nursery.cancel_scope.cancel()
