"""`quorumlog nemesis`: a Jepsen-style fault-injection run against a local cluster.

runner.py drives it (cluster, faults, rounds), workload.py holds the clients and the read-back,
network.py the iptables partitions, checker.py the sans-IO verdict.
"""
