"""`kafka-topics.sh` for librdkafka's test suite: Kafka's `--create` flags, translated to
`quorumlog topics create`.

librdkafka's tests 0052 and 0077 create their topics with configs by running
`$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS --create --topic T
--replication-factor R --partitions P --config K=V ...` (test.c's test_kafka_topics).
bench/compat.py puts a `bin/kafka-topics.sh` that runs this module in the KAFKA_PATH directory
it passes to those tests (beside bin/kafka-acls.sh, bench/kafka_acls.py), so the topic reaches
the cluster as a CreateTopics request of `quorumlog topics create` (tools/admin_client.py), as
Kafka's tool sends it. Only `--create` and its flags are understood; anything else (`--delete`,
`--alter`, `--list`, `--describe`, ...) exits 2 naming it, so a test needing more fails visibly.
Without `--partitions` or `--replication-factor` quorumlog's defaults (1) apply, not the
cluster's as with Kafka's tool; both tests give them.
"""

from __future__ import annotations

import argparse

from bench.kafka_script import run


def translate(argv: list[str]) -> list[str]:
    """Kafka's kafka-topics.sh arguments -> `quorumlog` arguments."""
    parser = argparse.ArgumentParser(prog="kafka-topics.sh", exit_on_error=False)
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--create", action="store_true", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--replication-factor", type=int)
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--if-not-exists", action="store_true")
    args = parser.parse_args(argv)
    out = ["topics", "create", "-b", args.bootstrap_server, f"--topic={args.topic}"]
    if args.partitions is not None:
        out.append(f"--partitions={args.partitions}")
    if args.replication_factor is not None:
        out.append(f"--replication-factor={args.replication_factor}")
    out += [f"--config={config}" for config in args.config]
    if args.if_not_exists:
        out.append("--if-not-exists")
    return out


def main() -> None:
    run("kafka-topics.sh", translate)


if __name__ == "__main__":
    main()
