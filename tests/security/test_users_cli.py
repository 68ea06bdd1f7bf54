"""`quorumlog users add|list|delete` against a real broker's SASL_SSL listener, with a
--command-config properties file like the one `up --secure` writes."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

from tests.security.test_clients import _sasl_ssl

pytestmark = pytest.mark.interop


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", "users", *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


async def test_users_add_list_delete(secure_broker, tmp_path):
    properties = tmp_path / "client.properties"
    properties.write_text(
        "# admin settings\n"
        + "".join(f"{k}={v}\n" for k, v in _sasl_ssl(secure_broker.pki, "SCRAM-SHA-256").items())
    )
    common = [
        "--bootstrap",
        secure_broker.bootstrap("SASL_SSL"),
        "--command-config",
        str(properties),
    ]

    added = await trio.to_thread.run_sync(
        lambda: _run("add", "hank", "--password", "hank-pw", "--iterations", "8192", *common)
    )
    assert added.returncode == 0, added.stderr
    assert secure_broker.quorum.image.scram_credentials[("hank", 2)].iterations == 8192
    listed = await trio.to_thread.run_sync(lambda: _run("list", "--json", *common))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == '{"hank": {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 8192}}'

    deleted = await trio.to_thread.run_sync(lambda: _run("delete", "hank", *common))
    assert deleted.returncode == 0, deleted.stderr
    assert secure_broker.quorum.image.scram_credentials == {}
    again = await trio.to_thread.run_sync(lambda: _run("delete", "hank", *common))
    assert again.returncode == 1 and "no SCRAM credentials" in again.stderr
