"""SCRAM users in the metadata log, managed by a real Kafka admin client (confluent-kafka's
alter/describe_user_scram_credentials over SASL_SSL): a user added by AlterUserScramCredentials
logs in with SCRAM (the broker reads the credential from its metadata image), Describe lists the
mechanisms and iterations (never a key), a deleted credential no longer logs in, and the
controller's refusals carry Kafka's error codes. The log holds no password."""

from __future__ import annotations

import pytest
import trio

from quorum.records import encode_records
from tests.security.test_clients import _confluent_auth_error, _confluent_round_trip, _sasl_ssl

pytestmark = pytest.mark.interop


def _admin(bootstrap: str, pki):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, **_sasl_ssl(pki, "SCRAM-SHA-512")})


def _alter(bootstrap: str, pki, upsert: list, delete: list) -> dict:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    operations = [
        UserScramCredentialUpsertion(
            user, ScramCredentialInfo(getattr(ScramMechanism, mechanism), iterations),
            password.encode(),
        )
        for user, mechanism, iterations, password in upsert
    ] + [
        UserScramCredentialDeletion(user, getattr(ScramMechanism, mechanism))
        for user, mechanism in delete
    ]  # fmt: skip
    admin = _admin(bootstrap, pki)  # kept alive until the futures complete
    futures = admin.alter_user_scram_credentials(operations)
    results = {}
    for user, future in futures.items():
        try:
            future.result(timeout=20)
            results[user] = None
        except Exception as exc:  # KafkaException carrying the broker's error
            results[user] = exc.args[0].name()
    return results


def _describe(bootstrap: str, pki, users: list[str] | None) -> dict:
    admin = _admin(bootstrap, pki)  # kept alive until the futures complete
    result = admin.describe_user_scram_credentials(users)
    if users is None:
        descriptions = result.result(timeout=20)
    else:
        descriptions = {}
        for user, future in result.items():
            try:
                descriptions[user] = future.result(timeout=20)
            except Exception as exc:
                descriptions[user] = exc.args[0].name()
    return {
        user: d if isinstance(d, str) else sorted(
            (info.mechanism.name, info.iterations) for info in d.scram_credential_infos
        )
        for user, d in descriptions.items()
    }  # fmt: skip


async def test_users_added_described_and_deleted_through_the_metadata_log(secure_broker):
    pki, bootstrap = secure_broker.pki, secure_broker.bootstrap("SASL_SSL")
    upsert = [("carol", "SCRAM_SHA_256", 4096, "carol-pw"), ("carol", "SCRAM_SHA_512", 8192, "carol-pw"),
              ("dave", "SCRAM_SHA_512", 4096, "dave-pw")]  # fmt: skip
    results = await trio.to_thread.run_sync(_alter, bootstrap, pki, upsert, [])
    assert results == {"carol": None, "dave": None}
    image = secure_broker.quorum.image
    assert sorted(image.scram_credentials) == [("carol", 1), ("carol", 2), ("dave", 2)]
    log_bytes = encode_records(image.to_records())
    assert b"carol-pw" not in log_bytes and b"dave-pw" not in log_bytes

    described = await trio.to_thread.run_sync(_describe, bootstrap, pki, None)
    assert described == {"carol": [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)],
                         "dave": [("SCRAM_SHA_512", 4096)]}  # fmt: skip
    described = await trio.to_thread.run_sync(_describe, bootstrap, pki, ["dave", "nobody"])
    assert described == {"dave": [("SCRAM_SHA_512", 4096)], "nobody": "RESOURCE_NOT_FOUND"}

    await secure_broker.create_topic("t")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        conf = _sasl_ssl(pki, mechanism, "carol", "carol-pw")
        values = await trio.to_thread.run_sync(_confluent_round_trip, bootstrap, "t", conf)
        assert len(values) >= 50

    results = await trio.to_thread.run_sync(
        _alter, bootstrap, pki, [], [("carol", "SCRAM_SHA_256")]
    )
    assert results == {"carol": None}
    from confluent_kafka import KafkaError

    errors = await trio.to_thread.run_sync(
        _confluent_auth_error, bootstrap, _sasl_ssl(pki, "SCRAM-SHA-256", "carol", "carol-pw"),
        {KafkaError._AUTHENTICATION},
    )  # fmt: skip
    assert KafkaError._AUTHENTICATION in {e.code() for e in errors if hasattr(e, "code")}


async def test_alter_refusals_carry_kafka_error_codes(secure_broker):
    pki, bootstrap = secure_broker.pki, secure_broker.bootstrap("SASL_SSL")
    results = await trio.to_thread.run_sync(
        _alter, bootstrap, pki,
        [("erin", "SCRAM_SHA_256", 100, "pw"), ("frank", "SCRAM_SHA_256", 4096, "pw")],
        [("gina", "SCRAM_SHA_512"), ("frank", "SCRAM_SHA_256")],
    )  # fmt: skip
    assert results == {
        "erin": "UNACCEPTABLE_CREDENTIAL",  # iterations below 4096
        "frank": "DUPLICATE_RESOURCE",  # the same credential twice in one request
        "gina": "RESOURCE_NOT_FOUND",  # nothing to delete
    }
    assert secure_broker.quorum.image.scram_credentials == {}


def test_credentials_survive_a_checkpoint_and_deletion_replays():
    from quorum.checkpoint import decode_checkpoint, encode_checkpoint
    from quorum.image import MetadataImage
    from quorum.scram_credentials import (
        AlterUserScramCredentialsRequest,
        ScramCredentialDeletion,
        ScramCredentialUpsertion,
        alter_user_scram_credentials,
    )

    upsert = ScramCredentialUpsertion("ivy", 2, 4096, "c2FsdA==", "c3RvcmVk", "c2VydmVy")
    records, response = alter_user_scram_credentials(
        MetadataImage(), AlterUserScramCredentialsRequest((), (upsert,))
    )
    assert [r.error_code for r in response.results] == [0]
    image = decode_checkpoint(encode_checkpoint(_replayed(records)))
    credential = image.scram_credentials[("ivy", 2)]
    assert (credential.salt, credential.stored_key, credential.server_key) == (
        b"salt", b"stored", b"server")  # fmt: skip
    records, response = alter_user_scram_credentials(
        image, AlterUserScramCredentialsRequest((ScramCredentialDeletion("ivy", 2),), ())
    )
    assert _replayed(records, image).scram_credentials == {}


def _replayed(records, image=None):
    from quorum.image import MetadataImage, replay_batch
    from quorum.records import ActiveControllerRecord, MetadataBatch

    if image is None:  # a first batch activates controller epoch 1
        image, records = MetadataImage(), [ActiveControllerRecord(1, 1), *records]
    return replay_batch(image, MetadataBatch(1, 1, tuple(records)), image.last_offset + 1)
