"""A tiny test harness: a MetadataStateMachine fed by controller decisions (no mocks)."""

from __future__ import annotations

import uuid

from quorum.controller import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
    CreateTopicsRequest,
    create_topics,
    heartbeat,
    register_broker,
)
from quorum.image import MetadataImage
from quorum.records import ActiveControllerRecord, BrokerEndpoint, encode_batch
from quorum.state_machine import ApplyResult, MetadataStateMachine


class Cluster:
    def __init__(self, controller_epoch: int = 1) -> None:
        self.sm = MetadataStateMachine()
        self.offset = 0
        self.proposal_id = 0
        self.controller_epoch = controller_epoch
        self.payloads: list[tuple[int, bytes]] = []
        self.apply([ActiveControllerRecord(0, controller_epoch)])

    @property
    def image(self) -> MetadataImage:
        return self.sm.image

    def apply(self, records, controller_epoch: int | None = None, gap: int = 0) -> ApplyResult:
        self.offset += 1 + gap
        self.proposal_id += 1
        epoch = self.controller_epoch if controller_epoch is None else controller_epoch
        return self._apply_payload(encode_batch(records, epoch, self.proposal_id))

    def apply_raw(self, payload: bytes) -> ApplyResult:
        self.offset += 1
        return self._apply_payload(payload)

    def _apply_payload(self, payload: bytes) -> ApplyResult:
        self.payloads.append((self.offset, payload))
        return self.sm.apply(self.offset, payload)

    def commit(self, records, **kwargs) -> ApplyResult:
        result = self.apply(records, **kwargs)
        assert result.accepted, result
        return result

    def add_broker(self, broker_id: int, unfence: bool = True) -> int:
        request = BrokerRegistrationRequest(
            broker_id, uuid.uuid4(), (BrokerEndpoint("PLAINTEXT", "localhost", 9092 + broker_id),)
        )
        records, response = register_broker(self.image, request)
        self.commit(records)
        if unfence:
            records, hb = heartbeat(
                self.image, BrokerHeartbeatRequest(broker_id, response.broker_epoch, self.offset)
            )
            assert not hb.is_fenced
            self.commit(records)
        return response.broker_epoch

    def create_topic(self, name: str, partitions: int, rf: int, start_index: int = 0) -> uuid.UUID:
        topic_id = uuid.UUID(int=len(self.image.topics) + 1 + self.offset * 1000)
        records, response = create_topics(
            self.image,
            CreateTopicsRequest((CreatableTopic(name, partitions, rf),)),
            start_index=start_index,
            topic_ids=[topic_id],
        )
        assert response.results[0].error_code == 0, response
        self.commit(records)
        return topic_id


def check_image_invariants(image: MetadataImage) -> None:
    """Independent restatement of the replay invariants, for property tests."""
    for topic_id, topic in image.topics.items():
        assert image.topic_ids_by_name[topic.name] == topic_id
        assert sorted(topic.partitions) == list(range(len(topic.partitions)))
        for state in topic.partitions.values():
            assert state.replicas and len(set(state.replicas)) == len(state.replicas)
            assert set(state.isr) <= set(state.replicas)
            assert set(state.elr) <= set(state.replicas) and not set(state.elr) & set(state.isr)
            assert len(set(state.elr)) == len(state.elr)
            assert set(state.last_known_elr) <= set(state.replicas)
            if state.leader == -1:
                assert len(state.isr) <= 1
            else:
                assert state.leader in state.isr
                for b in state.isr:
                    assert b in image.brokers and not image.brokers[b].fenced
    assert len(image.topic_ids_by_name) == len(image.topics)
