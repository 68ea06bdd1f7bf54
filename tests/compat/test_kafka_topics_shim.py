"""bench/kafka_topics.py, the `kafka-topics.sh` that `make compat` gives librdkafka's tests 0052
and 0077: Kafka's `--create` flags become `quorumlog topics create`, and the script
bench/compat.py writes creates a real topic with its configs on an in-process broker
(CreateTopics over the wire); anything but `--create` exits 2. One run of the script: each
costs a Python start."""

from __future__ import annotations

import subprocess

import pytest
import trio

from bench.compat import _kafka_tools_shim
from bench.kafka_topics import translate
from tests.broker.conftest import start_broker

pytestmark = pytest.mark.timeout(120)


def test_kafka_flags_become_quorumlog_topics_arguments(capsys):
    flags = ("--bootstrap-server h:1 --create --topic t --replication-factor 1 --partitions 2 "
             "--config cleanup.policy=compact --config segment.ms=10000").split()  # fmt: skip
    assert translate(flags) == [
        "topics", "create", "-b", "h:1", "--topic=t", "--partitions=2",
        "--replication-factor=1", "--config=cleanup.policy=compact", "--config=segment.ms=10000",
    ]  # fmt: skip
    for other in ("--delete", "--list", "--alter --partitions 3"):  # only --create is known
        with pytest.raises(SystemExit) as refused:
            translate(["--bootstrap-server", "h:1", *other.split(), "--topic", "t"])
        assert refused.value.code == 2 and "kafka-topics.sh" in capsys.readouterr().err


async def test_the_script_creates_a_topic_with_configs(nursery, tmp_path):
    broker = await start_broker(nursery, tmp_path / "node")
    script = _kafka_tools_shim(tmp_path / "kafka-path") / "bin" / "kafka-topics.sh"

    def run(*args: str) -> subprocess.CompletedProcess:
        command = [str(script), "--bootstrap-server", broker.bootstrap, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    # 0052's call, quotes and all, as test.c's system() runs it through a shell
    created = await trio.to_thread.run_sync(
        run, "--create", "--topic", "rdkafkatest_0052", "--replication-factor", "1",
        "--partitions", "1", "--config", "message.timestamp.type=LogAppendTime",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    topic = broker.quorum.image.topic("rdkafkatest_0052")
    assert topic is not None and len(topic.partitions) == 1
    configs = dict(broker.quorum.image.topic_configs("rdkafkatest_0052"))
    assert configs == {"message.timestamp.type": "LogAppendTime"}
