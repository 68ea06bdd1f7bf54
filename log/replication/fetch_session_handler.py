"""FetchSessionHandler: the fetcher's side of an incremental fetch session (KIP-227), sans-IO.

The fetcher decides each round which partitions it fetches and at what offsets (a dict of
`PartitionFetch`); this turns that into what goes on the wire. Without a session (first fetch,
after an error, after the leader declined one) the request is full: every partition, session id
0 (or the old id, which the leader then closes) and epoch 0, asking for a session. Within a
session it is incremental: only partitions whose `PartitionFetch` differs from what the leader
holds, `forgotten` for those no longer fetched, and the next epoch. The leader's session then
holds exactly the last `PartitionFetch` sent for each partition, so a response's partition is
always an answer to the fetch in this round's dict.

    request = handler.build(fetches)   # FetchSessionRequest: session_id, epoch, to_send, ...
    ok = handler.on_response(error_code, session_id)  # False: drop the answer, fetch again
    handler.reset()                    # connection lost: the next request is full
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from log.common.errors import ErrorCode
from log.replication.fetch_session import INITIAL_EPOCH, MAX_SESSION_ID, NO_SESSION_ID

SESSION_ERRORS = frozenset(
    {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}
)


@dataclass(frozen=True)
class FetchSessionRequest:
    session_id: int
    session_epoch: int
    to_send: dict  # partition -> PartitionFetch, in the fetcher's (fairness) order
    forgotten: list[Hashable]

    @property
    def full(self) -> bool:
        return self.session_epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = NO_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        self._sent: dict = {}  # what the leader's session holds, once answered
        self._pending: dict | None = None  # what it will hold if the request in flight succeeds

    def build(self, fetches: dict) -> FetchSessionRequest:
        self._pending = dict(fetches)
        if self.next_epoch == INITIAL_EPOCH:
            return FetchSessionRequest(self.session_id, INITIAL_EPOCH, dict(fetches), [])
        sent = self._sent
        to_send = {}
        for tp, fetch in fetches.items():
            previous = sent.get(tp)
            if previous is not fetch and previous != fetch:  # identity first: idle partitions
                to_send[tp] = fetch
        forgotten = [tp for tp in sent if tp not in fetches]
        return FetchSessionRequest(self.session_id, self.next_epoch, to_send, forgotten)

    def on_response(self, error_code: int, session_id: int) -> bool:
        """Adopt the answer's session state; False when the answer carries no partitions to
        apply (a session error: the next request starts a new session)."""
        pending, self._pending = self._pending, None
        if error_code != ErrorCode.NONE or pending is None:
            self.reset()
            return error_code == ErrorCode.NONE
        if self.next_epoch == INITIAL_EPOCH:
            self.session_id = session_id
            self.next_epoch = INITIAL_EPOCH if session_id == NO_SESSION_ID else 1
        else:
            self.next_epoch = self.next_epoch + 1 if self.next_epoch < MAX_SESSION_ID else 1
        self._sent = pending
        return True

    def reset(self) -> None:
        """Start over with a full request (keeping the id, so the leader closes that session)."""
        self.next_epoch = INITIAL_EPOCH
        self._sent = {}
        self._pending = None
