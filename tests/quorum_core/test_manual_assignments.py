"""Explicit replica assignments in CreateTopics and CreatePartitions (kafka-topics.sh
--replica-assignment), decided on a replayed image."""

from __future__ import annotations

import uuid

from quorum_core_harness import Cluster

from log.common.errors import ErrorCode
from quorum.controller import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    create_partitions,
    create_topics,
    fence_expired_brokers,
)


def _create(cluster: Cluster, topic: CreatableTopic) -> ErrorCode:
    records, response = create_topics(
        cluster.image, CreateTopicsRequest((topic,)), start_index=0, topic_ids=[uuid.uuid4()]
    )
    if records:
        cluster.commit(records)
    return response.results[0].error_code


def _cluster() -> Cluster:
    cluster = Cluster()
    for b in range(3):
        cluster.add_broker(b)
    return cluster


def test_topics_take_the_replicas_they_are_given():
    cluster = _cluster()
    assert _create(cluster, CreatableTopic("t", assignments=((2, 0), (1, 2)))) == ErrorCode.NONE
    topic = cluster.image.topic("t")
    assert [(s.replicas, s.isr, s.leader) for s in topic.partitions.values()] == [
        ((2, 0), (2, 0), 2),
        ((1, 2), (1, 2), 1),
    ]
    records, response = create_partitions(
        cluster.image,
        CreatePartitionsRequest((CreatePartitionsTopic("t", 3, ((0, 1),)),)),
        start_index=0,
    )
    assert response.results[0].error_code == ErrorCode.NONE
    cluster.commit(records)
    assert cluster.image.topic("t").partitions[2].replicas == (0, 1)


def test_a_fenced_replica_is_left_out_of_the_isr():
    cluster = _cluster()
    records, _ = fence_expired_brokers(cluster.image, {0: 0, 1: 1000, 2: 1000}, 1000, 500)
    cluster.commit(records)
    assert _create(cluster, CreatableTopic("t", assignments=((0, 1),))) == ErrorCode.NONE
    state = cluster.image.topic("t").partitions[0]
    assert (state.replicas, state.isr, state.leader) == ((0, 1), (1,), 1)
    assert _create(cluster, CreatableTopic("u", assignments=((0,),))) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    )


def test_bad_assignments():
    cluster = _cluster()
    bad = {
        "empty": ((),),
        "dup": ((1, 1),),
        "unknown": ((1, 7),),
        "uneven": ((1, 2), (0,)),
    }
    for name, assignments in bad.items():
        code = _create(cluster, CreatableTopic(name, assignments=assignments))
        assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT, name
    both = CreatableTopic("both", num_partitions=2, assignments=((1,), (2,)))
    assert _create(cluster, both) == ErrorCode.INVALID_REQUEST
    assert cluster.image.topic_ids_by_name == {}
    _create(cluster, CreatableTopic("t", assignments=((1, 2),)))
    for assignments in (((0,),), ((0, 1), (1, 2)), ((0, 0),)):
        _, response = create_partitions(
            cluster.image,
            CreatePartitionsRequest((CreatePartitionsTopic("t", 2, assignments),)),
            start_index=0,
        )
        assert response.results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT, assignments


def test_message_format_version_is_accepted_and_dropped():
    from quorum.controller import AlterConfigsRequest, alter_topic_configs

    cluster = _cluster()
    topic = CreatableTopic("t", 1, 1, {"message.format.version": "0.10.0", "retention.ms": "5"})
    assert _create(cluster, topic) == ErrorCode.NONE
    assert dict(cluster.image.topic_configs("t")) == {"retention.ms": "5"}
    records, response = alter_topic_configs(
        cluster.image, AlterConfigsRequest("t", {"message.format.version": "2.8"})
    )
    assert response.error_code == ErrorCode.NONE and records == []
