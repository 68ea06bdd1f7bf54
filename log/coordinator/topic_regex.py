"""KIP-848 regex subscriptions: a member's SubscribedTopicRegex, matched on the coordinator. Sans-IO.

Kafka compiles the pattern with RE2/J (com.google.re2j) and a topic belongs to the subscription
when the pattern matches its whole name (`Matcher.matches()`), so `orders-.*` names every topic
starting with `orders-` and librdkafka's `(^orders-.*)` (it wraps each `^...` topic of a
subscribe() in a group and joins them with `|`) does too. We compile with google-re2, the
binding of the C++ library RE2/J ports: the same syntax (no backreferences, no lookaround), the
same linear-time matching. A pattern RE2 refuses is Kafka's INVALID_REGULAR_EXPRESSION (128),
with its message.
"""

from __future__ import annotations

from collections.abc import Iterable

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would log every refused pattern to stderr


class InvalidRegularExpression(Exception):
    """A SubscribedTopicRegex RE2 does not compile; the message is Kafka's."""


def compile_topic_regex(pattern: str) -> re2._Regexp:
    """The compiled pattern, or InvalidRegularExpression with Kafka's message."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args else str(exc)
        raise InvalidRegularExpression(
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {detail}."
        ) from exc


def resolve(patterns: Iterable[str], topic_names: Iterable[str]) -> dict[str, frozenset[str]]:
    """Each pattern -> the topic names it matches as a whole. A pattern that no longer compiles
    (it was checked when a member brought it) matches nothing, as Kafka ignores it."""
    compiled = {}
    for pattern in patterns:
        try:
            compiled[pattern] = compile_topic_regex(pattern)
        except InvalidRegularExpression:
            compiled[pattern] = None
    matched: dict[str, set[str]] = {pattern: set() for pattern in compiled}
    for name in topic_names:
        for pattern, regex in compiled.items():
            if regex is not None and regex.fullmatch(name) is not None:
                matched[pattern].add(name)
    return {pattern: frozenset(names) for pattern, names in matched.items()}
