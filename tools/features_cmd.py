"""`quorumlog features describe|upgrade|downgrade`: the cluster's feature levels, like Kafka's
kafka-features.sh.

describe: ApiVersions v4 from any broker: each feature this software supports (its level
range) and the level the cluster finalized (quorum/features.py). upgrade / downgrade:
UpdateFeatures with `--feature NAME=LEVEL` (repeatable); a downgrade is a safe one unless
`--unsafe`; `--dry-run` asks the controller to validate only.
"""

from __future__ import annotations

from typing import Any

import click

from log.protocol.api_versions import API_VERSIONS_REQUEST
from log.protocol.features import UPDATE_FEATURES_REQUEST
from quorum.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE
from tools.admin_client import AdminClient, raise_for
from tools.cli_support import (
    bootstrap_option,
    command_config_option,
    echo_json,
    json_option,
    parse_key_values,
    run_client,
)

API_VERSIONS_KEY = 18
UPDATE_FEATURES_KEY = 57


async def describe_features(admin: AdminClient) -> list[dict[str, Any]]:
    body = await admin.request(API_VERSIONS_KEY, API_VERSIONS_REQUEST.cls())
    raise_for(body.error_code, "ApiVersions")
    finalized = {f.name: f.max_version_level for f in body.finalized_features}
    return [
        {
            "feature": f.name,
            "supported_min_version": f.min_version,
            "supported_max_version": f.max_version,
            "finalized_version_level": finalized.get(f.name, 0),
            "epoch": body.finalized_features_epoch,
        }
        for f in sorted(body.supported_features, key=lambda f: f.name)
    ]


async def update_features(
    admin: AdminClient, levels: dict[str, int], upgrade_type: int, dry_run: bool
) -> None:
    request: Any = UPDATE_FEATURES_REQUEST.cls
    body = request(
        feature_updates=[
            request.FeatureUpdateKey(
                feature=name, max_version_level=level, upgrade_type=upgrade_type
            )
            for name, level in sorted(levels.items())
        ],  # fmt: skip
        validate_only=dry_run,
    )
    answer = await admin.request(UPDATE_FEATURES_KEY, body)
    if answer.error_code:
        raise click.ClickException(answer.error_message or f"UpdateFeatures: {answer.error_code}")


def _levels(features: tuple[str, ...]) -> dict[str, int]:
    pairs = parse_key_values(features, "--feature")
    try:
        return {name: int(level) for name, level in pairs.items()}
    except ValueError:
        raise click.UsageError("--feature: LEVEL must be an integer") from None


@click.group("features")
def features() -> None:
    """Cluster feature levels (transaction.version, group.version), like kafka-features.sh.

    \b
    Examples:
      quorumlog features describe
      quorumlog features downgrade --feature transaction.version=1
      quorumlog features upgrade --feature transaction.version=2 --dry-run
    """


@features.command("describe")
@bootstrap_option
@command_config_option
@json_option
def describe_command(bootstrap, security, as_json):
    """Each feature: the levels this software supports and the cluster's finalized level.

    \b
    Examples:
      quorumlog features describe
      quorumlog features describe --json
    """

    async def main() -> list[dict[str, Any]]:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            return await describe_features(admin)

    rows = run_client(main)
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        click.echo(
            f"Feature: {r['feature']}\tSupportedMinVersion: {r['supported_min_version']}\t"
            f"SupportedMaxVersion: {r['supported_max_version']}\t"
            f"FinalizedVersionLevel: {r['finalized_version_level']}\tEpoch: {r['epoch']}"
        )


def _run_update(bootstrap: str, security: Any, feature_levels: tuple[str, ...],
                upgrade_type: int, dry_run: bool) -> None:  # fmt: skip
    levels = _levels(feature_levels)

    async def main() -> None:
        async with AdminClient(bootstrap, connector=security.connector) as admin:
            await update_features(admin, levels, upgrade_type, dry_run)

    run_client(main)
    done = "validated" if dry_run else "finalized"
    for feature, level in sorted(levels.items()):
        click.echo(f"{feature} was {done} at level {level}.")


feature_option = click.option(
    "--feature", "feature_levels", multiple=True, required=True, help="NAME=LEVEL (repeatable)"
)
dry_run_option = click.option("--dry-run", is_flag=True, help="validate only, change nothing")


@features.command("upgrade")
@bootstrap_option
@command_config_option
@feature_option
@dry_run_option
def upgrade_command(bootstrap, security, feature_levels, dry_run):
    """Raise feature levels (new transactions follow the new level).

    \b
    Examples:
      quorumlog features upgrade --feature transaction.version=2
      quorumlog features upgrade --feature transaction.version=2 --dry-run
    """
    _run_update(bootstrap, security, feature_levels, UPGRADE, dry_run)


@features.command("downgrade")
@bootstrap_option
@command_config_option
@feature_option
@dry_run_option
@click.option("--unsafe", is_flag=True, help="allow a lossy (unsafe) downgrade")
def downgrade_command(bootstrap, security, feature_levels, dry_run, unsafe):
    """Lower feature levels (a safe downgrade unless --unsafe).

    \b
    Examples:
      quorumlog features downgrade --feature transaction.version=1
      quorumlog features downgrade --feature transaction.version=0 --dry-run
    """
    kind = UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE
    _run_update(bootstrap, security, feature_levels, kind, dry_run)
