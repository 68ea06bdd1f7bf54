"""Parsing the data source's options: spark-sql-kafka-0-10's names, values as Spark gives them.

Spark hands a Python data source a case-insensitive dict whose keys are lower-cased strings
and whose values are all strings. Everything is parsed and validated here, once, in the driver
(writer()/reader()), so a bad option fails the query at planning time with a message naming
the option, and executors receive plain picklable dataclasses.

Every option name is checked against the catalogue below: an unknown or misspelt option is an
error naming it, with the closest known name ("did you mean"), never silently ignored (where
spark-sql-kafka ignores some). `kafka.<name>` passes a Kafka client setting through: on write
any producer setting (validated by ProducerConfig, same as `producer.<name>`), on read the
consumer settings the fetch client honours (READ_KAFKA_SETTINGS); any other is refused naming
it. Offsets in JSON follow spark-sql-kafka: `{"topic": {"0": 23, "1": -2}}` where -2 means the
earliest offset and -1 the latest (the high watermark); timestamps are epoch milliseconds.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1
PRODUCER_PREFIX = "producer."
KAFKA_PREFIX = "kafka."
WRITER_KINDS = ("arrow", "row")
MAX_MIN_PARTITIONS = 100_000  # a planning limit: more Spark tasks than this is a mistake
DEFAULT_TASK_TIMEOUT_MS = 600_000  # one write task's deadline for all its acknowledgements
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # spark-sql-kafka's maxTriggerDelay default
# The Arrow writer gathers Spark's Arrow batches (10,000 rows by default) until they hold
# this many bytes before it partitions and encodes them: each partition's share then fills
# whole producer batches, and requests carry several (measured: a third less CPU in the
# writer and in the brokers than one Arrow batch at a time; bench/spark_write.py).
DEFAULT_ARROW_GATHER_BYTES = 4 * 1024 * 1024

# The option names, spelled as documented (matching is case-insensitive, as in Spark).
_COMMON = ("bootstrap.servers", "kafka.bootstrap.servers")
WRITE_OPTIONS = (
    *_COMMON,
    "topic",
    "writer",
    "taskTimeoutMs",
    "exactlyOnce",
    "exactlyOnceJobId",
    "arrowGatherBytes",
)
_READ = (
    *_COMMON,
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingOffsetsByTimestamp",
    "startingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "includeHeaders",
    "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
)
BATCH_READ_OPTIONS = (
    *_READ,
    "endingOffsets",
    "endingOffsetsByTimestamp",
    "endingTimestamp",
    "pushFilters",
)
STREAM_READ_OPTIONS = (*_READ, "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
# Options Spark itself adds to a streaming sink's options.
_SPARK_OWN = ("checkpointLocation", "queryName")

# kafka.<name> on read: consumer settings the fetch client honours -> its keyword.
READ_KAFKA_SETTINGS = {
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "fetch.max.wait.ms": "max_wait_ms",
}
# kafka.isolation.level: read_committed (our default, as spark-sql-kafka allows) reads up to the
# last stable offset and drops aborted transactions' records; FetchClient's isolation_level.
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
# kafka.<name> accepted on read with no effect, and why (anything else is refused).
READ_KAFKA_ACCEPTED = {
    "group.id": "Spark tracks offsets itself: no group is joined, no offset committed",
    "security.protocol": "PLAINTEXT only (the default)",
}
# Refused with spark-sql-kafka's reasons.
_KAFKA_FORBIDDEN = {
    "auto.offset.reset": "set startingOffsets instead",
    "enable.auto.commit": "Spark tracks offsets itself; nothing is committed",
    "key.deserializer": "keys are always read as bytes (cast the binary column)",
    "value.deserializer": "values are always read as bytes (cast the binary column)",
    "key.serializer": "keys are written as bytes (a string or binary key column)",
    "value.serializer": "values are written as bytes (a string or binary value column)",
    "interceptor.classes": "Java interceptors do not exist here",
}


class QuorumLogOptionError(ValueError):
    """An option is missing, unknown or malformed (raised in the driver, at planning time)."""


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


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    """Spark's time strings: "15m", "30s", "500ms", "1h", or plain milliseconds."""
    raw = _get(options, name)
    if raw is None:
        return default
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    unit = match.group(2) if match else None
    if match is None or (unit and unit not in _DURATION_UNITS):
        raise QuorumLogOptionError(
            f"option {name}: expected a duration like 15m, 30s or 500ms, got {raw!r}"
        )
    return int(match.group(1)) * _DURATION_UNITS[unit or "ms"]


def _did_you_mean(name: str, known: Iterable[str], prefix: str = "") -> str:
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {prefix + by_lower[close[0]]!r}?" if close else ""


def check_names(options: Mapping[str, str], known: Iterable[str], what: str) -> None:
    """Refuse an option that is not in `known` (nor a kafka.* / producer.* prefix, which
    the caller checks), naming it and the closest known name."""
    known = (*known, *_SPARK_OWN)
    allowed = {k.lower() for k in known}
    for key in options:
        lower = str(key).lower()
        if lower in allowed or lower.startswith(KAFKA_PREFIX):
            continue
        if lower.startswith(PRODUCER_PREFIX) and what == "write":
            continue
        others = {
            "write": (*BATCH_READ_OPTIONS, *STREAM_READ_OPTIONS),
            "batch read": (*WRITE_OPTIONS, *STREAM_READ_OPTIONS),
            "streaming read": (*WRITE_OPTIONS, *BATCH_READ_OPTIONS),
        }[what]
        if lower in {o.lower() for o in others}:
            hint = f"; it is not an option of a {what}"
        else:
            hint = _did_you_mean(lower, known)
        raise QuorumLogOptionError(f"unknown option {key!r} for a quorumlog {what}{hint}")


def bootstrap_servers(options: Mapping[str, str]) -> str:
    ours, theirs = _get(options, "bootstrap.servers"), _get(options, "kafka.bootstrap.servers")
    if ours is not None and theirs is not None and ours.strip() != theirs.strip():
        raise QuorumLogOptionError(
            "options bootstrap.servers and kafka.bootstrap.servers disagree; set one"
        )
    raw = ours or theirs
    if not raw or not raw.strip():
        raise QuorumLogOptionError("option kafka.bootstrap.servers is required (host:port,...)")
    return raw.strip()


def _kafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    """kafka.<name> options except bootstrap.servers, by Kafka name; spark-sql-kafka's
    forbidden ones refused with its reason."""
    out = {}
    for key, value in options.items():
        lower = str(key).lower()
        if not lower.startswith(KAFKA_PREFIX) or lower == "kafka.bootstrap.servers":
            continue
        name = lower[len(KAFKA_PREFIX) :]
        if name in _KAFKA_FORBIDDEN:
            raise QuorumLogOptionError(f"option {key}: not supported: {_KAFKA_FORBIDDEN[name]}")
        out[name] = str(value)
    return out


@dataclass(frozen=True, slots=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None  # the `topic` option; overrides a topic column
    producer_properties: dict[str, str] = field(default_factory=dict)
    writer_kind: str = "arrow"
    task_timeout_ms: int = DEFAULT_TASK_TIMEOUT_MS
    exactly_once: bool = False  # spark/exactly_once.py
    job_id: str | None = None  # exactlyOnceJobId: stable across re-runs (recovery), else fresh
    gather_bytes: int = DEFAULT_ARROW_GATHER_BYTES  # arrowGatherBytes (0: batch by batch)


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the sink options; the producer properties are checked by ProducerConfig."""
    from producer.config import ProducerConfig

    options = {str(k).lower(): v for k, v in options.items()}
    check_names(options, WRITE_OPTIONS, "write")
    bootstrap = bootstrap_servers(options)
    topic = _get(options, "topic")
    if topic is not None and not topic.strip():
        raise QuorumLogOptionError("option topic: must not be empty")
    producer_properties: dict[str, str] = {}
    spelled: dict[str, str] = {}  # Kafka name -> the option that set it, for messages
    for name, value in _kafka_settings(options).items():
        producer_properties[name] = value
        spelled[name] = KAFKA_PREFIX + name
    for key, value in options.items():
        if not key.startswith(PRODUCER_PREFIX):
            continue
        name = key[len(PRODUCER_PREFIX) :]
        if name in producer_properties and producer_properties[name] != str(value):
            raise QuorumLogOptionError(f"options {spelled[name]} and {key} disagree; set one")
        producer_properties[name] = str(value)
        spelled.setdefault(name, key)
    if "bootstrap.servers" in producer_properties:
        raise QuorumLogOptionError("set kafka.bootstrap.servers, not producer.bootstrap.servers")
    for name, option in spelled.items():
        try:
            ProducerConfig.from_kafka_properties({name: producer_properties[name]})
        except Exception as exc:  # InvalidConfigError names the key; say which option it was
            hint = _did_you_mean(name, _producer_names(), option[: -len(name)])
            raise QuorumLogOptionError(f"option {option}: {exc}{hint}") from exc
    try:
        ProducerConfig.from_kafka_properties(
            {"bootstrap.servers": bootstrap, **producer_properties}
        )
    except Exception as exc:  # a bad combination of settings
        raise QuorumLogOptionError(
            f"producer settings ({', '.join(spelled.values())}): {exc}"
        ) from exc
    kind = (_get(options, "writer") or "arrow").strip().lower()
    if kind not in WRITER_KINDS:
        raise QuorumLogOptionError(f"option writer: expected arrow or row, got {kind!r}")
    timeout_ms = _int(options, "taskTimeoutMs", 1000, 2**31 - 1) or DEFAULT_TASK_TIMEOUT_MS
    exactly_once = _bool(options, "exactlyOnce", False)
    job_id = _get(options, "exactlyOnceJobId")
    if job_id is not None:
        job_id = job_id.strip()
        if not exactly_once:
            raise QuorumLogOptionError("option exactlyOnceJobId needs exactlyOnce=true")
        if not re.fullmatch(r"[A-Za-z0-9._]{1,100}", job_id):
            raise QuorumLogOptionError(
                f"option exactlyOnceJobId: letters, digits, '.' and '_' only, got {job_id!r}"
            )
    if exactly_once and "transactional.id" in producer_properties:
        raise QuorumLogOptionError(
            "option kafka.transactional.id: exactlyOnce gives each task attempt its own"
        )
    gather = _int(options, "arrowGatherBytes", 0, 2**31 - 1)
    return WriteOptions(
        bootstrap, topic.strip() if topic else None, producer_properties, kind, timeout_ms,
        exactly_once, job_id, DEFAULT_ARROW_GATHER_BYTES if gather is None else gather,
    )  # fmt: skip


def _producer_names() -> list[str]:
    import dataclasses

    from producer.config import ProducerConfig

    return [f.name.replace("_", ".") for f in dataclasses.fields(ProducerConfig)]


# -- reading ---------------------------------------------------------------------------------

Offsets = int | dict[str, dict[int, int]]  # EARLIEST / LATEST, or per-partition offsets
Timestamps = int | dict[str, dict[int, int]]  # one timestamp for all, or per partition


@dataclass(frozen=True, slots=True)
class ReadOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    assign: dict[str, tuple[int, ...]] | None
    starting: Offsets
    ending: Offsets
    min_partitions: int | None
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    include_headers: bool = False
    subscribe_pattern: str | None = None
    starting_timestamps: Timestamps | None = None  # wins over `starting` when set
    ending_timestamps: Timestamps | None = None  # wins over `ending` when set
    timestamp_strategy: str = "error"  # no offset at/after a starting timestamp: error|latest
    max_records_per_partition: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    client_settings: dict[str, Any] = field(default_factory=dict)  # FetchClient keywords

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
    result = _partition_map(name, parsed)
    for topic, partitions in result.items():
        for p, o in partitions.items():
            if o < EARLIEST or (o == EARLIEST and not allow_earliest):
                raise QuorumLogOptionError(f"option {name}: bad offset {o} for {topic}-{p}")
    return result


def _partition_map(name: str, parsed: object) -> dict[str, dict[int, int]]:
    if not isinstance(parsed, dict):
        raise QuorumLogOptionError(f"option {name}: JSON must be an object of topics")
    result: dict[str, dict[int, int]] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise QuorumLogOptionError(f"option {name}: {topic!r} must map partitions to values")
        result[topic] = {}
        for partition, value in partitions.items():
            try:
                p, v = int(partition), int(value)
            except (TypeError, ValueError):
                raise QuorumLogOptionError(
                    f"option {name}: bad partition/value {partition!r}: {value!r}"
                ) from None
            if p < 0:
                raise QuorumLogOptionError(f"option {name}: bad partition {p} of {topic!r}")
            result[topic][p] = v
    return result


def _timestamps(options: Mapping[str, str], one: str, per_partition: str) -> Timestamps | None:
    """`startingTimestamp` (one for every partition) wins over `startingOffsetsByTimestamp`
    (JSON per partition), as in spark-sql-kafka; likewise for the ending ones."""
    single = _int(options, one, 0, 2**63 - 1)
    if single is not None:
        return single
    raw = _get(options, per_partition)
    if raw is None:
        return None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise QuorumLogOptionError(
            f'option {per_partition}: expected JSON like {{"topic":{{"0":1700000000000}}}}, '
            f"got {raw!r}"
        ) from None
    result = _partition_map(per_partition, parsed)
    if any(v < 0 for ps in result.values() for v in ps.values()):
        raise QuorumLogOptionError(f"option {per_partition}: timestamps must be >= 0")
    return result


def _client_settings(options: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in _kafka_settings(options).items():
        option = KAFKA_PREFIX + name
        if name in READ_KAFKA_SETTINGS:
            keyword = READ_KAFKA_SETTINGS[name]
            if keyword == "client_id":
                out[keyword] = value
            else:
                out[keyword] = _int({option: value}, option, 0, 2**31 - 1) or 0
        elif name == "isolation.level":
            level = value.strip().lower()
            if level not in ISOLATION_LEVELS:
                raise QuorumLogOptionError(
                    f"option {option}: expected read_committed or read_uncommitted, got {value!r}"
                )
            out["isolation_level"] = ISOLATION_LEVELS[level]
        elif name == "security.protocol":
            if value.strip().upper() != "PLAINTEXT":
                raise QuorumLogOptionError(
                    f"option {option}: only PLAINTEXT is supported, got {value!r}"
                )
        elif name not in READ_KAFKA_ACCEPTED:
            known = (*READ_KAFKA_SETTINGS, *READ_KAFKA_ACCEPTED, "isolation.level")
            hint = _did_you_mean(name, known, KAFKA_PREFIX)
            raise QuorumLogOptionError(
                f"option {option}: not a consumer setting this reader can honour (it "
                f"understands kafka.{', kafka.'.join(sorted(known))}){hint}"
            )
    out.setdefault("isolation_level", ISOLATION_LEVELS["read_committed"])
    poll = _int(options, "kafkaConsumer.pollTimeoutMs", 1, 2**31 - 1)
    if poll is not None:
        out.setdefault("request_timeout_ms", poll)
    retries = _int(options, "fetchOffset.numRetries", 1, 1000)
    if retries is not None:
        out["max_attempts"] = retries
    interval = _int(options, "fetchOffset.retryIntervalMs", 0, 2**31 - 1)
    if interval is not None:
        out.setdefault("retry_backoff_ms", interval)
    return out


def parse_read_options(options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    options = {str(k).lower(): v for k, v in options.items()}
    if streaming:
        check_names(options, STREAM_READ_OPTIONS, "streaming read")
    else:
        check_names(options, BATCH_READ_OPTIONS, "batch read")
    bootstrap = bootstrap_servers(options)
    subscribe_raw = _get(options, "subscribe")
    assign_raw = _get(options, "assign")
    pattern_raw = _get(options, "subscribePattern")
    given = [raw for raw in (subscribe_raw, assign_raw, pattern_raw) if raw is not None]
    if len(given) != 1:
        raise QuorumLogOptionError(
            "exactly one of the options subscribe, subscribePattern or assign is required"
        )
    subscribe = assign = pattern = None
    if subscribe_raw is not None:
        subscribe = tuple(t.strip() for t in subscribe_raw.split(",") if t.strip())
        if not subscribe:
            raise QuorumLogOptionError("option subscribe: no topic given")
    elif pattern_raw is not None:
        try:
            re.compile(pattern_raw)
        except re.error as exc:
            raise QuorumLogOptionError(f"option subscribePattern: bad regex: {exc}") from None
        pattern = pattern_raw
    else:
        assert assign_raw is not None  # exactly one of the three, checked above
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
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise QuorumLogOptionError(
            f"option startingOffsetsByTimestampStrategy: expected error or latest, got {strategy!r}"
        )
    min_trigger = _int(options, "minOffsetsPerTrigger", 1, 2**62)
    max_trigger = _int(options, "maxOffsetsPerTrigger", 1, 2**62)
    if min_trigger is not None and max_trigger is not None and min_trigger > max_trigger:
        raise QuorumLogOptionError("option minOffsetsPerTrigger must be <= maxOffsetsPerTrigger")
    return ReadOptions(
        bootstrap,
        subscribe,
        assign,
        starting,
        ending,
        _int(options, "minPartitions", 1, MAX_MIN_PARTITIONS),
        _bool(options, "failOnDataLoss", True),
        max_trigger,
        _bool(options, "includeHeaders", False),
        pattern,
        _timestamps(options, "startingTimestamp", "startingOffsetsByTimestamp"),
        _timestamps(options, "endingTimestamp", "endingOffsetsByTimestamp"),
        strategy,
        _int(options, "maxRecordsPerPartition", 1, 2**62),
        min_trigger,
        _duration_ms(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
        _client_settings(options),
    )
