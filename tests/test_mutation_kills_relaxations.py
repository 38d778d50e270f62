"""Cases that kill mutants of the superblock relaxations (``blocks/superblock.py``; docs/mutation.md).

Archer's three-superblock bound (§3.2) and Tarnawski's host superblocks: each case is held to brute
force or to a number computed by hand in its comment.
"""
from __future__ import annotations
