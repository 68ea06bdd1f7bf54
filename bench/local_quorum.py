"""A single-node metadata quorum without Raft, for a broker that runs alone in this process.

`LocalQuorum` is the MetadataSource and ControllerChannel of one combined node: the real
`quorum/controller.py` decisions, their records applied synchronously to a real
MetadataStateMachine (no Raft, no network), so a real KafkaServer runs around it. The broker
benchmark (bench/broker_produce.py) and the broker tests (tests/broker/conftest.py) use it with
`node_config`, a one-node configuration whose controller listeners are never dialled.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from typing import Any

import trio

from log.common.errors import ErrorCode
from log.common.node_config import NodeConfig
from quorum import controller, leader_election, reassignment
from quorum import metadata_quorum as mq
from quorum.acls import create_acls, delete_acls
from quorum.broker_configs import alter_broker_configs
from quorum.broker_lifecycle import MAX_PENDING_IMAGES
from quorum.features import BOOTSTRAP_LEVELS, update_features
from quorum.image import MetadataImage
from quorum.records import BrokerEndpoint, encode_batch
from quorum.scram_credentials import alter_user_scram_credentials
from quorum.state_machine import MetadataStateMachine

NODE_ID = 1


class LocalQuorum:
    """MetadataSource and ControllerChannel of one combined node, applied synchronously."""

    def __init__(self, bootstrap_features: Mapping[str, int] = BOOTSTRAP_LEVELS) -> None:
        """`bootstrap_features`: what this new cluster finalizes (quorum/features.py)."""
        self.sm = MetadataStateMachine()
        self.offset = 0
        self.proposals = itertools.count(1)
        self.controller_epoch = 1
        self._changed = trio.Event()
        self._subscribers: list[trio.MemorySendChannel] = []
        self.broker_epoch = -1
        self.commit(
            controller.activate_controller(NODE_ID, self.controller_epoch, bootstrap_features)
        )

    # -- MetadataSource ---------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        return self.sm.image

    async def wait_for_image(self, min_offset: int) -> MetadataImage:
        while self.sm.image.last_offset < min_offset:
            await self._changed.wait()
        return self.sm.image

    def subscribe(self) -> trio.MemoryReceiveChannel[MetadataImage]:
        send, receive = trio.open_memory_channel[MetadataImage](MAX_PENDING_IMAGES)
        self._subscribers.append(send)
        return receive

    def add_image_preparer(self, prepare) -> None:  # noqa: ANN001 - the Protocol's type
        """Ignored: `commit` publishes each image at once (a broker then opens new logs as it
        applies the image, which the contract allows)."""

    # -- committing -------------------------------------------------------------------------
    def commit(self, records: list) -> None:
        if not records:
            return
        self.offset += 1
        payload = encode_batch(records, self.controller_epoch, next(self.proposals))
        result = self.sm.apply(self.offset, payload)
        assert result.accepted, result
        self._changed.set()
        self._changed = trio.Event()
        for send in self._subscribers:
            try:
                send.send_nowait(self.sm.image)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    def register(
        self, broker_id: int, host: str, port: int, *, more: tuple[BrokerEndpoint, ...] = ()
    ) -> None:
        """Register and unfence `broker_id` with its PLAINTEXT endpoint (and `more` listeners)."""
        request = controller.BrokerRegistrationRequest(
            broker_id, uuid.uuid4(), (BrokerEndpoint("PLAINTEXT", host, port), *more)
        )
        records, response = controller.register_broker(self.image, request)
        self.commit(records)
        self.broker_epoch = response.broker_epoch
        records, _ = controller.heartbeat(
            self.image,
            controller.BrokerHeartbeatRequest(broker_id, response.broker_epoch, self.offset),
        )
        self.commit(records)

    # -- ControllerChannel ------------------------------------------------------------------
    # Each request is decided by quorum/controller.py against the current image; the decision's
    # records are committed at once and its response returned.
    def _decided(self, decision: tuple[list, Any]) -> Any:
        records, response = decision
        self.commit(records)
        return response

    async def create_topics(self, request):
        topic_ids = [uuid.uuid4() for _ in request.topics]
        return self._decided(
            controller.create_topics(self.image, request, start_index=0, topic_ids=topic_ids)
        )

    async def delete_topics(self, request):
        return self._decided(controller.delete_topics(self.image, request))

    async def create_partitions(self, request):
        return self._decided(controller.create_partitions(self.image, request, start_index=0))

    async def alter_topic_configs(self, request):
        return self._decided(controller.alter_topic_configs(self.image, request))

    async def alter_broker_configs(self, request):
        return self._decided(alter_broker_configs(self.image, request))

    async def update_features(self, request):
        return self._decided(update_features(self.image, request))

    async def alter_partitions(self, request):
        return self._decided(controller.alter_partitions(self.image, request))

    async def alter_user_scram_credentials(self, request):
        return self._decided(alter_user_scram_credentials(self.image, request))

    async def create_acls(self, request):
        return self._decided(create_acls(self.image, request))

    async def delete_acls(self, request):
        return self._decided(delete_acls(self.image, request))

    async def allocate_producer_ids(self, request):
        return self._decided(controller.allocate_producer_ids(self.image, request))

    async def elect_leaders(self, request):
        image = self.image
        policy = controller.NODE_DEFAULTS
        return self._decided(
            leader_election.elect_leaders(
                image, request, lambda name: controller.election_policy(image, name, policy)
            )
        )

    async def alter_partition_reassignments(self, request):
        image = self.image
        policy = controller.NODE_DEFAULTS
        return self._decided(
            reassignment.alter_partition_reassignments(
                image, request, lambda name: controller.election_policy(image, name, policy)
            )
        )

    async def describe_quorum(self, *, from_any_controller: bool = False):
        """One voter, this node, leading (node_config's Raft and CONTROLLER addresses); its
        committed offset is the metadata offset applied here."""
        me = mq.VoterState(NODE_ID, "127.0.0.1:2", "127.0.0.1:1", True, self.offset)
        return mq.DescribeQuorumResponse(ErrorCode.NONE, NODE_ID, self.controller_epoch,
                                         self.offset, (me,))  # fmt: skip


def node_config(tmp_path, **props) -> NodeConfig:
    values = {
        "node.id": NODE_ID,
        "cluster.id": "broker-test",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:1",
        "controller.quorum.voters": f"{NODE_ID}@127.0.0.1:1",
        "controller.quorum.raft.voters": f"{NODE_ID}@127.0.0.1:2",
        "controller.quorum.password": "x",
        "num.partitions": 2,
    }
    values.update(props)
    return NodeConfig.from_properties(tmp_path, values)
