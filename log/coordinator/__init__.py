"""The coordinators: consumer groups (classic protocol) with their committed offsets, and
transactions (KIP-98, KIP-890).

group_state.py              GroupMetadata: one group's sans-IO state machine
group_coordinator.py        GroupCoordinator: the groups and offsets this broker coordinates
records.py                  __consumer_offsets keys and values (construct)
consumer_protocol.py        the topics of a consumer's subscription metadata (offset expiry)
group_driver.py             GroupCoordinatorDriver: trio driver, __consumer_offsets appends/replay
append_errors.py            a coordinator's answer when appending to its internal topic failed
transaction_log.py          __transaction_state keys and values, Kafka's placement of ids
transaction_state.py        TransactionMetadata: one transactional id's sans-IO state machine
transaction_coordinator.py  TransactionCoordinator: the sans-IO coordinator (not wired to the
                            broker yet: issue 16's driver, markers and LSO come next)
"""
