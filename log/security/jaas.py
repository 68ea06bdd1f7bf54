"""`sasl.jaas.config`, the PlainLoginModule form Kafka brokers use:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="broker" password="broker-secret"
        user_broker="broker-secret" user_alice="alice-secret";

`username`/`password` are this broker's own credentials (the replica fetcher's, towards the
inter-broker listener); each `user_NAME="password"` is a user the SASL listeners accept for
PLAIN (and, while SCRAM credentials are not yet in the metadata log, for SCRAM too: see
credentials.py). Values are double-quoted; `\\"` and `\\\\` escape inside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from log.common.node_config import ConfigError

_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-@]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_MODULE = re.compile(r"\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)")


@dataclass(frozen=True)
class JaasConfig:
    username: str = ""
    password: str = ""
    users: dict[str, str] = field(default_factory=dict)


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_jaas_config(value: str) -> JaasConfig:
    """Parse one login module's options; ConfigError on anything else."""
    text = value.strip()
    if not text:
        return JaasConfig()
    module = _MODULE.match(text)
    if module is None:
        raise ConfigError(
            "sasl.jaas.config: expected 'LoginModuleClass required key=\"value\" ...;'"
        )
    position = module.end()
    options: dict[str, str] = {}
    while True:
        option = _OPTION.match(text, position)
        if option is None:
            break
        options[option.group(1)] = _unescape(option.group(2))
        position = option.end()
    rest = text[position:].strip()
    if rest not in (";", ""):
        raise ConfigError(f"sasl.jaas.config: cannot read {rest[:40]!r}")
    users = {name[5:]: secret for name, secret in options.items() if name.startswith("user_")}
    if any(not name for name in users):
        raise ConfigError('sasl.jaas.config: user_ needs a name (user_alice="...")')
    return JaasConfig(options.get("username", ""), options.get("password", ""), users)
