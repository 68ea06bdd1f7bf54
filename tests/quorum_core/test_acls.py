"""CreateAcls / DeleteAcls decisions (quorum/acls.py) and their replay into the image, through
a checkpoint and back."""

from __future__ import annotations

import uuid

from log.common.acl import AclBinding, AclBindingFilter, AclOperation, PatternType, ResourceType
from log.common.errors import ErrorCode
from quorum.acls import CreateAclsRequest, DeleteAclsRequest, create_acls, delete_acls
from quorum.image import MetadataImage, replay_batch, replay_checkpoint_records
from quorum.records import ActiveControllerRecord, MetadataBatch

READ = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                  AclOperation.READ, 3)  # fmt: skip
WRITE = AclBinding(ResourceType.TOPIC, "pay.", PatternType.PREFIXED, "User:bob", "*",
                   AclOperation.WRITE, 3)  # fmt: skip


def apply_records(image, records, offset):
    return replay_batch(image, MetadataBatch(image.controller_epoch, 0, tuple(records)), offset)


START = replay_batch(MetadataImage(), MetadataBatch(1, 0, (ActiveControllerRecord(1, 1),)), 0)


def _create(image, *bindings):
    request = CreateAclsRequest(bindings, tuple(uuid.uuid4() for _ in bindings))
    records, response = create_acls(image, request)
    return apply_records(image, records, image.last_offset + 1), response


def test_create_replay_delete():
    image, response = _create(START, READ, WRITE, READ)
    assert [r.error_code for r in response.results] == [0, 0, 0]
    assert len(image.acls) == 2  # the duplicate made no second record
    image, response = _create(image, READ)  # idempotent
    assert response.results[0].error_code == 0 and len(image.acls) == 2

    records, deleted = delete_acls(
        image, DeleteAclsRequest((AclBindingFilter(principal="User:bob"), AclBindingFilter()))
    )
    assert deleted.results[0].matching_acls == (WRITE,)
    assert deleted.results[1].matching_acls == (READ,)  # WRITE was removed by the first filter
    image = apply_records(image, records, image.last_offset + 1)
    assert image.acls == {}


def test_invalid_bindings_and_filters():
    bad = AclBinding(ResourceType.CLUSTER, "c", PatternType.LITERAL, "User:a", "*",
                     AclOperation.ALTER, 3)  # fmt: skip
    image, response = _create(START, bad, READ)
    assert [r.error_code for r in response.results] == [ErrorCode.INVALID_REQUEST, 0]
    assert len(image.acls) == 1
    _, deleted = delete_acls(image, DeleteAclsRequest((AclBindingFilter(pattern_type=0),)))
    assert deleted.results[0].error_code == ErrorCode.INVALID_REQUEST


def test_acls_survive_a_checkpoint():
    image, _ = _create(START, READ, WRITE)
    rebuilt = replay_checkpoint_records(image.to_records(), image.last_offset)
    assert rebuilt.acls == image.acls


def test_an_image_without_acl_changes_keeps_the_same_acl_mapping():
    image, _ = _create(START, READ)
    unchanged = apply_records(image, [], image.last_offset + 1)
    assert unchanged.acls is image.acls  # the broker's authorizer is not rebuilt
    changed, _ = _create(unchanged, WRITE)
    assert changed.acls is not image.acls and len(image.acls) == 1  # never changed in place
