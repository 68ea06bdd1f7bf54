"""The `quorumlog` command line: one click group, one module per command family."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="quorumlog")
def main() -> None:
    """quorumlog: a Kafka-compatible, Raft-based log service."""


from tools.dump_log import dump_log  # noqa: E402

main.add_command(dump_log)
from tools.up import up  # noqa: E402

main.add_command(up)
from tools.node_cmd import node  # noqa: E402

main.add_command(node)
from tools.metadata_cmd import metadata  # noqa: E402

main.add_command(metadata)
from tools.perf_cmd import perf  # noqa: E402

main.add_command(perf)
from tools.perf_consume import consume as perf_consume  # noqa: E402

perf.add_command(perf_consume)
from tools.topics_cmd import topics  # noqa: E402

main.add_command(topics)
from tools.produce_cmd import produce  # noqa: E402

main.add_command(produce)
from tools.consume_cmd import consume_command  # noqa: E402

main.add_command(consume_command)
from tools.status_cmd import status  # noqa: E402

main.add_command(status)
from tools.demo import demo  # noqa: E402

main.add_command(demo)
from tools.groups_cmd import groups  # noqa: E402

main.add_command(groups)
from tools.transactions_cmd import transactions  # noqa: E402

main.add_command(transactions)
from tools.features_cmd import features  # noqa: E402

main.add_command(features)
from tools.nemesis_cmd import nemesis  # noqa: E402

main.add_command(nemesis)
from tools.users_cmd import users  # noqa: E402

main.add_command(users)
from tools.acls_cmd import acls  # noqa: E402

main.add_command(acls)
from tools.format_cmd import cluster_id, format_command  # noqa: E402

main.add_command(cluster_id)
main.add_command(format_command)
from tools.metadata_quorum_cmd import metadata_quorum  # noqa: E402

main.add_command(metadata_quorum)
