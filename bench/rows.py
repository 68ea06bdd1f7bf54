"""Benchmark rows as data: each script hands its results to `emit(section, rows)`.

When the environment names a file in QUORUMLOG_BENCH_JSON (what `python -m bench` does),
`emit` appends one JSON line `{"section": ..., "rows": [...]}` to it, so the runner builds
the report from data instead of parsing the human tables the scripts print. Alone, a script
prints its table as before and `emit` does nothing.
"""

from __future__ import annotations

import json
import os

ENV_VAR = "QUORUMLOG_BENCH_JSON"


def emit(section: str, rows: list[dict]) -> None:
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    with open(path, "a") as out:
        out.write(json.dumps({"section": section, "rows": rows}) + "\n")
