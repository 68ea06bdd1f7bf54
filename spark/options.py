"""Parsing the data source's options: spark-sql-kafka's names, values as Spark gives them.

Spark hands a Python data source a case-insensitive dict whose keys are lower-cased strings
and whose values are all strings. Everything is parsed and validated here, once, in the driver
(writer()/reader()), so a bad option fails the query at planning time with a message naming
the option, and executors receive plain picklable dataclasses.

Offsets in JSON follow spark-sql-kafka: `{"topic": {"0": 23, "1": -2}}` where -2 means the
earliest offset and -1 the latest (the high watermark).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1
PRODUCER_PREFIX = "producer."
WRITER_KINDS = ("arrow", "row")
MAX_MIN_PARTITIONS = 100_000  # a planning limit: more Spark tasks than this is a mistake
DEFAULT_TASK_TIMEOUT_MS = 600_000  # one write task's deadline for all its acknowledgements


class QuorumLogOptionError(ValueError):
    """An option is missing or malformed (raised in the driver, at planning time)."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return None if value is None else str(value)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise QuorumLogOptionError(f"option {name}: expected true or false, got {raw!r}")
    return text == "true"


def _int(options: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise QuorumLogOptionError(f"option {name}: expected an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise QuorumLogOptionError(f"option {name}: must be in [{low}, {high}], got {value}")
    return value


def bootstrap_servers(options: Mapping[str, str]) -> str:
    raw = _get(options, "bootstrap.servers") or _get(options, "kafka.bootstrap.servers")
    if not raw or not raw.strip():
        raise QuorumLogOptionError("option bootstrap.servers is required (host:port,...)")
    return raw.strip()


@dataclass(frozen=True, slots=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None  # the `topic` option; overrides a topic column
    producer_properties: dict[str, str] = field(default_factory=dict)
    writer_kind: str = "arrow"
    task_timeout_ms: int = DEFAULT_TASK_TIMEOUT_MS


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the sink options; the producer properties are checked by ProducerConfig."""
    from producer.config import ProducerConfig

    options = {str(k).lower(): v for k, v in options.items()}
    bootstrap = bootstrap_servers(options)
    topic = _get(options, "topic")
    if topic is not None and not topic.strip():
        raise QuorumLogOptionError("option topic: must not be empty")
    producer_properties = {
        key[len(PRODUCER_PREFIX) :]: str(value)
        for key, value in options.items()
        if key.lower().startswith(PRODUCER_PREFIX)
    }
    if "bootstrap.servers" in producer_properties:
        raise QuorumLogOptionError("set bootstrap.servers as an option, not producer.*")
    try:
        ProducerConfig.from_kafka_properties(
            {"bootstrap.servers": bootstrap, **producer_properties}
        )
    except Exception as exc:  # InvalidConfigError names the key
        raise QuorumLogOptionError(f"producer.* options: {exc}") from exc
    kind = (_get(options, "writer") or "arrow").strip().lower()
    if kind not in WRITER_KINDS:
        raise QuorumLogOptionError(f"option writer: expected arrow or row, got {kind!r}")
    timeout_ms = _int(options, "taskTimeoutMs", 1000, 2**31 - 1) or DEFAULT_TASK_TIMEOUT_MS
    return WriteOptions(
        bootstrap, topic.strip() if topic else None, producer_properties, kind, timeout_ms
    )


# -- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    assign: dict[str, tuple[int, ...]] | None
    starting: int | dict[str, dict[int, int]]  # EARLIEST / LATEST or per-partition offsets
    ending: int | dict[str, dict[int, int]]
    min_partitions: int | None
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    include_headers: bool = True

    @property
    def topics(self) -> tuple[str, ...]:
        if self.subscribe is not None:
            return self.subscribe
        assert self.assign is not None
        return tuple(self.assign)


def parse_offsets(name: str, raw: str | None, default: int, allow_earliest: bool = True):
    """`earliest` / `latest` / JSON {"topic": {"partition": offset}} (-2 earliest, -1 latest)."""
    if raw is None:
        return default
    text = raw.strip()
    if text.lower() == "earliest":
        if not allow_earliest:
            raise QuorumLogOptionError(f"option {name}: earliest is not allowed here")
        return EARLIEST
    if text.lower() == "latest":
        return LATEST
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise QuorumLogOptionError(
            f"option {name}: expected earliest, latest or JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}}, got {raw!r}'
        ) from None
    if not isinstance(parsed, dict):
        raise QuorumLogOptionError(f"option {name}: JSON must be an object of topics")
    result: dict[str, dict[int, int]] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise QuorumLogOptionError(f"option {name}: {topic!r} must map partitions to offsets")
        result[topic] = {}
        for partition, offset in partitions.items():
            try:
                p, o = int(partition), int(offset)
            except (TypeError, ValueError):
                raise QuorumLogOptionError(
                    f"option {name}: bad partition/offset {partition!r}: {offset!r}"
                ) from None
            if p < 0 or o < EARLIEST or (o == EARLIEST and not allow_earliest):
                raise QuorumLogOptionError(f"option {name}: bad offset {o} for {topic}-{p}")
            result[topic][p] = o
    return result


def parse_read_options(options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    options = {str(k).lower(): v for k, v in options.items()}
    bootstrap = bootstrap_servers(options)
    subscribe_raw = _get(options, "subscribe")
    assign_raw = _get(options, "assign")
    if (subscribe_raw is None) == (assign_raw is None):
        raise QuorumLogOptionError("exactly one of the options subscribe or assign is required")
    subscribe = assign = None
    if subscribe_raw is not None:
        subscribe = tuple(t.strip() for t in subscribe_raw.split(",") if t.strip())
        if not subscribe:
            raise QuorumLogOptionError("option subscribe: no topic given")
    else:
        assert assign_raw is not None  # exactly one of the two, checked above
        try:
            parsed = json.loads(assign_raw)
            assign = {str(t): tuple(sorted({int(p) for p in ps})) for t, ps in parsed.items()}
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise QuorumLogOptionError(
                f'option assign: expected JSON like {{"topic":[0,1]}}, got {assign_raw!r}'
            ) from None
        if not assign or any(p < 0 for ps in assign.values() for p in ps):
            raise QuorumLogOptionError("option assign: no (valid) partition given")
    starting = parse_offsets(
        "startingOffsets", _get(options, "startingOffsets"), LATEST if streaming else EARLIEST
    )
    ending = parse_offsets(
        "endingOffsets", _get(options, "endingOffsets"), LATEST, allow_earliest=False
    )
    if streaming and _get(options, "endingOffsets") is not None:
        raise QuorumLogOptionError("option endingOffsets is for batch queries only")
    return ReadOptions(
        bootstrap,
        subscribe,
        assign,
        starting,
        ending,
        _int(options, "minPartitions", 1, MAX_MIN_PARTITIONS),
        _bool(options, "failOnDataLoss", True),
        _int(options, "maxOffsetsPerTrigger", 1, 2**62),
        _bool(options, "includeHeaders", True),
    )
