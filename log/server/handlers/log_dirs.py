"""DescribeLogDirs (35): this broker's one log dir and every replica log in it;
AlterReplicaLogDirs (34): a move of replicas to another of its log dirs, of which it has none.

Answers from the LogManager's logs (hosted replicas, leader or follower, and logs not yet
deleted), as Kafka's `ReplicaManager.describeLogDirs` does: `partition_size` is the bytes of
all segments, `offset_lag` for a current log: on a follower, how far its log end offset is
behind the leader's high watermark from the last fetch answer (Kafka's replica fetcher lag, the
number operators watch: a follower out of the ISR catching up shows it), -1 before the first
answer (unknown, shown as '?' by `quorumlog status`); otherwise Kafka's own
`max(high_watermark - log_end_offset, 0)` (0 here, as a log's HW never exceeds its LEO),
`is_future_key` always false (AlterReplicaLogDirs never makes a future log). `topics` null
describes every log; requested partitions this broker has no log for are left out, as Kafka
does. v4+ carries the volume's total and usable bytes (`shutil.disk_usage`, -1 when the call
fails).

AlterReplicaLogDirs answers each partition as Kafka's `ReplicaManager.alterReplicaLogDirs` does
for a broker whose replicas are all in the one directory (`log.dir`): a topic whose future-log
directory name (`<topic>-<partition>.<32 hex digits>-future`) would pass 255 characters is
INVALID_TOPIC_EXCEPTION; a path other than the log dir's (absolute, or as DescribeLogDirs
names it) LOG_DIR_NOT_FOUND; the log dir offline KAFKA_STORAGE_ERROR; a partition this broker
does not host REPLICA_NOT_AVAILABLE (Kafka keeps that code here for compatibility); else NONE:
the replica is in that directory already, so the move is done (no future log, nothing copied).
A partition named more than once takes its last path, as Kafka's map of the request does.
Needs ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED for every partition).
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from typing import Any

from log.common.acl import AclOperation
from log.common.errors import ErrorCode
from log.protocol.connection import Request
from log.protocol.log_dirs import ALTER_REPLICA_LOG_DIRS_RESPONSE, DESCRIBE_LOG_DIRS_RESPONSE
from log.server.authorization import allowed_cluster, require_cluster
from log.server.broker_context import BrokerContext
from log.storage.log import UnifiedLog

R: Any = DESCRIBE_LOG_DIRS_RESPONSE.cls  # made at run time by schema.py: untyped
A: Any = ALTER_REPLICA_LOG_DIRS_RESPONSE.cls
UNKNOWN_BYTES = -1
DIR_NAME_MAX = 255  # a file name's limit, which Kafka checks a future log's directory against
FUTURE_DIR_EXTRA = len(".") + 32 + len("-future")  # after "<topic>-<partition>": a UUID's hex


UNKNOWN_LAG = -1  # a follower whose fetcher has had no answer from its leader yet


def offset_lag(ctx: BrokerContext, topic_partition: tuple[str, int], log: UnifiedLog) -> int:
    """The offset lag of a current (not future) log: a follower's fetcher lag (UNKNOWN_LAG
    before its first fetch answer: a replica that is not fetching is not "0 behind"), else
    Kafka's."""
    state = ctx.replica_manager.fetcher_manager.follower_state(topic_partition)
    if state is not None:
        lag = state.lag(log.log_end_offset)
        return UNKNOWN_LAG if lag is None else lag
    return max(log.high_watermark - log.log_end_offset, 0)


async def handle_describe_log_dirs(ctx: BrokerContext, request: Request) -> object:
    require_cluster(ctx, request, AclOperation.DESCRIBE)  # authorization
    wanted: dict[str, set[int]] | None = None
    if request.body.topics is not None:
        wanted = defaultdict(set)
        for topic in request.body.topics:
            wanted[topic.topic].update(topic.partitions)
    by_topic: dict[str, list[object]] = defaultdict(list)
    for (topic, partition), log in sorted(ctx.log_manager.logs.items()):
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        by_topic[topic].append(
            R.DescribeLogDirsResult.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=partition,
                partition_size=log.size_bytes,
                offset_lag=offset_lag(ctx, (topic, partition), log),
                is_future_key=False,
            )
        )
    log_dir = ctx.log_manager.log_dir.resolve()
    try:
        usage = shutil.disk_usage(log_dir)
        total_bytes, usable_bytes = usage.total, usage.free
    except OSError:
        total_bytes = usable_bytes = UNKNOWN_BYTES
    topics = [
        R.DescribeLogDirsResult.DescribeLogDirsTopic(name=name, partitions=partitions)
        for name, partitions in by_topic.items()
    ]
    result = R.DescribeLogDirsResult(
        error_code=ErrorCode.NONE,
        log_dir=str(log_dir),
        topics=topics,
        total_bytes=total_bytes,
        usable_bytes=usable_bytes,
    )
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])


async def handle_alter_replica_log_dirs(ctx: BrokerContext, request: Request) -> object:
    moves: dict[tuple[str, int], str] = {}  # the last path named for each partition wins
    for target in request.body.dirs:
        for topic in target.topics:
            for partition in topic.partitions:
                moves[(topic.name, partition)] = target.path
    if allowed_cluster(ctx, request, AclOperation.ALTER):
        errors = {key: _alter_error(ctx, path, *key) for key, path in moves.items()}
    else:
        errors = dict.fromkeys(moves, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    by_topic: dict[str, list[object]] = defaultdict(list)
    for (topic, partition), error in errors.items():
        by_topic[topic].append(
            A.AlterReplicaLogDirTopicResult.AlterReplicaLogDirPartitionResult(
                partition_index=partition, error_code=error
            )
        )
    results = [
        A.AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
        for name, partitions in by_topic.items()
    ]
    return A(throttle_time_ms=0, results=results)


def _alter_error(ctx: BrokerContext, path: str, topic: str, partition: int) -> int:
    if len(f"{topic}-{partition}") + FUTURE_DIR_EXTRA > DIR_NAME_MAX:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    log_dir = ctx.log_manager.log_dir
    if path not in (os.path.abspath(log_dir), str(log_dir.resolve())):
        return ErrorCode.LOG_DIR_NOT_FOUND
    if ctx.log_manager.is_offline:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if ctx.replica_manager.get(topic, partition) is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    return ErrorCode.NONE
