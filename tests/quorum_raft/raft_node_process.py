"""One controller process for the quorum_raft cluster tests, driven by JSON lines on stdin.

argv[1]: JSON of RaftConfig fields. Replies are JSON lines on stdout. Ops: status, propose
(sequential, leader only), propose_forever (until the process dies: one "acked" line per
committed batch), records, checkpoint, quit.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import trio  # noqa: E402
from quorum_raft_toy import ToyStateMachine  # noqa: E402

from quorum.raft import RaftConfig, RaftNode  # noqa: E402


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def handle(node: RaftNode, cmd: dict) -> dict:
    op = cmd["op"]
    if op == "status":
        sm = node.state_machine
        return {
            "is_leader": node.is_leader,
            "leader_id": node.leader_id,
            "term": node.raft_term,
            "committed_offset": node.committed_offset,
            "records": len(sm.records),
            "applies_since_load": sm.applies_since_load,
            "checkpoint_offset": (node.latest_checkpoint() or (None,))[0],
        }
    if op == "propose":
        offsets, latencies_ms = [], []
        for payload in cmd["payloads"]:
            start = time.perf_counter()
            with trio.fail_after(cmd.get("timeout_s", 5)):
                result = await node.propose(payload.encode())
            latencies_ms.append((time.perf_counter() - start) * 1e3)
            offsets.append(result.offset)
        return {"offsets": offsets, "latencies_ms": latencies_ms}
    if op == "propose_forever":  # `concurrency` proposers back to back, until the process dies

        async def proposer(name: str) -> None:
            i = 0
            while True:
                payload = f"{name}-{i}"
                with trio.fail_after(5):
                    result = await node.propose(payload.encode())
                out({"ev": "acked", "offset": result.offset, "payload": payload})
                i += 1

        async with trio.open_nursery() as nursery:
            for n in range(cmd.get("concurrency", 1)):
                nursery.start_soon(proposer, f"p{n}")
    if op == "records":
        return {"records": [[o, p.decode()] for o, p in node.state_machine.records]}
    if op == "checkpoint":
        node.force_checkpoint()
        return {}
    raise ValueError(op)


async def main() -> None:
    fields = json.loads(sys.argv[1])
    fields["partner_addresses"] = tuple(fields["partner_addresses"])
    config = RaftConfig(**fields)
    stdin = trio.lowlevel.FdStream(os.dup(0))
    async with RaftNode(config, state_machine_factory=ToyStateMachine) as node:
        out({"ev": "ready", "pid": os.getpid()})
        buffer = b""
        while True:
            chunk = await stdin.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                cmd = json.loads(line)
                if cmd["op"] == "quit":
                    return
                try:
                    reply = await handle(node, cmd)
                    reply["ok"] = True
                except Exception as e:
                    reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                out({"ev": "reply", **reply})


if __name__ == "__main__":
    trio.run(main)
