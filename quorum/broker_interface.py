"""What a broker gets from the metadata quorum: the contract between quorum/ and log/.

quorum/ implements these Protocols (broker_lifecycle.py follows the metadata log,
controller_client.py talks to the active controller); the broker's server, replica manager
and coordinators use them. Two collaborators:

* `MetadataSource`: the metadata image this broker has replayed (it follows the metadata log
  of the controller quorum). `image` is the latest applied image (immutable, replaced
  wholesale); `wait_for_image(min_offset)` returns once `image.last_offset >= min_offset`;
  `subscribe()` returns a bounded trio receive channel that gets each newly applied image;
  `add_image_preparer` adds work done before an image is published (`image` shows it).
  Contract for `subscribe`: the sender never blocks the metadata follower. Use a small
  bounded `trio.open_memory_channel` (MAX_PENDING_IMAGES) and `send_nowait`; on
  `trio.WouldBlock` skip that image -- the next one supersedes it, because a subscriber only
  needs the newest image (it diffs against what it last applied,
  `quorum.image.partition_changes`). Closing the send side ends the subscriber's loop.
* `ControllerChannel`: the requests a broker forwards to the active controller (KRaft's
  forwarding of CreateTopics etc. and the broker-to-controller RPCs). Request/response types
  are the sans-IO ones of `quorum/controller.py`; an implementation routes them to the active
  controller (retrying NOT_CONTROLLER itself) and returns the controller's response, whose
  records have been committed. The response carries no metadata offset, so after a success
  the broker waits (`wait_for_image(image.last_offset + 1)` in a loop, under a deadline)
  until its own image shows the change before answering the client.
  Transport failures raise a `KafkaError` (e.g. RequestTimedOutError, NotControllerError).

The node runtime (log/server/node.py) hands both to `KafkaServer`:

    server = KafkaServer(config, log_manager, metadata, controller,
                         broker_epoch_getter=lambda: registration.broker_epoch)
    port = await nursery.start(server.run)   # binds the PLAINTEXT listener; serves until
                                             # cancelled; shuts the LogManager down on exit
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import trio

    from quorum.acls import (
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
    )
    from quorum.broker_configs import AlterBrokerConfigsRequest, AlterBrokerConfigsResponse
    from quorum.controller import (
        AllocateProducerIdsRequest,
        AllocateProducerIdsResponse,
        AlterConfigsRequest,
        AlterConfigsResponse,
        AlterPartitionsRequest,
        AlterPartitionsResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
    )
    from quorum.features import UpdateFeaturesRequest, UpdateFeaturesResponse
    from quorum.image import MetadataImage
    from quorum.leader_election import ElectLeadersRequest, ElectLeadersResponse
    from quorum.metadata_quorum import DescribeQuorumResponse
    from quorum.reassignment import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    )
    from quorum.scram_credentials import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    )

MAX_PENDING_IMAGES = 16  # subscribe() channel size; a subscriber needs only the newest image


@runtime_checkable
class MetadataSource(Protocol):
    @property
    def image(self) -> MetadataImage:
        """The latest applied metadata image on this broker."""
        ...

    async def wait_for_image(self, min_offset: int) -> MetadataImage:
        """Block until `image.last_offset >= min_offset`; return that image. Callers put a
        `trio.fail_after` around it."""
        ...

    def subscribe(self) -> trio.MemoryReceiveChannel[MetadataImage]:
        """A bounded channel receiving every newly applied image; images
        that do not fit are skipped (the next one supersedes them)."""
        ...

    def add_image_preparer(
        self, prepare: Callable[[MetadataImage, MetadataImage], Awaitable[None]]
    ) -> None:
        """`await prepare(published, next)` runs before each new image is published (`image`
        shows the older one until every preparer returned): work a new image needs done
        before anything acts on it, off the event loop (the replica manager creates new
        partitions' logs in a worker thread). A source may publish without them
        (bench/local_quorum.py commits and publishes at once): nothing may depend on a
        preparer having run."""
        ...


@runtime_checkable
class ControllerChannel(Protocol):
    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse: ...

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse: ...

    async def create_partitions(
        self, request: CreatePartitionsRequest
    ) -> CreatePartitionsResponse: ...

    async def alter_topic_configs(self, request: AlterConfigsRequest) -> AlterConfigsResponse: ...

    async def alter_broker_configs(
        self, request: AlterBrokerConfigsRequest
    ) -> AlterBrokerConfigsResponse: ...

    async def alter_partitions(
        self, request: AlterPartitionsRequest
    ) -> AlterPartitionsResponse: ...

    async def update_features(self, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse: ...

    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse: ...

    async def create_acls(self, request: CreateAclsRequest) -> CreateAclsResponse: ...

    async def delete_acls(self, request: DeleteAclsRequest) -> DeleteAclsResponse: ...

    async def allocate_producer_ids(
        self, request: AllocateProducerIdsRequest
    ) -> AllocateProducerIdsResponse: ...

    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse: ...

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse: ...

    async def describe_quorum(
        self, *, from_any_controller: bool = False
    ) -> DescribeQuorumResponse: ...
