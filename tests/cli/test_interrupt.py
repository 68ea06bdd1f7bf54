"""Ctrl-C at any moment of a command's life ends it with exit code 130 and one line, never
click's "Aborted!" with exit code 1, a traceback or a SystemError (tools/interrupt.py): while
the interpreter imports the command (the first ~0.1-0.3 s), while click parses, and while the
command's body runs. And a command started with SIGINT ignored (a background job) keeps
ignoring it."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys

import pytest
from cli_helpers import start_with_default_sigint
from cluster_harness import REPO

pytestmark = pytest.mark.timeout(120)

# Seconds from start to SIGINT: during the imports, the parse, and the body (`topics list`
# waiting for a broker that never answers).
# The code that runs before tools/interrupt.py handles SIGINT.
BEFORE_THE_HANDLER = ("tools/__main__.py", "tools/entry.py", "tools/interrupt.py")
DELAYS_S = [0.02, 0.05, 0.08, 0.12, 0.2, 0.35, 0.6, 1.5]


@pytest.fixture(scope="module")
def silent_broker():
    """A port that takes connections (the kernel's backlog) and never answers a request."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


def _command(bootstrap: str) -> list[str]:
    return [sys.executable, "-m", "tools", "topics", "list", "--bootstrap", bootstrap]


@pytest.mark.parametrize("delay_s", DELAYS_S)
def test_ctrl_c_exits_130_with_one_line(delay_s, silent_broker):
    process = start_with_default_sigint(_command(silent_broker), cwd=REPO, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _, err = process.communicate(timeout=delay_s)
        pytest.fail(f"the command ended before SIGINT: {process.returncode}, {err}")
    except subprocess.TimeoutExpired:
        pass
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    if process.returncode != 130:
        # What Python does with a SIGINT before the entry point has run -- a KeyboardInterrupt
        # killing the process by SIGINT (a shell shows 130), or, inside the site module's
        # import, "Fatal Python error: init_import_site" and exit code 1 -- is all there may
        # be: interpreter start-up (0.05 s idle, 0.2 s on a loaded box) and the few lines that
        # install the handler. Never a frame of click's or of the command's.
        assert process.returncode in (1, -signal.SIGINT), (process.returncode, err)
        frames = re.findall(r'File "([^"]+)"', err)
        assert all(_before_the_handler(f) for f in frames), err
        return
    assert process.returncode == 130, (process.returncode, err)
    assert err.strip() == "interrupted", err


def _before_the_handler(path: str) -> bool:
    """A frame of the interpreter's start-up (the standard library, site's .pth files: the
    editable install's finder) or of the lines before the handler."""
    return (path.startswith(("<frozen", "<string>", sys.base_prefix))
            or "__editable__" in path or path.endswith(BEFORE_THE_HANDLER))  # fmt: skip


def test_ignored_sigint_stays_ignored(silent_broker):
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child inherits SIG_IGN
    try:
        process = subprocess.Popen(
            _command(silent_broker), cwd=REPO, stderr=subprocess.PIPE, text=True
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        for delay_s in (0.05, 0.3, 0.8):
            with pytest.raises(subprocess.TimeoutExpired):
                process.communicate(timeout=delay_s)
            process.send_signal(signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):
            process.communicate(timeout=0.5)  # still running
    finally:
        process.kill()
        process.communicate()
