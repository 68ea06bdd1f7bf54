"""`kafka-acls.sh` for librdkafka's test suite: Kafka's flags, translated to `quorumlog acls`.

librdkafka's tests 0109, 0115 and 0119 add their deny/allow ACLs by running
`$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server B --add --deny-principal 'User:*' --operation
All --deny-host '*' --topic T`. bench/compat.py puts a `bin/kafka-acls.sh` that runs this module
in a directory it passes as KAFKA_PATH to those tests, so the ACLs reach the cluster as
CreateAcls/DeleteAcls requests of `quorumlog acls` (confluent-kafka's AdminClient), as Kafka's
tool sends them. Only the flags of a single-resource `--add`/`--remove` are understood; anything
else exits 2 naming it, so a test needing more fails visibly.
"""

from __future__ import annotations

import argparse

from bench.kafka_script import run


def translate(argv: list[str]) -> list[str]:
    """Kafka's kafka-acls.sh arguments -> `quorumlog` arguments."""
    parser = argparse.ArgumentParser(prog="kafka-acls.sh", exit_on_error=False)
    parser.add_argument("--bootstrap-server", required=True)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host",
                 "--operation"):  # fmt: skip
        parser.add_argument(flag, action="append", default=[])
    for flag in ("--topic", "--group", "--transactional-id", "--resource-pattern-type"):
        parser.add_argument(flag)
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--force", action="store_true")  # no prompt to skip here
    args = parser.parse_args(argv)
    allow_hosts = args.allow_host or (["*"] if args.allow_principal else [])
    deny_hosts = args.deny_host or (["*"] if args.deny_principal else [])
    if args.allow_principal and args.deny_principal and allow_hosts != deny_hosts:
        raise SystemExit("kafka-acls.sh (quorumlog): different allow and deny hosts in one call")
    out = ["acls", "add" if args.add else "remove", "-b", args.bootstrap_server]
    out += [f"--allow-principal={p}" for p in args.allow_principal]
    out += [f"--deny-principal={p}" for p in args.deny_principal]
    out += [f"--host={h}" for h in (allow_hosts or deny_hosts)]
    out += [f"--operation={o}" for o in args.operation]
    for flag in ("topic", "group", "transactional_id", "resource_pattern_type"):
        value = getattr(args, flag)
        if value is not None:
            out.append(f"--{flag.replace('_', '-')}={value}")
    if args.cluster:
        out.append("--cluster")
    return out


def main() -> None:
    run("kafka-acls.sh", translate)


if __name__ == "__main__":
    main()
