"""Node log lines: one line per state change, key=value, every line tagged `node=<id>`.

`configure_logging(node_id, level)` (called by `quorumlog node`) installs one stderr handler
on the root logger whose format is

    2026-11-21T21:44:06.123Z level=INFO node=2 logger=log.replication.replica_manager
    partition state change node=2 topic=t partition=0 role=leader leader=2 leader_epoch=3 ...

so `grep node=2`, `grep role=leader` or `grep leader_epoch=` over the nodes' logs line the
state changes up. The state-change messages themselves carry their facts as key=value
(partition role transitions in replica_manager.py, ISR changes in isr_manager.py, fencing and
Raft leadership in quorum/service.py, recovery in the storage manager, with timings).
A node is one process, so the node id is a constant of the handler's formatter.
"""

from __future__ import annotations

import logging
import sys
import time

LOG_FORMAT = "%(asctime)s level=%(levelname)s node={node_id} logger=%(name)s %(message)s"


class _UtcFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{stamp}.{int(record.msecs):03d}Z"


def configure_logging(node_id: int, level: str = "INFO", stream=sys.stderr) -> logging.Handler:  # noqa: ANN001
    """Log to `stream` with the node id on every line; returns the installed handler."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_UtcFormatter(LOG_FORMAT.format(node_id=int(node_id))))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
