"""AppendOrigin: who asks the leader to append, which decides how much it validates.

Kafka's AppendOrigin. A CLIENT batch (Produce) gets the full checks: sequence numbers,
duplicates, producer epoch, and no control batches (only the transaction coordinator writes
markers). A COORDINATOR batch (a transaction marker from WriteTxnMarkers, the group
coordinator's offset commits) has no sequence numbers: only producer and coordinator epochs are
checked. Followers (replication) and recovery validate nothing: the leader already decided.
"""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
