"""What the command line and the sweep share: reading workloads (a path or ``zoo:NAME``), resizing clusters, and
the problems a ``--method`` means.

Both front ends import this module; neither imports the other. The method-to-terms mapping is a front-end
preset: the model layers below know terms, not method names.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import zoo
from .cluster import Cluster, port_bandwidths
from .constraints import Congestion, Contiguous, DagOrder, Memory, Overflow, Subgraphs, Term
from .errors import SpecError
from .evaluate import CostModel, MemoryMode
from .io import Workload, load_workload
from .objectives import Latency, Makespan, objective_named, objective_of
from .problem import Problem


# ---------------------------------------------------------------------------- workloads
def read_workload(spec: str, fmt: str | None = None, stages: int | None = None, training: bool = False,
                  note: Callable[[str], None] | None = None) -> Workload:
    """A workload from a path or ``zoo:NAME``, with ``stages`` accelerators if given.

    ``training`` gives the training graph: the zoo's ``-train`` variant, a PipeDream profile's
    measured backward pass, or a derived one (:func:`placement_dsl.io.workload.with_training`),
    which ``note`` (when given) is told about.
    """
    if spec.startswith("zoo:"):
        name = spec[4:]
        if training and not name.endswith(zoo.TRAIN_SUFFIX):
            name += zoo.TRAIN_SUFFIX
        w = zoo.get(name)
    else:
        w = load_workload(spec, fmt, **({"training": True} if training else {}))
        if note is not None and str(w.meta.get("backward", "")).startswith("derived"):
            note(f"--training: graph {w.graph.name!r} had no backward pass; derived one "
                 "(each op's backward work is twice its forward work)")
    return w if stages is None else resized(w, stages)


def resized(w: Workload, stages: int) -> Workload:
    """``w`` on ``stages`` copies of its first accelerator (:func:`resize`), refused where the graph's flows are timed
    per pair of the file's devices (:func:`timed_devices`)."""
    out = Workload(w.graph, resize(w.cluster, stages), w.format, w.meta)
    timed_devices(out, w.cluster, "--stages")
    return out


def timed_devices(w: Workload, read: Cluster, options: str) -> None:
    """Refuse a cluster whose devices are not those ``read`` (the file's) when the graph's flows carry a transfer time
    per pair of those devices (a MOIRAI sheet's ``transfer_time``): copies made by ``--stages``, a host added by
    ``--cpus`` or servers have no times, and the matrices' rows would be read as other devices'. ``options`` names
    what changed the cluster."""
    flow = next((op for op in w.graph.ops if "transfer_time" in op.attrs), None)
    if flow is None or [(d.name, d.kind) for d in w.cluster.devices] == [(d.name, d.kind) for d in read.devices]:
        return
    raise SpecError(f"{options}: graph {w.graph.name!r} times each data flow (op {flow.name!r}) between each pair of "
                    f"its {read.size} devices ({', '.join(read.names)}), and the resized cluster's devices have no "
                    "such times; leave the cluster as the file gives it")


def resize(cluster: Cluster, k: int) -> Cluster:
    """The cluster with ``k`` copies of its first non-host device, host devices kept.

    The copies exchange tensors through host memory at the template's bandwidth; on a cluster with
    links that is the template's port (its fastest outgoing link, :func:`~placement_dsl.cluster.port_bandwidths`),
    since the links between the originals do not carry over to the copies.
    """
    if k < 1:
        raise SpecError(f"--stages must be >= 1, got {k}")
    accs = [d for d in port_bandwidths(cluster.devices, cluster.links) if not d.host]
    template = accs[0] if accs else cluster.devices[0]
    prefix = template.name.rstrip("0123456789") or "dev"
    copies = [template.model_copy(update={"name": f"{prefix}{i}"}) for i in range(k)]
    hosts = [d for d in cluster.devices if d.host]
    return Cluster(copies + hosts, ())


# ---------------------------------------------------------------------------- problems
STRUCTURE: dict[str, list[Term]] = {"ip": [Contiguous()], "ip-noncontig": [], "exact": [DagOrder()]}


def problem_for_method(workload: Any, objective: str | None = None, method: str = "ip",
                       overlap: str = "none", subgraphs: int | None = None) -> Problem:
    """The problem a command-line ``--method`` means for a workload.

    ``ip``: contiguous (Tarnawski Fig. 6; Fig. 3 for latency); ``ip-noncontig``: the same
    without contiguity (§5.2); ``exact``: Archer's Fig. 3 with DAG order. Memory is hard,
    except for ``bottleneck`` which streams the overflow (Archer eq. (2)). ``subgraphs``
    (latency only, ``--subgraphs Q``): at most ``Q`` contiguous subgraphs per accelerator
    (Fig. 4) in place of contiguity.
    """
    name = objective or workload.meta.get("objective", "throughput")
    term = objective_named(name, overlap)
    if method not in STRUCTURE:
        raise SpecError(f"method {method!r} has no formulation; choose from {sorted(STRUCTURE)}")
    memory: Term = Overflow() if term.cost_model().memory is MemoryMode.OVERFLOW else Memory()
    structure = STRUCTURE[method]
    if subgraphs is not None:
        if not isinstance(term, Latency):
            raise SpecError(f"--subgraphs {subgraphs} limits the subgraphs per accelerator of a latency split; "
                            f"the objective is {name!r} (use --objective latency)")
        if method == "exact":
            raise SpecError("--subgraphs applies to methods ip and ip-noncontig, not exact (a DAG-ordered pipeline)")
        structure = [Subgraphs(subgraphs)]
    return Problem(workload.graph, workload.cluster, term, [memory, *structure])


def dag_problem(workload: Any, model: CostModel) -> Problem:
    """The DAG-ordered problem of a cost model (devices numbered in pipeline order, Archer Fig. 3)."""
    memory = Overflow() if model.memory is MemoryMode.OVERFLOW else Memory()
    return Problem(workload.graph, workload.cluster, objective_of(model), [memory, DagOrder()])


def makespan_problem(graph: Any, cluster: Cluster, model: CostModel) -> Problem:
    """The makespan problem a cost model describes, as ``solve`` schedules it: any device for any op (MOIRAI eq.
    4-8), hard memory unless the model streams the overflow, its congestion. Its levels bound every placement; the
    DAG-ordered class would refuse the list schedulers' answers, whose transfers go back and forth between devices
    (GoogLeNet: HEFT 1.530 and CPOP 1.519 refused, the certificate kept one device's 2.336)."""
    terms: list[Term] = [Memory()] if model.memory is MemoryMode.HARD else []
    return Problem(graph, cluster, Makespan(), [*terms, Congestion(model.congestion.value)])


def certified_problem(workload: Any, model: CostModel, objective: str | None = None, method: str | None = None,
                      overlap: str = "none", subgraphs: int | None = None) -> Problem:
    """The problem the ``bounds`` command certifies: ``method``'s (:func:`problem_for_method`) if given.

    By default the DAG-ordered one (:func:`dag_problem`) where numbering the devices in pipeline order costs
    nothing: identical devices, an inference graph, a max-load objective; the makespan's is solve's
    (:func:`makespan_problem`). Otherwise a DAG-ordered placement in another device order (the fast device first, a
    CPU-only op's host at the head) lies outside the numbered class, whose optimum can then exceed a pipeline ``solve`` returns; and a
    training graph's backward ops sit with their forward ones, so its DAG-ordered placements keep every op on one
    device. There the default is solve's ``ip``: the contiguous class (Tarnawski Fig. 6; Fig. 3 for latency), which
    holds every DAG-ordered placement in any device order.
    """
    name = model.objective.value
    if method is None and name == "makespan":
        return makespan_problem(workload.graph, workload.cluster, model)
    free = (len(workload.cluster.homogeneous_groups()) == 1 and not workload.graph.is_training
            and name != "latency")
    if method is None and free:
        return dag_problem(workload, model)
    return problem_for_method(workload, objective=objective, method=method or "ip", overlap=overlap,
                              subgraphs=subgraphs)
