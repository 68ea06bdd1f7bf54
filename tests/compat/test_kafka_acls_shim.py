"""bench/kafka_acls.py, the `kafka-acls.sh` that `make compat` gives librdkafka's tests 0109,
0115 and 0119: Kafka's flags become `quorumlog acls`, and the script bench/compat.py writes adds
and removes real ACLs on an in-process broker with an authorizer (CreateAcls/DeleteAcls over
the wire); flags it does not know exit 2."""

from __future__ import annotations

import subprocess

import pytest
import trio

from bench.compat import _kafka_tools_shim
from bench.kafka_acls import translate
from tests.broker.conftest import start_broker

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": True,
}


def test_kafka_flags_become_quorumlog_acls_arguments():
    deny = "--bootstrap-server h:1 --add --deny-principal User:* --operation All --deny-host *"
    assert translate([*deny.split(), "--topic", "t"]) == [
        "acls", "add", "-b", "h:1", "--deny-principal=User:*", "--host=*", "--operation=All",
        "--topic=t",
    ]  # fmt: skip
    allow = "--bootstrap-server h:1 --remove --force --allow-principal User:a --operation Read"
    assert translate([*allow.split(), "--group", "g"]) == [
        "acls", "remove", "-b", "h:1", "--allow-principal=User:a", "--host=*",
        "--operation=Read", "--group=g",
    ]  # fmt: skip


async def test_the_script_adds_and_removes_acls_on_a_broker(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path / "node", **AUTHORIZER)
    script = _kafka_tools_shim(tmp_path / "kafka-path") / "bin" / "kafka-acls.sh"

    def run(*args: str) -> subprocess.CompletedProcess:
        command = [str(script), "--bootstrap-server", broker.bootstrap, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    added = await trio.to_thread.run_sync(
        run, "--add", "--deny-principal", "User:*", "--operation", "All", "--deny-host", "*",
        "--topic", "secret",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    [acl] = broker.quorum.image.acls.values()
    assert (acl.resource_name, acl.principal, acl.host) == ("secret", "User:*", "*")
    removed = await trio.to_thread.run_sync(
        run, "--remove", "--force", "--deny-principal", "User:*", "--operation", "All",
        "--deny-host", "*", "--topic", "secret",
    )  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert broker.quorum.image.acls == {}
    unknown = await trio.to_thread.run_sync(run, "--list")
    assert unknown.returncode == 2 and "kafka-acls.sh" in unknown.stderr


pytestmark = pytest.mark.timeout(120)
