"""BrokerFailureView (sans-IO): when a Metadata answer waits for a new leader, and how long a
fenced broker stays listed. The real-process side: tests/node/test_fast_fencing.py."""

from __future__ import annotations

import itertools
import uuid

from log.server.broker_failure_view import BrokerFailureView
from quorum.image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from quorum.records import BrokerEndpoint

TOPIC_ID = uuid.uuid4()
OFFSETS = itertools.count()  # each image made is newer than the one before


def image(fenced=(), leader=1, registered=(1, 2, 3)) -> MetadataImage:
    brokers = {
        b: BrokerRegistration(
            b,
            10 + b,
            uuid.uuid4(),
            (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9091 + b),),
            None,
            b in fenced,
            0,
        )  # fmt: skip
        for b in registered
    }
    partition = PartitionRegistration((1, 2, 3), (1, 2, 3), leader, 0, 0)
    topic = TopicImage("t", TOPIC_ID, {0: partition})
    return MetadataImage(brokers=brokers, topics={TOPIC_ID: topic},
                         topic_ids_by_name={"t": TOPIC_ID},
                         last_offset=next(OFFSETS))  # fmt: skip


def test_an_answer_waits_while_a_leader_is_unreachable_and_not_longer_than_the_hold():
    view = BrokerFailureView(linger_ms=9000, hold_ms=2100)
    before = image()
    lost = {1: (900, 11)}  # broker 1 unreachable since 900 ms, at its broker epoch 11
    assert view.hold_until_ms(before, ["t"], {}, 1000) is None  # nothing lost
    assert view.hold_until_ms(before, ["t"], {2: (900, 12)}, 1000) is None  # not a leader
    assert view.hold_until_ms(before, ["t"], lost, 1000) == 3000
    assert view.hold_until_ms(before, None, lost, 1000) == 3000  # all topics
    assert view.hold_until_ms(before, ["other"], lost, 1000) is None
    # only the partitions named, when named (Produce, a consumer's Fetch)
    assert view.hold_until_ms(before, None, lost, 1000, partitions=[("t", 0)]) == 3000
    assert view.hold_until_ms(before, None, lost, 1000, partitions=[("t", 1)]) is None
    assert view.hold_until_ms(before, None, lost, 1000, partitions=[]) is None
    assert view.hold_until_ms(before, ["t"], lost, 3000) is None  # held long enough
    # the new leader, or the dead one fenced with no leader left: answer
    assert view.hold_until_ms(image(fenced=(1,), leader=2), ["t"], lost, 1000) is None
    assert view.hold_until_ms(image(fenced=(1,), leader=-1), ["t"], lost, 1000) is None
    # registered again since (a restart no controller fenced): answer
    assert view.hold_until_ms(before, ["t"], {1: (900, 10)}, 1000) is None
    assert BrokerFailureView(9000, 0).hold_until_ms(before, ["t"], lost, 1000) is None


def listed(view, image, now_ms, connection=None, listener="PLAINTEXT") -> list[int]:
    return [b[0] for b in view.listed_brokers(image, listener, now_ms, connection)]


def test_a_fenced_broker_is_listed_once_per_connection_within_the_linger():
    view = BrokerFailureView(linger_ms=9000, hold_ms=2100)
    one, two, late = {}, {}, {}
    assert listed(view, image(), 0, one) == [1, 2, 3]
    fenced = image(fenced=(1,), leader=2)
    assert view.listed_brokers(fenced, "PLAINTEXT", 100, one) == [
        (1, "127.0.0.1", 9092, None), (2, "127.0.0.1", 9093, None), (3, "127.0.0.1", 9094, None)
    ]  # fmt: skip
    assert listed(view, fenced, 150, one) == [2, 3]  # shown once on this connection
    assert listed(view, fenced, 9099, two) == [1, 2, 3]  # another connection's first look
    assert listed(view, fenced, 9099, two) == [2, 3]
    assert listed(view, fenced, 9100, late) == [2, 3]  # the linger is over
    assert listed(view, fenced, 50, {}, listener="SSL") == []  # no such endpoint


def test_a_broker_back_or_unregistered_is_listed_as_it_is_now():
    view = BrokerFailureView(linger_ms=9000, hold_ms=2100)
    connection: dict = {}
    view.observe(image(), 0)
    assert listed(view, image(fenced=(1,)), 100, connection) == [1, 2, 3]
    assert listed(view, image(), 200, connection) == [1, 2, 3]  # back
    # fenced again later: this connection is shown it once more, and the linger starts again
    view.observe(image(fenced=(1,)), 5000)
    assert listed(view, image(fenced=(1,)), 13999, connection) == [1, 2, 3]
    assert listed(view, image(fenced=(1,)), 13999, connection) == [2, 3]
    assert listed(view, image(fenced=(1,)), 13999, {}) == [1, 2, 3]
    assert listed(view, image(registered=(2, 3)), 10000, {}) == [2, 3]  # unregistered
    # a broker first seen fenced (this node started after the fence) is not listed
    assert listed(BrokerFailureView(9000, 2100), image(fenced=(1,)), 0, {}) == [2, 3]


def test_with_every_broker_fenced_every_registered_one_is_listed():
    view = BrokerFailureView(linger_ms=9000, hold_ms=2100)
    connection: dict = {}
    view.observe(image(), 0)
    everyone_fenced = image(fenced=(1, 2, 3), leader=-1)
    assert listed(view, everyone_fenced, 100, connection) == [1, 2, 3]
    assert listed(view, everyone_fenced, 200, connection) == [1, 2, 3]  # shown, still listed
    assert listed(view, everyone_fenced, 99_999, {}) == [1, 2, 3]  # the linger is over
    assert listed(view, MetadataImage(), 0, {}) == []  # nobody registered at all


def test_an_older_image_seen_late_changes_nothing():
    """The node's watcher may show the view an image the handlers answered past already."""
    view = BrokerFailureView(linger_ms=9000, hold_ms=2100)
    connection: dict = {}
    older, newer = image(), image(fenced=(1,), leader=2)
    view.observe(older, 0)
    assert listed(view, newer, 100, connection) == [1, 2, 3]
    view.observe(older, 150)  # late: broker 1 is not taken for live again
    assert listed(view, newer, 200, connection) == [2, 3]
