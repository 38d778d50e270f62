"""Command-line options of training pipelines: servers, schedule and micro-batches, replication.

* ``--servers S --per-server P --intra BW --inter BW``: a two-level cluster
  (:meth:`~placement_dsl.cluster.Cluster.hierarchical`) of the workload's accelerator kind
  and memory (``--memory`` if given).
* ``--schedule gpipe|1f1b --microbatches M``: the objective of the schedule (GPipe:
  ``max FW + max BW``, with its fill and drain over ``M`` micro-batches; 1F1B: PipeDream's
  ``max (FW + BW)``) and memory counted per schedule (:class:`~placement_dsl.training_terms.TrainingMemory`,
  Adam in mixed precision unless ``--optimizer-bytes``/``--weight-bytes`` say otherwise).
* ``--virtual-stages V``: with ``--objective interleaved-1f1b|zb-h1``, ``V`` virtual stages per rank (Megatron's
  virtual pipeline stages; ``CostModel.virtual``): the heuristics' answers become splits of ``p V`` stages.
* ``--replicate R``: stages on up to ``R`` devices (Tarnawski App. C.2): the DPs and the planners
  replicate, the MIP methods add :class:`~placement_dsl.training_terms.Replicate` (formulation
  ``throughput-replicated``), and ``evaluate`` checks a split's replicas against it.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from ..cluster import Cluster
from ..constraints import Memory, Term
from ..errors import SpecError
from ..evaluate import CostModel
from ..limits import MAX_DEVICES
from ..objectives import GPipe, Interleaved1F1B
from ..pipeline_orders import ORDERS
from ..problem import Problem
from ..training import ADAM_MIXED_BYTES, FP16_WEIGHT_BYTES, SCHEDULES, TrainingMemorySpec
from ..training_terms import Replicate, TrainingMemory

SCHEDULE_OBJECTIVE = {"gpipe": "gpipe", "1f1b": "pipedream"}
MICROBATCHED = ("gpipe", *ORDERS)  # objectives scoring a step of --microbatches (GPipe's fill and drain, rank orders)
SERVER_FLAGS = {"servers": "--servers", "per_server": "--per-server", "intra": "--intra", "inter": "--inter"}


def add_cluster_args(sp: argparse.ArgumentParser, number: Any) -> None:
    """``--servers``, ``--per-server``, ``--intra``, ``--inter`` (all four together)."""
    sp.add_argument("--servers", type=number(int, 1, "--servers", high=MAX_DEVICES), metavar="S",
                    help="servers of a two-level cluster (with --per-server, --intra, --inter; Tarnawski App. C.3)")
    sp.add_argument("--per-server", type=number(int, 1, "--per-server", high=MAX_DEVICES), metavar="P",
                    help="accelerators per server")
    sp.add_argument("--intra", type=number(float, 0, "--intra", False), metavar="BW",
                    help="bandwidth between accelerators of one server, bytes per ms")
    sp.add_argument("--inter", type=number(float, 0, "--inter", False), metavar="BW",
                    help="bandwidth between servers, bytes per ms")


def add_training_args(sp: argparse.ArgumentParser, number: Any) -> None:
    """``--schedule``, ``--microbatches``, ``--optimizer-bytes``, ``--weight-bytes``, ``--recompute``, ``--replicate``."""
    sp.add_argument("--schedule", choices=SCHEDULES,
                    help="training schedule: its objective (gpipe: max FW + max BW; 1f1b: PipeDream's max FW+BW) and "
                         "its memory (1f1b: stage s of k stashes k-s micro-batches; gpipe: all M)")
    sp.add_argument("--microbatches", type=number(int, 1, "--microbatches"), metavar="M",
                    help="micro-batches per mini-batch: GPipe's fill and drain and stash (needed for --schedule gpipe; "
                         "with --objective gpipe the fill and drain alone); caps "
                         "1F1B's stash; with --objective interleaved-1f1b or zb-h1, the step torch's orders run")
    sp.add_argument("--virtual-stages", type=number(int, 1, "--virtual-stages"), metavar="V",
                    help="with --objective interleaved-1f1b or zb-h1: virtual stages per rank (stage s on rank s mod "
                         "p; Megatron's virtual pipeline stages); default: as each answer has them, one per device")
    sp.add_argument("--optimizer-bytes", type=number(float, 0, "--optimizer-bytes", False), metavar="B",
                    help=f"bytes per parameter of weights, gradients and optimizer state (default "
                         f"{ADAM_MIXED_BYTES:g}: Adam in mixed precision)")
    sp.add_argument("--weight-bytes", type=number(float, 0, "--weight-bytes", False), metavar="B",
                    help=f"bytes per parameter as the graph counts them (default {FP16_WEIGHT_BYTES:g}: fp16; "
                         "PipeDream profiles are fp32: 4)")
    sp.add_argument("--recompute", action="store_true",
                    help="with --schedule: stash stage inputs only and recompute activations")
    sp.add_argument("--replicate", type=number(int, 1, "--replicate", high=MAX_DEVICES), metavar="R",
                    help="let a stage run on up to R devices (data-parallel replicas, Tarnawski App. C.2)")


def hierarchical(args: argparse.Namespace, cluster: Cluster) -> Cluster | None:
    """The two-level cluster the server flags ask for, else ``None``."""
    given = {k: getattr(args, k, None) for k in SERVER_FLAGS}
    if all(v is None for v in given.values()):
        return None
    missing = [SERVER_FLAGS[k] for k, v in given.items() if v is None]
    if missing:
        raise SpecError(f"a two-level cluster needs {', '.join(SERVER_FLAGS.values())}; missing {', '.join(missing)}")
    accs = [d for d in cluster.devices if not d.host] or list(cluster.devices)
    return Cluster.hierarchical(args.servers, args.per_server, intra=args.intra, inter=args.inter,
                                memory=accs[0].memory, kind=accs[0].kind)


def schedule_objective(args: argparse.Namespace, name: str | None) -> str | None:
    """The objective name ``--schedule`` implies; an ``--objective`` that contradicts it is an error."""
    schedule = getattr(args, "schedule", None)
    if schedule is None:
        return name
    implied = SCHEDULE_OBJECTIVE[schedule]
    if name is not None and name != implied:
        raise SpecError(f"--schedule {schedule} scores objective {implied!r}, but --objective is {name!r}; drop one")
    return implied


def memory_spec(args: argparse.Namespace) -> TrainingMemorySpec | None:
    """Memory per schedule from the flags (``None`` without ``--schedule``)."""
    if getattr(args, "schedule", None) is None:
        stepped = getattr(args, "objective", None) in MICROBATCHED  # --microbatches is the objective's step
        for flag in ("optimizer_bytes", "weight_bytes", *(() if stepped else ("microbatches",))):
            if getattr(args, flag, None) is not None:
                also = f" or --objective {'|'.join(MICROBATCHED)}" if flag == "microbatches" else ""
                raise SpecError(f"--{flag.replace('_', '-')} needs --schedule gpipe|1f1b{also}")
        return None
    return TrainingMemorySpec(args.schedule, args.microbatches,
                              args.optimizer_bytes or ADAM_MIXED_BYTES, args.weight_bytes or FP16_WEIGHT_BYTES,
                              bool(args.recompute))


def virtual_stages(args: argparse.Namespace, name: str | None) -> int | None:
    """``--virtual-stages``, refused with an objective that runs one stage per device."""
    v = getattr(args, "virtual_stages", None)
    if v is not None and name not in ORDERS:
        raise SpecError(f"--virtual-stages needs --objective {'|'.join(ORDERS)}; objective {name!r} runs one stage "
                        "per device")
    return v


def training_model(args: argparse.Namespace, model: CostModel) -> CostModel:
    """``model`` with GPipe's micro-batches, the virtual stages and the memory per schedule the flags ask for."""
    v = virtual_stages(args, model.name)
    if v is not None:
        model = replace(model, virtual=v)
    spec = memory_spec(args)
    if spec is None:
        m = getattr(args, "microbatches", None)
        return replace(model, microbatches=m) if model.name in MICROBATCHED and m is not None else model
    fields: dict[str, Any] = {"training_memory": spec}
    if spec.schedule == "gpipe":
        fields["microbatches"] = spec.microbatches
    return replace(model, require=model.require | {"memory"}, **fields)


def training_terms(args: argparse.Namespace) -> list[Term]:
    """Problem terms of the flags, for the MIP methods."""
    spec = memory_spec(args)
    terms: list[Term] = []
    if spec is not None:
        terms.append(TrainingMemory(spec.schedule, spec.microbatches, spec.optimizer_bytes, spec.weight_bytes,
                                    spec.recompute))
    if (getattr(args, "replicate", None) or 1) > 1:
        terms.append(Replicate(args.replicate))
    return terms


def replication_options(args: argparse.Namespace, accepted: set[str]) -> dict[str, Any]:
    """``replication=...`` for a heuristic taking it when ``--replicate R`` (R > 1) is given."""
    r = getattr(args, "replicate", None)
    if r is None or "replication" not in accepted:
        return {}
    return {"replication": r > 1, **({"max_replicas": r} if "max_replicas" in accepted and r > 1 else {})}


def training_problem(args: argparse.Namespace, problem: Problem) -> Problem:
    """The MIP methods' problem with the flags' terms: memory per schedule replaces plain memory,
    ``Replicate(R)`` is added, GPipe gets its micro-batches."""
    terms = training_terms(args)
    v = virtual_stages(args, problem.objective.names[0])
    if not terms and getattr(args, "microbatches", None) is None and v is None:
        return problem
    constraints = [t for t in problem.constraints if not (isinstance(t, Memory) and any(
        isinstance(x, TrainingMemory) for x in terms))]
    objective = problem.objective
    if isinstance(objective, GPipe) and getattr(args, "microbatches", None) is not None:
        objective = GPipe(overlap=objective.overlap, microbatches=args.microbatches)
    if isinstance(objective, Interleaved1F1B):
        objective = type(objective)(overlap=objective.overlap, virtual=v,
                                    microbatches=getattr(args, "microbatches", None) or objective.microbatches)
    return Problem(problem.source_graph, problem.cluster, objective, [*constraints, *terms])
