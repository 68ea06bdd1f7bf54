"""`python -m tools.nemesis ...` = `quorumlog nemesis ...`."""

from tools.nemesis_cmd import nemesis

nemesis()
