"""`quorumlog nemesis`: faults against a local 5-node cluster while idempotent producers write;
then every acknowledged record is checked (tools/nemesis/). Exit code 1 on any safety
violation, 3 when safe but some write was never answered (a stalled client), 0 otherwise.

    quorumlog nemesis [--rounds 10] [--seed 0] [--faults kill9,pause,...] [--data-dir DIR]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
import trio
from rich.console import Console
from rich.table import Table

from tools.nemesis.runner import (
    ALL_FAULTS,
    FAULTS,
    NETNS_FAULTS,
    NETWORKS,
    NemesisConfig,
    NemesisResult,
    run,
)


def _report(result: NemesisResult, config: NemesisConfig, console: Console) -> None:
    rounds = Table(title=f"{len(result.rounds)} rounds, seed {config.seed}")
    for column in ("round", "fault", "what", "healthy again after"):
        rounds.add_column(column)
    for r in result.rounds:
        healed = "not within the limit" if r.healed_s is None else f"{r.healed_s:.1f} s"
        rounds.add_row(str(r.number), r.fault, r.description, healed)
    console.print(rounds)
    verdict = result.verdict
    table = Table(title="verdict")
    table.add_column("check")
    table.add_column("result", justify="right")
    table.add_row("acknowledged", f"{verdict.acked:,}")
    table.add_row("failed (indeterminate)", f"{verdict.failed:,}")
    table.add_row("failed but present", f"{verdict.failed_but_present:,}")
    table.add_row("read back", f"{verdict.read:,}")
    for kind, examples in verdict.violations.items():
        table.add_row(kind.replace("_", " "), f"{len(examples):,}")
    table.add_row("producers' own errors", f"{len(result.producer_errors)}")
    table.add_row("never answered", f"{result.unanswered:,}")
    console.print(table)
    for kind, examples in verdict.violations.items():
        for example in examples[:5]:
            console.print(f"[red]{kind}[/red]: {example}")
    for error in result.producer_errors:
        console.print(f"[red]producer[/red]: {error}")
    for fault, why in result.skipped_faults.items():
        console.print(f"skipped {fault}: {why}")
    settings = ", ".join(f"{k}={v}" for k, v in result.settings)
    console.print(f"settings that differ from `quorumlog up`: {settings}")
    console.print(f"data and history.jsonl kept in {config.data_dir}")
    if not result.ok:
        console.print("[red]VIOLATIONS[/red]")
    elif not result.available:
        console.print("[yellow]SAFE, BUT NOT EVERY WRITE WAS ANSWERED[/yellow] (see the "
                      "producer lines above; the history has every delivery report)")  # fmt: skip
    else:
        console.print("[green]OK[/green]")


@click.command()
@click.option("--rounds", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--faults", default=None,
              help="comma-separated subset of: " + ", ".join(ALL_FAULTS) + " [all but "
              + ", ".join(NETNS_FAULTS) + " on loopback, all on netns]")  # fmt: skip
@click.option("--fault-seconds", default=4.0, show_default=True, type=float)
@click.option("--rate", default=400.0, show_default=True, type=float, help="records/s in all")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="kept afterwards (default: a new temporary directory)")  # fmt: skip
@click.option("--base-port", default=19092, show_default=True, type=int)
@click.option("--network", "network", default="loopback", show_default=True,
              type=click.Choice(NETWORKS),
              help="netns (root): every node on a host of its own, real partitions")  # fmt: skip
def nemesis(rounds, seed, faults, fault_seconds, rate, data_dir, base_port, network) -> None:  # noqa: ANN001
    """Inject faults into a local 5-node cluster and check no acknowledged write is lost.

    \b
    Examples:
      quorumlog nemesis --rounds 100 --seed 7            # the long run (root: partitions, full disks)
      quorumlog nemesis --faults kill9,pause --rounds 5   # a quick look
      quorumlog nemesis --network netns --faults partition,link-down,asymmetric-cut
    """
    if faults is None:
        faults = ",".join(ALL_FAULTS if network == "netns" else FAULTS)
    chosen = tuple(f.strip() for f in faults.split(",") if f.strip())
    unknown = [f for f in chosen if f not in ALL_FAULTS]
    if unknown or not chosen:
        raise click.UsageError(f"unknown fault {', '.join(unknown) or '(none)'}; "
                               f"choose from {', '.join(ALL_FAULTS)}")  # fmt: skip
    if data_dir is None:
        data_dir = Path(tempfile.mkdtemp(prefix="quorumlog-nemesis-"))
    elif data_dir.exists() and any(data_dir.iterdir()):
        raise click.UsageError(f"{data_dir} is not empty")
    config = NemesisConfig(data_dir=data_dir, rounds=rounds, seed=seed, faults=chosen,
                           fault_seconds=fault_seconds, rate_per_s=rate,
                           base_port=base_port, network=network)  # fmt: skip
    console = Console()
    try:
        result = trio.run(run, config, console.print)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    _report(result, config, console)
    raise SystemExit(1 if not result.ok else 3 if not result.available else 0)
