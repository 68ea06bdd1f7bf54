import pytest

from log.common.errors import InvalidConfigError
from log.storage.config import LogConfig


def test_defaults_are_kafkas():
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == 604_800_000
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604_800_000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.min_insync_replicas == 1
    assert config.cleanup_policy == "delete"
    assert config.flush_messages == (1 << 63) - 1


def test_from_properties_dotted_names_roundtrip():
    config = LogConfig.from_properties(
        {"segment.bytes": "1024", "retention.ms": "-1", "message.timestamp.type": "LogAppendTime"}
    )
    assert config.segment_bytes == 1024
    assert config.retention_ms == -1
    assert config.is_log_append_time
    assert LogConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    "properties",
    [
        {"segment.bytes": "abc"},
        {"segment.bytes": "0"},
        {"retention.ms": "-2"},
        {"message.timestamp.type": "Wallclock"},
        {"cleanup.policy": "shred"},
        {"no.such.config": "1"},
        {"min.insync.replicas": "0"},
    ],
)
def test_bad_values_raise_invalid_config(properties):
    with pytest.raises(InvalidConfigError) as excinfo:
        LogConfig.from_properties(properties)
    assert next(iter(properties)) in str(excinfo.value) or "unknown" in str(excinfo.value)
