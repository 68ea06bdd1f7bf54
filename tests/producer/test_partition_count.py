"""SyncProducer.partition_count: a Future of a topic's partition count from the producer's
own metadata (what the Spark writer asks at a task's start instead of opening a connection
of its own), against librdkafka's mock cluster (it auto-creates topics with 4 partitions)."""

from __future__ import annotations

from producer.sync_producer import SyncProducer


def test_partition_count_is_the_topics_and_sends_follow(mock_cluster):
    with SyncProducer(mock_cluster.bootstrap) as producer:
        asked = producer.partition_count("counted")  # asked before anything is sent
        assert asked.result(timeout=10) == 4
        assert producer.partition_count("counted").result(timeout=10) == 4  # known now
        sent = [producer.send("counted", b"v", partition=p) for p in range(4)]
        assert [f.result(timeout=10).partition for f in sent] == [0, 1, 2, 3]
