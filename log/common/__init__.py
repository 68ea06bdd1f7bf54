"""The vocabulary every floor of quorumlog shares, below all of them: Kafka's error codes and
exceptions (errors.py) and the node's configuration (node_config.py: node.toml, listeners,
voters). Imports nothing of ours, so records, storage, replication, the quorum and the server
may all import it."""
