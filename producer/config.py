"""Producer configuration: Kafka's names, Kafka's defaults, validated once at construction.

`ProducerConfig` is a frozen dataclass whose fields are the Java client's property names in
snake_case (`linger.ms` -> `linger_ms`). `from_kafka_properties` accepts either spelling and
string values (Spark passes every option as a string), parses and validates them, and raises
`InvalidConfigError` naming the offending key for bad values, unknown keys and bad combinations.

Relationships checked (and why):

- `delivery_timeout_ms >= linger_ms + request_timeout_ms`: a batch must be allowed to linger and
  then wait for one full request before delivery gives up on it (Kafka's rule).
- idempotence needs `acks=all` (a batch acked by the leader alone could be lost and rewritten
  under a new sequence), `retries > 0` (the point of sequences is safe retries) and
  `max_in_flight_requests_per_connection <= 5` (the broker keeps the metadata of the last 5
  batches per producer to detect duplicates). As in Kafka >= 3.2, when idempotence was *not* set
  explicitly, a conflicting setting turns it off instead of failing; `ProducerConfig(...)` itself
  is strict.
- `batch_size <= buffer_memory`: a pooled batch buffer must fit in the pool.
- `transactional_id` (empty: none) needs idempotence, as in Kafka: when idempotence was not set
  explicitly it is on, and a conflicting setting is an error rather than turning it off.
  `transaction_two_phase_commit_enable` (KIP-939) needs a transactional id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from log.common.errors import InvalidConfigError
from log.records.compression import CompressionType

ACKS_ALL = -1
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5  # the broker caches the last 5 batches per producer id
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    bootstrap_servers: str = ""
    client_id: str = ""
    acks: int = ACKS_ALL
    enable_idempotence: bool = True
    batch_size: int = 16384
    linger_ms: int = 5
    buffer_memory: int = 33554432
    max_block_ms: int = 60000
    max_in_flight_requests_per_connection: int = 5
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    retries: int = _INT32_MAX
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    max_request_size: int = 1048576
    compression_type: str = "none"
    partitioner_ignore_keys: bool = False
    partitioner_adaptive_partitioning_enable: bool = True
    partitioner_availability_timeout_ms: int = 0
    metadata_max_age_ms: int = 300000
    transactional_id: str = ""
    transaction_timeout_ms: int = 60000
    transaction_two_phase_commit_enable: bool = False

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def compression(self) -> CompressionType:
        return CompressionType.from_name(self.compression_type)

    @classmethod
    def from_kafka_properties(cls, properties: Mapping[str, object]) -> ProducerConfig:
        """Build from Kafka-style properties ("linger.ms": "5"); see the module docstring."""
        # Any: each value has its field's type, which _parse knows at run time only.
        values: dict[str, Any] = {}
        unknown = []
        for raw_key, raw_value in properties.items():
            name = str(raw_key).strip().replace(".", "_").replace("-", "_")
            if name not in _FIELD_TYPES:
                unknown.append(str(raw_key))
                continue
            values[name] = _parse(str(raw_key), name, raw_value)
        if unknown:
            raise InvalidConfigError(
                f"unknown producer configuration key(s): {', '.join(sorted(unknown))}"
            )
        if "enable_idempotence" not in values and not values.get("transactional_id"):
            merged = {f.name: f.default for f in dataclasses.fields(cls)} | values
            if _idempotence_conflict(merged) is not None:
                values["enable_idempotence"] = False
        return cls(**values)


_FIELD_TYPES: dict[str, str] = {f.name: str(f.type) for f in dataclasses.fields(ProducerConfig)}


def _parse(key: str, name: str, raw: object) -> object:
    kind = _FIELD_TYPES[name]
    if name == "acks":
        return _parse_acks(key, raw)
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise InvalidConfigError(f"{key}: expected true or false, got {raw!r}")
    if kind == "int":
        if isinstance(raw, bool):
            raise InvalidConfigError(f"{key}: expected an integer, got {raw!r}")
        if isinstance(raw, int):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise InvalidConfigError(f"{key}: expected an integer, got {raw!r}") from None
    return str(raw).strip()


def _parse_acks(key: str, raw: object) -> int:
    text = str(raw).strip().lower()
    if text == "all":
        return ACKS_ALL
    try:
        acks = int(text)
    except ValueError:
        raise InvalidConfigError(f"{key}: expected all, -1, 0 or 1, got {raw!r}") from None
    return acks


def _idempotence_conflict(values: Mapping[str, object]) -> str | None:
    if values["acks"] != ACKS_ALL:
        return f"acks must be all (-1), got {values['acks']}"
    if values["retries"] == 0:
        return "retries must be greater than 0"
    max_in_flight = values["max_in_flight_requests_per_connection"]
    assert isinstance(max_in_flight, int)  # an int field, parsed as one
    if max_in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        return (
            "max.in.flight.requests.per.connection must be at most "
            f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE}, got {max_in_flight}"
        )
    return None


_RANGES: dict[str, tuple[int, int]] = {
    "batch_size": (0, _INT32_MAX),
    "linger_ms": (0, _INT32_MAX),
    "buffer_memory": (1, _INT64_MAX),
    "max_block_ms": (0, _INT64_MAX),
    "max_in_flight_requests_per_connection": (1, _INT32_MAX),
    "request_timeout_ms": (0, _INT32_MAX),
    "delivery_timeout_ms": (0, _INT32_MAX),
    "retries": (0, _INT32_MAX),
    "retry_backoff_ms": (0, _INT64_MAX),
    "retry_backoff_max_ms": (0, _INT64_MAX),
    "max_request_size": (1, _INT32_MAX),
    "partitioner_availability_timeout_ms": (0, _INT64_MAX),
    "metadata_max_age_ms": (0, _INT64_MAX),
    "transaction_timeout_ms": (1, _INT32_MAX),
}


def _kafka_name(name: str) -> str:
    return name.replace("_", ".")


def _validate(config: ProducerConfig) -> None:
    for name, (low, high) in _RANGES.items():
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise InvalidConfigError(
                f"{_kafka_name(name)}: must be an integer in [{low}, {high}], got {value!r}"
            )
    if config.acks not in (ACKS_ALL, 0, 1):
        raise InvalidConfigError(f"acks: expected all (-1), 0 or 1, got {config.acks!r}")
    try:
        CompressionType.from_name(config.compression_type)
    except ValueError as exc:
        raise InvalidConfigError(f"compression.type: {exc}") from None
    if config.delivery_timeout_ms < config.linger_ms + config.request_timeout_ms:
        raise InvalidConfigError(
            "delivery.timeout.ms should be equal to or larger than linger.ms + "
            f"request.timeout.ms ({config.delivery_timeout_ms} < {config.linger_ms} + "
            f"{config.request_timeout_ms}): a batch must be allowed to linger and then wait "
            "for one full request"
        )
    if config.enable_idempotence:
        conflict = _idempotence_conflict(dataclasses.asdict(config))
        if conflict is not None:
            raise InvalidConfigError(f"enable.idempotence=true requires that {conflict}")
    if config.transactional_id and not config.enable_idempotence:
        raise InvalidConfigError("transactional.id requires enable.idempotence=true")
    if config.transaction_two_phase_commit_enable and not config.transactional_id:
        raise InvalidConfigError("transaction.two.phase.commit.enable requires transactional.id")
    if config.batch_size > config.buffer_memory:
        raise InvalidConfigError(
            f"batch.size ({config.batch_size}) must not exceed buffer.memory "
            f"({config.buffer_memory}): a pooled batch buffer must fit in the pool"
        )
    if config.retry_backoff_max_ms < config.retry_backoff_ms:
        raise InvalidConfigError(
            f"retry.backoff.max.ms ({config.retry_backoff_max_ms}) must be at least "
            f"retry.backoff.ms ({config.retry_backoff_ms})"
        )
