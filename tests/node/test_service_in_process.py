"""In-process tests of the controller service and the broker lifecycle (one-voter quorum on
real loopback sockets), plus the wire/JSON codecs of the controller listener."""

from __future__ import annotations

import uuid

import pytest
import trio
from cluster_harness import free_base_port, one_node_config

from log.common.acl import AclBinding, AclBindingFilter
from log.common.errors import ErrorCode, InvalidRequestError
from log.protocol import controller_extra as extra
from quorum import acls, controller_auth, controller_codec, features
from quorum import broker_configs as bc
from quorum import controller as c
from quorum import leader_election as le
from quorum import metadata_quorum as mq
from quorum import reassignment as ra
from quorum import scram_credentials as scram
from quorum.broker_lifecycle import BrokerLifecycle
from quorum.controller_client import ControllerClient
from quorum.service import ControllerService

pytestmark = pytest.mark.timeout(60)


def test_controller_codec_round_trips_every_operation():
    topic_id = uuid.UUID(int=7)
    samples = {
        "create_topics": c.CreateTopicsRequest(
            (c.CreatableTopic("t", 3, 1, {"retention.ms": "5"}),)
        ),
        "delete_topics": c.DeleteTopicsRequest(("t",), (topic_id,)),
        "create_partitions": c.CreatePartitionsRequest((c.CreatePartitionsTopic("t", 4),), True),
        "alter_topic_configs": c.AlterConfigsRequest("t", {"a": "1", "b": None}),
        "alter_broker_configs": bc.AlterBrokerConfigsRequest("", {"a": "1", "b": None}),
        "alter_partitions": c.AlterPartitionsRequest(
            (c.AlterPartitionRequest(1, 5, topic_id, 0, 2, 3, (1, 2)),)
        ),
        "controlled_shutdown": c.ControlledShutdownRequest(2, 9),
        "elect_leaders": le.ElectLeadersRequest(1, (le.ElectLeadersTopic("t", (0, 3)),)),
        "alter_partition_reassignments": ra.AlterPartitionReassignmentsRequest(
            (
                ra.ReassignableTopic(
                    "t", (ra.ReassignablePartition(0, (2, 3)), ra.ReassignablePartition(1, None))
                ),
            )
        ),
        "alter_user_scram_credentials": scram.AlterUserScramCredentialsRequest(
            (scram.ScramCredentialDeletion("a", 1),),
            (scram.ScramCredentialUpsertion("b", 2, 4096, "c2FsdA==", "aw==", "aw=="),),
        ),
        "create_acls": acls.CreateAclsRequest(
            (AclBinding(2, "t", 3, "User:a", "*", 3, 3),), (topic_id,)
        ),
        "delete_acls": acls.DeleteAclsRequest(
            (AclBindingFilter(), AclBindingFilter(2, "t", 2, "User:a", None, 1, 1))
        ),
        "describe_quorum": mq.DescribeQuorumRequest(from_any_controller=True),
        "add_raft_voter": mq.AddRaftVoterRequest(4, "198.18.0.14:9193", "198.18.0.14:9093"),
        "remove_raft_voter": mq.RemoveRaftVoterRequest(3),
        "update_features": features.UpdateFeaturesRequest(
            (features.FeatureUpdate("transaction.version", 1, features.SAFE_DOWNGRADE),), True
        ),
    }
    assert set(samples) == set(controller_codec.OPERATIONS)
    quorum = mq.DescribeQuorumResponse(
        ErrorCode.NONE, 1, 7, 42, (mq.VoterState(1, "h:9193", "h:9093", True, 40),)
    )
    decoded_quorum = controller_codec.decode(
        mq.DescribeQuorumResponse, controller_codec.encode(quorum)
    )
    assert decoded_quorum == quorum
    for operation, request in samples.items():
        request_type, _ = controller_codec.OPERATIONS[operation]
        assert controller_codec.decode(request_type, controller_codec.encode(request)) == request
    response = c.CreateTopicsResponse(
        (c.CreatableTopicResult("t", ErrorCode.TOPIC_ALREADY_EXISTS, "exists", topic_id, 3, 1),)
    )
    decoded = controller_codec.decode(c.CreateTopicsResponse, controller_codec.encode(response))
    assert decoded == response
    everything = le.ElectLeadersRequest(0, None)
    assert controller_codec.decode(le.ElectLeadersRequest, controller_codec.encode(everything)) == (
        everything
    )
    elected = le.ElectLeadersResponse(
        ErrorCode.NONE,
        (le.TopicElectionResults("t", (le.PartitionElectionResult(0, ErrorCode.NONE),)),),
    )
    assert (
        controller_codec.decode(le.ElectLeadersResponse, controller_codec.encode(elected))
        == elected
    )


@pytest.mark.parametrize(
    "payload",
    [b"", b"{", b"[]", b'{"topics": 5}', b'{"topics": [{"name": 1}]}',
     b'{"topic_names": ["x"], "topic_ids": ["not-a-uuid"]}', b'{"topics": [[[[[[[[[[]]]]]]]]]]}'],
)  # fmt: skip
def test_controller_codec_refuses_bad_payloads_with_a_typed_error(payload):
    for request_type, _ in controller_codec.OPERATIONS.values():
        try:
            controller_codec.decode(request_type, payload)
        except InvalidRequestError:
            pass


def test_controller_listener_frames_round_trip():
    body = extra.METADATA_FETCH_REQUEST.cls(broker_id=4, after_offset=17, max_wait_ms=9)
    frame = extra.encode_request_frame(extra.METADATA_FETCH_KEY, 5, "me", body)
    header, api, decoded = extra.decode_request_frame(frame[4:])
    assert (header.correlation_id, header.client_id, decoded) == (5, "me", body)
    response = api.response.cls(
        error_code=0, batches=[api.response.cls.MetadataBatch(offset=3, payload=b"x")]
    )
    out = extra.encode_response_frame(api, 5, response)
    assert extra.decode_response_frame(out[4:], extra.METADATA_FETCH_KEY) == (5, response)
    with pytest.raises(InvalidRequestError):
        extra.decode_request_frame(b"\x00\x13\x00\x00" + frame[8:])  # CreateTopics: not served


async def test_one_node_registers_unfences_creates_topics_and_survives_garbage(tmp_path):
    config = one_node_config(tmp_path, free_base_port(1))
    service = ControllerService(config, seed=1)
    async with trio.open_nursery() as nursery:
        controller_port = await nursery.start(service.run)
        voters = config.controller_voters
        secret = config.props["controller.quorum.password"]
        lifecycle = BrokerLifecycle(
            config, ControllerClient(voters, secret=secret), ControllerClient(voters, secret=secret)
        )
        images = lifecycle.subscribe()
        with trio.fail_after(20):
            await nursery.start(lifecycle.run)
            await lifecycle.unfenced.wait()
        assert service.is_active and service.image.brokers[1].fenced is False
        # a new cluster: the first activation finalized Kafka 4.0's default feature levels
        assert service.image.features == {"transaction.version": 2, "group.version": 1}

        # A stranger without the cluster secret is refused after its 48 handshake bytes;
        # garbage after a good handshake closes that connection only.
        with trio.fail_after(5):
            async with await trio.open_tcp_stream("127.0.0.1", controller_port) as raw:
                hello = await raw.receive_some(100)
                assert hello[:4] == controller_auth.MAGIC and len(hello) == 20
                await raw.send_all(b"\x00" * controller_auth.PROOF_BYTES)
                assert await raw.receive_some(100) == b""
            async with await trio.open_tcp_stream("127.0.0.1", controller_port) as raw:
                with pytest.raises(controller_auth.HandshakeError):
                    await controller_auth.connect(raw, "not-the-secret")
            async with await trio.open_tcp_stream("127.0.0.1", controller_port) as raw:
                await controller_auth.connect(raw, secret)
                await raw.send_all(b"\x00\x00\x00\x08garbage!")
                assert await raw.receive_some(100) == b""

        client = ControllerClient(voters, secret=secret)
        with trio.fail_after(20):
            response = await client.create_topics(
                c.CreateTopicsRequest((c.CreatableTopic("t", 2, 1),))
            )
            assert response.results[0].error_code == ErrorCode.NONE
            again = await client.create_topics(
                c.CreateTopicsRequest((c.CreatableTopic("t", 2, 1),))
            )
            assert again.results[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            image = await lifecycle.wait_for_image(service.image.last_offset)
            assert sorted(image.topic("t").partitions) == [0, 1]
            while (seen := await images.receive()).topic("t") is None:
                pass
            assert seen.topic("t").topic_id == response.results[0].topic_id
            ids = await client.allocate_producer_ids(
                c.AllocateProducerIdsRequest(1, lifecycle.broker_epoch)
            )
            assert (ids.error_code, ids.producer_id_len) == (ErrorCode.NONE, 1000)
            stale = await client.allocate_producer_ids(c.AllocateProducerIdsRequest(1, 0))
            assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
            await lifecycle.controlled_shutdown()
        assert service.image.brokers[1].fenced
        await client.aclose()
        nursery.cancel_scope.cancel()


def test_node_command_reports_a_missing_or_bad_config_in_one_line(tmp_path):
    from click.testing import CliRunner

    from tools.cli import main

    result = CliRunner().invoke(main, ["node", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "node.toml: no such file" in result.output
    (tmp_path / "node.toml").write_text('"node.id" = 1\n"no.such.key" = 3\n')
    result = CliRunner().invoke(main, ["node", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "unknown configuration key 'no.such.key'" in result.output
