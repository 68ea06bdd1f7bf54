"""The topics a consumer subscribes to, read from its JoinGroup metadata (ConsumerProtocol).

Consumers (protocol type "consumer") put a ConsumerProtocolSubscription in each protocol's
metadata. Every version (0-3) starts with the same prefix, the only part the coordinator reads
(offset expiry of topics a Stable group no longer subscribes to, KIP-496):

    version   int16
    topics    int32 count, then each: string (int16 length, UTF-8)
    ...       user_data, owned_partitions (v1+), generation_id (v2+), rack_id (v3+): not read

A negative version or a short buffer is a CorruptRecordError; newer versions are read by the
same prefix, as Kafka's ConsumerProtocol reads versions above the ones it knows.
"""

from __future__ import annotations

import construct as c

from log.common.errors import CorruptRecordError

CONSUMER_PROTOCOL_TYPE = "consumer"
MAX_SUBSCRIBED_TOPICS = 100_000  # a bound on a hostile count; no consumer subscribes to more

_SUBSCRIPTION_PREFIX = c.Struct(
    "version" / c.Int16sb,
    "topic_count" / c.Int32sb,
    c.Check(lambda ctx: ctx.version >= 0 and 0 <= ctx.topic_count <= MAX_SUBSCRIBED_TOPICS),
    "topics" / c.Array(c.this.topic_count, c.PascalString(c.Int16sb, "utf-8")),
)


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """The topics of one member's ConsumerProtocolSubscription."""
    try:
        return frozenset(_SUBSCRIPTION_PREFIX.parse(metadata).topics)
    except (c.ConstructError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"bad consumer subscription: {exc}") from exc
