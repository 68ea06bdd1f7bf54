"""ProducerConfig: Kafka defaults, string parsing, validation messages."""

import pytest

from log.common.errors import ErrorCode, InvalidConfigError
from producer.config import ProducerConfig


def test_kafka_defaults():
    config = ProducerConfig()
    assert config.acks == -1 and config.enable_idempotence
    assert (config.batch_size, config.linger_ms, config.buffer_memory) == (16384, 5, 33554432)
    assert config.max_block_ms == 60000 and config.max_in_flight_requests_per_connection == 5
    assert (config.request_timeout_ms, config.delivery_timeout_ms) == (30000, 120000)
    assert config.retries == 2147483647
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms) == (100, 1000)
    assert config.max_request_size == 1048576 and config.compression_type == "none"
    assert not config.partitioner_ignore_keys
    assert config.partitioner_adaptive_partitioning_enable
    assert config.partitioner_availability_timeout_ms == 0
    assert config.metadata_max_age_ms == 300000


def test_from_kafka_properties_parses_strings_and_both_spellings():
    config = ProducerConfig.from_kafka_properties(
        {
            "linger.ms": "200",
            "batch_size": "32768",
            "acks": "all",
            "compression.type": "zstd",
            "partitioner.ignore.keys": "TRUE",
            "client.id": "spark-writer",
            "bootstrap.servers": "localhost:9092",
            "max.request.size": 2_000_000,
        }
    )
    assert config.linger_ms == 200 and config.batch_size == 32768 and config.acks == -1
    assert config.compression.name == "ZSTD" and config.partitioner_ignore_keys
    assert config.client_id == "spark-writer" and config.max_request_size == 2_000_000


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"linger.ms": "soon"}, "linger.ms: expected an integer, got 'soon'"),
        ({"linger.ms": "-1"}, r"linger.ms: must be an integer in \[0, "),
        ({"enable.idempotence": "yes"}, "enable.idempotence: expected true or false"),
        ({"acks": "2"}, r"acks: expected all \(-1\), 0 or 1, got 2"),
        ({"acks": "most"}, "acks: expected all, -1, 0 or 1, got 'most'"),
        ({"compression.type": "brotli"}, "compression.type: unknown compression.type 'brotli'"),
        ({"foo.bar": "1", "linger.ms": "1", "zeta": 2}, r"unknown .*key\(s\): foo.bar, zeta"),
        (
            {"delivery.timeout.ms": "30000"},
            r"delivery.timeout.ms should be equal to or larger than linger.ms \+ "
            r"request.timeout.ms \(30000 < 5 \+ 30000\)",
        ),
        (
            {"enable.idempotence": "true", "acks": "1"},
            r"enable.idempotence=true requires that acks must be all \(-1\), got 1",
        ),
        (
            {"enable.idempotence": "true", "retries": "0"},
            "enable.idempotence=true requires that retries must be greater than 0",
        ),
        (
            {"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"},
            "requires that max.in.flight.requests.per.connection must be at most 5, got 6",
        ),
        ({"batch.size": "2000", "buffer.memory": "1000"}, "must not exceed buffer.memory"),
        ({"retry.backoff.ms": "2000"}, "retry.backoff.max.ms .* must be at least"),
    ],
)
def test_bad_values_and_combinations_are_named(properties, message):
    with pytest.raises(InvalidConfigError, match=message) as info:
        ProducerConfig.from_kafka_properties(properties)
    assert info.value.error_code == ErrorCode.INVALID_CONFIG


def test_implicit_idempotence_is_turned_off_by_conflicting_settings():
    assert not ProducerConfig.from_kafka_properties({"acks": "1"}).enable_idempotence
    assert not ProducerConfig.from_kafka_properties({"retries": "0"}).enable_idempotence
    relaxed = ProducerConfig.from_kafka_properties({"max.in.flight.requests.per.connection": "10"})
    assert not relaxed.enable_idempotence
    assert ProducerConfig.from_kafka_properties({"acks": "-1"}).enable_idempotence


def test_constructor_is_strict():
    with pytest.raises(InvalidConfigError, match="enable.idempotence=true requires"):
        ProducerConfig(acks=1)
    assert ProducerConfig(acks=0, enable_idempotence=False).acks == 0
