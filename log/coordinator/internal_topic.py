"""A coordinator's internal topic (__consumer_offsets, __transaction_state), created on first use
as Kafka's brokers do: the first request that needs it asks the controller to create it
(compacted, the configured partition count, the configured replication factor capped by the
live brokers) and is answered "not available yet"; clients retry and find it there. One
creation is in flight at a time."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from log.common.errors import ErrorCode, KafkaError
from quorum.broker_interface import ControllerChannel, MetadataSource
from quorum.controller import CreatableTopic, CreateTopicsRequest

logger = logging.getLogger(__name__)


class InternalTopic:
    def __init__(self, name: str, metadata: MetadataSource, controller: ControllerChannel) -> None:
        self.name = name
        self.metadata = metadata
        self.controller = controller
        self._creating = False

    async def ensure(
        self,
        num_partitions: int,
        replication_factor: int,
        configs: Callable[[int], Mapping[str, str]],
    ) -> bool:
        """True when the topic exists; else asks the controller to create it (False).
        `configs(replication_factor)` are its topic configs at the factor it is created with."""
        image = self.metadata.image
        if image.topic(self.name) is not None:
            return True
        if self._creating:
            return False
        self._creating = True
        try:
            factor = min(replication_factor, max(1, len(image.live_broker_ids())))
            topic = CreatableTopic(
                self.name, num_partitions, factor, {"cleanup.policy": "compact", **configs(factor)}
            )
            response = await self.controller.create_topics(CreateTopicsRequest((topic,)))
            code = response.results[0].error_code
            if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                logger.warning("creating %s failed: %s", self.name, response.results[0])
        except KafkaError as exc:
            logger.warning("creating %s failed: %r", self.name, exc)
        finally:
            self._creating = False
        return False
