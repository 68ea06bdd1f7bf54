"""configure_logging: every line carries node=<id> and the level as key=value."""

from __future__ import annotations

import io
import logging

from log.server.logging_setup import configure_logging


def test_lines_carry_the_node_id():
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging(7, "info", stream)
    try:
        logging.getLogger("log.replication.replica_manager").info(
            "partition state change role=%s", "leader"
        )
        logging.getLogger("x").debug("not shown at INFO")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    (line,) = stream.getvalue().splitlines()
    assert " level=INFO node=7 logger=log.replication.replica_manager " in line
    assert line.endswith("partition state change role=leader")
    assert line[:23].count("-") == 2 and line[23] == "Z"  # 2026-11-21T21:44:06.123Z
