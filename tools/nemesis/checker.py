"""The nemesis's verdict, sans-IO: what the producers were told against what the log holds.

As Jepsen's Kafka checker does for a log: every value a producer wrote is unique
("<producer>:<sequence>"), so the read-back can be matched to the acknowledgements.

    verdict = check(acked, failed, read, replica_logs)

- `acked`: value -> (partition, offset) from each successful delivery report; the offset is
  None when the client could not tell it: librdkafka acknowledges an idempotent batch whose
  own answer never came (a retry refused with a retriable error, say) once a later batch of
  the same partition succeeded -- the broker took the later sequence, so it holds this one
  ("implicitly acked", no offset). Such a value must be read in that partition, once;
- `failed`: values whose delivery failed (indeterminate: they may or may not be in the log);
- `read`: partition -> [(offset, value)], everything read back from offset 0 to the end;
- `replica_logs`: partition -> {broker_id: [batch bytes below the high watermark]}.

Violations:
- lost: acknowledged, never read;
- duplicated: read more than once (idempotent producers must never duplicate);
- inconsistent offset: read at another offset (or partition) than its acknowledgement said
  (another partition only, for an acknowledgement without an offset);
- out of order: one producer's values in one partition not in its sequence order;
- unexpected: a value nobody wrote;
- diverging replicas: replicas of a partition whose batches below the high watermark are not
  byte-identical.
A failed write that shows up is fine (indeterminate); one that does not is not a loss.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MAX_EXAMPLES = 5  # per violation kind, in the verdict


@dataclass
class Verdict:
    acked: int = 0
    failed: int = 0
    read: int = 0
    failed_but_present: int = 0
    acked_without_offset: int = 0  # implicitly acknowledged by the client (see the docstring)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    diverging_replicas: list[str] = field(default_factory=list)

    @property
    def violations(self) -> dict[str, list[str]]:
        kinds = ("lost", "duplicated", "inconsistent", "out_of_order", "unexpected",
                 "diverging_replicas")  # fmt: skip
        return {kind: getattr(self, kind) for kind in kinds}

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


def parse_value(value: str) -> tuple[str, int] | None:
    """("producer", sequence) of a nemesis value, or None for anything else."""
    producer, _, sequence = value.rpartition(":")
    if not producer or not sequence.isdigit():
        return None
    return producer, int(sequence)


def check(
    acked: Mapping[str, tuple[int, int | None]],
    failed: Iterable[str],
    read: Mapping[int, list[tuple[int, str]]],
    replica_logs: Mapping[int, Mapping[int, list[bytes]]],
) -> Verdict:
    failed = set(failed)
    verdict = Verdict(acked=len(acked), failed=len(failed))
    seen: dict[str, tuple[int, int]] = {}
    counts: Counter[str] = Counter()
    for partition in sorted(read):
        last_sequence: dict[str, tuple[int, int]] = {}  # producer -> (sequence, offset)
        for offset, value in read[partition]:
            verdict.read += 1
            counts[value] += 1
            seen.setdefault(value, (partition, offset))
            parsed = parse_value(value)
            if parsed is None or (value not in acked and value not in failed):
                verdict.unexpected.append(f"{value!r} at {partition}/{offset}")
                continue
            producer, sequence = parsed
            previous = last_sequence.get(producer)
            if previous is not None and sequence <= previous[0]:
                verdict.out_of_order.append(
                    f"{producer}: sequence {sequence} at {partition}/{offset} after "
                    f"{previous[0]} at {partition}/{previous[1]}"
                )
            last_sequence[producer] = (sequence, offset)
    for value, count in counts.items():
        if count > 1:
            verdict.duplicated.append(f"{value!r} read {count} times")
    for value, where in acked.items():
        found = seen.get(value)
        if where[1] is None:
            verdict.acked_without_offset += 1
        if found is None:
            verdict.lost.append(f"{value!r} acknowledged at {where[0]}/{where[1]}")
        elif found != where and (where[1] is not None or found[0] != where[0]):
            verdict.inconsistent.append(
                f"{value!r} acknowledged at {where[0]}/{where[1]}, read at {found[0]}/{found[1]}"
            )
    verdict.failed_but_present = sum(1 for value in failed if value in seen)
    for partition in sorted(replica_logs):
        replicas = replica_logs[partition]
        reference_id = min(replicas)
        reference = replicas[reference_id]
        for broker_id, batches in sorted(replicas.items()):
            if batches != reference:
                at = next(
                    (i for i, (a, b) in enumerate(zip(batches, reference, strict=False)) if a != b),
                    min(len(batches), len(reference)),
                )
                verdict.diverging_replicas.append(
                    f"partition {partition}: broker {broker_id} differs from broker "
                    f"{reference_id} at batch {at} ({len(batches)} vs {len(reference)} batches)"
                )
    return verdict
