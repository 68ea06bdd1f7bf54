"""A small confluent-kafka client run under the old-librdkafka venv (`make setup` builds
`.venv-ck23` with confluent-kafka 2.3.0, which bundles librdkafka 2.3.0).

It imports nothing of quorumlog: it is a separate interpreter with only confluent-kafka. Usage:
`python old_librdkafka_client.py BOOTSTRAP TOPIC_PREFIX COUNT`. For each compression codec it
creates the topic `<prefix>-<codec>` (2 partitions) with the AdminClient, produces COUNT keyed
records with an idempotent acks=all producer, and consumes them back with `check.crcs`. It prints
one JSON object on stdout: the library versions and, per codec, the delivery reports and the
consumed (key, value, partition, offset) tuples. Errors are reported in the JSON, not raised,
so that the test can show what went wrong.
"""

from __future__ import annotations

import json
import sys

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 2


def create_topics(bootstrap: str, topics: list[str]) -> dict[str, str | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics]
    )
    errors: dict[str, str | None] = {}
    for topic, future in futures.items():
        try:
            future.result(15)
            errors[topic] = None
        except KafkaException as e:
            errors[topic] = str(e)
    listed = admin.list_topics(timeout=15).topics
    for topic in topics:
        if topic not in listed or len(listed[topic].partitions) != PARTITIONS:
            errors[topic] = errors[topic] or "not listed with its partitions after creation"
    return errors


def produce(bootstrap: str, topic: str, codec: str, count: int) -> list:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 20,
        }
    )
    reports: list = []

    def on_delivery(err, msg):
        reports.append(
            [None if err is None else str(err), msg.key().decode(), msg.partition(), msg.offset()]
        )

    for i in range(count):
        producer.produce(
            topic, key=b"key-%d" % i, value=b"value-%d " % i * 20, on_delivery=on_delivery
        )
        producer.poll(0)
    left = producer.flush(30)
    if left:
        reports.append([f"{left} messages not delivered after flush", None, -1, -1])
    return reports


def consume(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "old-librdkafka",
            "enable.auto.commit": False,
            "check.crcs": True,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    consumed: list = []
    try:
        for _ in range(150):
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is not None:
                    consumed.append([str(msg.error()), None, -1, -1])
                    continue
                consumed.append(
                    [msg.key().decode(), msg.value().decode(), msg.partition(), msg.offset()]
                )
            if len(consumed) >= count:
                break
    finally:
        consumer.close()
    return consumed


def main() -> None:
    bootstrap, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    topics = {codec: f"{prefix}-{codec}" for codec in CODECS}
    result: dict = {
        "version": confluent_kafka.version()[0],
        "libversion": confluent_kafka.libversion()[0],
        "create_errors": create_topics(bootstrap, list(topics.values())),
        "codecs": {},
    }
    for codec, topic in topics.items():
        result["codecs"][codec] = {
            "topic": topic,
            "reports": produce(bootstrap, topic, codec, count),
            "consumed": consume(bootstrap, topic, count),
        }
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
