"""ConnectionQuotas (max.connections, per IP, overrides, the descriptor cap) and RepeatLimiter."""

from __future__ import annotations

import logging

import pytest

from log.common.node_config import parse_overrides
from log.server.connection_quotas import ConnectionQuotas, descriptor_cap
from log.server.repeat_limiter import RepeatLimiter


def test_per_ip_total_and_override_limits():
    quotas = ConnectionQuotas(max_connections=4, max_connections_per_ip=2,
                              per_ip_overrides={"10.0.0.9": 3}, cap=100)  # fmt: skip
    assert quotas.try_open("10.0.0.1") is None and quotas.try_open("10.0.0.1") is None
    assert "max.connections.per.ip 2" in quotas.try_open("10.0.0.1")
    assert [quotas.try_open("10.0.0.9") for _ in range(2)] == [None, None]
    assert "max.connections 4" in quotas.try_open("10.0.0.9")  # its override is 3, total 4
    quotas.close("10.0.0.1")
    assert quotas.try_open("10.0.0.9") is None
    assert quotas.total == 4 and quotas.by_ip == {"10.0.0.1": 1, "10.0.0.9": 3}


def test_the_total_never_exceeds_half_the_descriptor_limit():
    assert ConnectionQuotas(cap=10).max_connections == 10
    assert ConnectionQuotas().max_connections == descriptor_cap()


def test_overrides_parse_or_fail_clearly():
    assert parse_overrides("") == {}
    assert parse_overrides("127.0.0.1:5, ::1:7") == {"127.0.0.1": 5, "::1": 7}
    with pytest.raises(ValueError, match="host:count"):
        parse_overrides("127.0.0.1")


def test_a_repeated_line_is_logged_once_per_interval_with_the_count_held_back(caplog):
    now = [0.0]
    limiter = RepeatLimiter(interval_s=60, clock=lambda: now[0])
    logger = logging.getLogger("test.repeat")
    with caplog.at_level(logging.INFO, logger="test.repeat"):
        for _ in range(100):
            limiter.log(logger, logging.INFO, "refused", "refused %s", "x")
            now[0] += 1.0
        limiter.log(logger, logging.INFO, "other", "other line")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "refused x"
    assert lines[1] == "refused x (59 more like it in the last 60 s)"
    assert lines[2] == "other line" and len(lines) == 3


async def test_the_listener_refuses_over_the_per_ip_limit_and_closes_idle_connections(
    nursery, tmp_path, caplog
):
    """A real broker with max.connections.per.ip 2: a third connection from 127.0.0.1 is
    closed at once (one INFO line however many are refused), a slot freed is usable again,
    and a connection idle for connections.max.idle.ms is closed by the broker."""
    import trio

    from log.protocol.api_versions import API_VERSIONS_REQUEST
    from tests.broker.conftest import WireClient, start_broker

    broker = await start_broker(
        nursery, tmp_path, **{"max.connections.per.ip": 2, "connections.max.idle.ms": 300}
    )

    async def connect() -> trio.SocketStream:
        return await trio.open_tcp_stream("127.0.0.1", broker.port)

    with caplog.at_level(logging.INFO, logger="log.server.broker"), trio.fail_after(10):
        first, second = await connect(), await connect()
        for _ in range(5):
            refused = await connect()
            assert await refused.receive_some(10) == b""  # closed without a word
            await refused.aclose()
        # Idle past connections.max.idle.ms: the broker closes both.
        assert await first.receive_some(10) == b""
        assert await second.receive_some(10) == b""
        await first.aclose()
        await second.aclose()
        await trio.sleep(0.05)
        again = await WireClient.connect(broker.port)  # a slot is free again: served
        response = await again.call(18, 0, API_VERSIONS_REQUEST.cls())
        assert response.error_code == 0
        await again.aclose()
    refusals = [r for r in caplog.records if "max.connections.per.ip 2" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in refusals]
