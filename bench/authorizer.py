"""Authorizer benchmark: the cost of one authorization decision as the ACL count grows.

    python -m bench.authorizer [--acls 10 1000 10000 100000]

Builds a StandardAuthorizer (log/security/authorizer.py) over N LITERAL topic ACLs for 50
users plus N/10 PREFIXED ones, then times `authorize` for a topic that has an ACL and one that
has none, against the disabled authorizer (no authorizer.class.name) as the floor. Lookups
go by name and by each prefix length present, so the cost should stay flat in N.
"""

from __future__ import annotations

import argparse
import time

from log.common.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from log.security.authorizer import Authorizer, AuthorizerConfig

STANDARD = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
CALLS = 20_000


def _bindings(count: int) -> list[AclBinding]:
    topic, read, allow = ResourceType.TOPIC, AclOperation.READ, AclPermissionType.ALLOW
    literal = [AclBinding(topic, f"topic-{i}", PatternType.LITERAL, f"User:u{i % 50}", "*", read,
                          allow) for i in range(count)]  # fmt: skip
    prefixed = [AclBinding(topic, f"team{i}.", PatternType.PREFIXED, "User:u1", "*",
                           AclOperation.WRITE, allow) for i in range(count // 10)]  # fmt: skip
    return literal + prefixed


def _per_call_us(authorizer: Authorizer, name: str) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        authorizer.authorize("User:u7", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, name)
    return (time.perf_counter() - start) / CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acls", type=int, nargs="+", default=[10, 1000, 10_000, 100_000])
    args = parser.parse_args()
    disabled = Authorizer(AuthorizerConfig.from_props({}), ())
    print(f"{'ACLs':>8}  {'build ms':>9}  {'hit us':>7}  {'miss us':>8}  {'disabled us':>11}")
    for count in args.acls:
        bindings = _bindings(count)
        start = time.perf_counter()
        authorizer = Authorizer(AuthorizerConfig.from_props(STANDARD), bindings)
        build_ms = (time.perf_counter() - start) * 1000
        hit, miss = _per_call_us(authorizer, "topic-7"), _per_call_us(authorizer, "nobody")
        floor = _per_call_us(disabled, "topic-7")
        print(f"{count:>8}  {build_ms:>9.1f}  {hit:>7.2f}  {miss:>8.2f}  {floor:>11.2f}")


if __name__ == "__main__":
    main()
