"""The certificate's levels, one module each (or one per family of bounds), registered by
:func:`~placement_dsl.levels.base.level`: which problems each bounds, where it runs in the hierarchy and
whose default hierarchy it joins. :mod:`placement_dsl.certify` is the driver that runs them; a new level
is a new module of this package (found by :func:`~placement_dsl.levels.base.load`), or any module that
registers one when imported.

:data:`MANIFEST` names the package's levels without importing them (they load Pyomo), so that the command
line's ``bounds --levels`` help lists them cheaply; a test holds it equal to the registry.
"""

MANIFEST: dict[str, str] = {
    "simple": "Lemma 3.3: max(largest op, total work / devices)",
    "capacity": "the work each device can do at its speed, and what only the hosts' memory can hold",
    "one-or-cut": "one device's load, or the busiest device's work plus the cheapest tensor it must cut",
    "cut-stages": "devices hold runs of cut ops in a chain, sharing the blocks between, paying the tensors across",
    "ordered-memory": "DAG order: the hosts run what an ideal within the accelerators' memory leaves",
    "host-share": "the one host runs what a prefix and a suffix within the accelerators' memory leave (contiguous)",
    "dp": "the DP over ideals, exact for its class",
    "stage-cut": "each op's cheapest stage, by minimum cuts",
    "chain": "the windowed chain MIP: a solver's proof of the DP class",
    "no-cut-io": "Archer's MIP without the cut's input and output",
    "no-dag": "Archer's MIP without DAG order",
    "superblock": "Archer's superblock relaxation",
    "guess": "Archer §3.3: one MIP per guess",
    "throughput": "Tarnawski Fig. 6 warm-started, its dual bound",
    "neighbourhoods": "IP neighbourhoods around the best placement (a better upper bound)",
    "exact": "Archer Fig. 3 warm-started, its dual bound",
    "critical-path": "latency: the longest path at the fastest times",
    "route-path": "single sample: the longest path with each edge's cheapest transfer",
    "device-work": "single sample: the serial devices' work between heads and tails",
    "cut-spine": "latency: runs of the ops comparable with all others, the side branches between them priced",
    "segment-path": "single sample: the cheapest cut of long paths into runs that fit in memory",
    "cut-segments": "makespan: segments between ops comparable with all others, each device paying its way in",
    "split-heads": "makespan: each op's start on each device, its ancestors split between running there and moving there",
    "segment-lp": "makespan: a shortest path over the cut ops' devices, each segment its LP of work and port loads",
    "segment-schedules": "makespan: each segment between cut ops scheduled alone by CP-SAT, with its congestion",
    "window-schedules": "makespan: windows around the most critical ops scheduled by CP-SAT from their heads to their tails",
    "lifted-heads": "makespan: split heads lifted window by window, each window of an op's ancestors scheduled by CP-SAT",
    "run-paths": "latency: the cheapest runs of the longest paths",
    "latency-lp": "latency: the LP of Tarnawski Fig. 3 / 4 with its cuts",
    "latency": "latency: Tarnawski Fig. 3 / 4 warm-started, its dual bound",
    "schedule-lp": "makespan: the LP of MOIRAI's schedule MILP",
    "schedule": "makespan: MOIRAI's schedule MILP warm-started, its dual bound",
}
"""The package's levels in rank order (cheapest first), each with a line of help."""
