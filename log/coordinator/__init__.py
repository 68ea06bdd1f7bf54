"""The group coordinator: consumer groups (classic protocol) and their committed offsets.

group_state.py        GroupMetadata: one group's sans-IO state machine
group_coordinator.py  GroupCoordinator: the groups and offsets this broker coordinates
records.py            __consumer_offsets keys and values (construct)
consumer_protocol.py  the topics of a consumer's subscription metadata (offset expiry)
group_driver.py       GroupCoordinatorDriver: trio driver, __consumer_offsets appends and replay
"""
