"""Admin request bodies that clients above the producer build: CreateTopics (Kafka API 19).

One builder for the Spark data source's topic creation (spark/admin.py) and the command line's
AdminClient (tools/admin_client.py); it lives here because both may import producer/ and spark
may not import tools. Sending and reading the answer stay with each caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from log.protocol.admin import CREATE_TOPICS_REQUEST

CREATE_TOPICS_KEY = 19
assert CREATE_TOPICS_REQUEST.api_key == CREATE_TOPICS_KEY


def create_topics_request(
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str] | None,
    *,
    timeout_ms: int,
    validate_only: bool = False,
) -> Any:
    """A CreateTopics body for one topic with no explicit replica assignment; the broker
    forwards it to the controller and waits up to `timeout_ms` for the topic to appear."""
    request: Any = CREATE_TOPICS_REQUEST.cls  # generated at import: attributes are dynamic
    return request(
        topics=[
            request.CreatableTopic(
                name=topic,
                num_partitions=partitions,
                replication_factor=replication_factor,
                assignments=[],
                configs=[
                    request.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                    for k, v in (configs or {}).items()
                ],
            )
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )
