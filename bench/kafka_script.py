"""What every Kafka shell-script stand-in (bench/kafka_acls.py, bench/kafka_topics.py) does
once it has translated its flags: run `quorumlog` with them, or exit 2 naming the flag it
could not translate, so a test needing more than the stand-in understands fails visibly."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from tools.cli import main as quorumlog


def run(prog: str, translate: Callable[[list[str]], list[str]]) -> None:
    """`prog`'s command line (sys.argv) through `translate`, then `quorumlog`."""
    try:
        argv = translate(sys.argv[1:])
    except argparse.ArgumentError as exc:
        print(f"{prog} (quorumlog): {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    quorumlog(args=argv, prog_name=prog)
