"""Split points torch's own ``pipeline()`` takes, on small torch models built here: a stage that begins with the
model's own functional calls splits at the end of the module before them."""
from __future__ import annotations

import copy

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.export import export
from placement_dsl.placement import Placement

torch = pytest.importorskip("torch")
nn = torch.nn


class FeaturesThenClassifier(nn.Module):
    """torchvision's layout: ``features``, then functional calls of the root (``F.relu``, ``torch.flatten``),
    then ``classifier``."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16))
        self.classifier = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(nn.functional.relu(x) * 2.0, 1)
        return self.classifier(x)


def _placed(model, x, first_of_stage_1) -> Placement:
    from placement_dsl.io.torch_export import from_module

    g = from_module(model, (x,)).graph
    k = next(i for i, op in enumerate(g.ops) if first_of_stage_1(op))
    return Placement(g, Cluster.stages(2), [0] * k + [1] * (len(g.ops) - k))


def _run(model, x, spec):
    from torch.distributed.pipelining import SplitPoint, pipeline

    pipe = pipeline(copy.deepcopy(model), (x,), split_spec={p: SplitPoint[v.upper()] for p, v in spec.items()})
    with torch.no_grad():
        y = pipe(x)
    return pipe.num_stages, y[0] if isinstance(y, tuple) else y


def test_a_stage_beginning_with_the_roots_own_calls_splits_at_the_end_of_the_module_before():
    torch.manual_seed(0)
    model, x = FeaturesThenClassifier().eval(), torch.randn(2, 8)
    placement = _placed(model, x, lambda op: not op.attrs.get("module", "").startswith("features"))
    assert not placement.graph.ops[placement.assign.tolist().index(1)].attrs.get("module")  # the root's relu
    spec = export(placement, "torch-pipelining").data["split_spec"]
    assert spec == {"features": "end"}
    stages, y = _run(model, x, spec)
    with torch.no_grad():
        assert stages == 2 and torch.allclose(y, model(x))
    parts = export(placement, "torchtitan").data["module_fqns_per_model_part"]
    assert parts == [["features"], ["classifier"]]  # Sequentials the model calls: torchtitan keeps them whole


def split_runs_as_the_model(make: type[nn.Module], second: str, spec: dict[str, str]) -> None:
    """The ops of module ``second`` and after on the second stage: the exported ``split_spec`` is ``spec``, and
    torch's ``pipeline()`` builds two stages from it that reproduce the model's output."""
    torch.manual_seed(0)
    model, x = make().eval(), torch.randn(2, 8)
    placement = _placed(model, x, lambda op: op.attrs.get("module", "").startswith(second))
    found = export(placement, "torch-pipelining").data["split_spec"]
    assert found == spec
    stages, y = _run(model, x, found)
    with torch.no_grad():
        assert stages == 2 and torch.allclose(y, model(x))


def test_a_stage_beginning_at_a_module_still_splits_at_its_beginning():
    split_runs_as_the_model(FeaturesThenClassifier, "classifier", {"classifier": "beginning"})


class Blocks(nn.Module):
    """A ``ModuleList`` the forward iterates (never calls) and an output layer."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(3))
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def test_a_split_at_a_module_list_names_its_first_called_module():
    """torch hooks a split point on the module's call: a ``ModuleList`` is never called, and a split there is lost
    (torch made one stage fewer than exported, silently)."""
    split_runs_as_the_model(Blocks, "blocks", {"blocks.0": "beginning"})


class TwoInputs(nn.Module):
    """Two independent embeddings (an encoder-decoder's source and target), then a module reading both."""

    def __init__(self) -> None:
        super().__init__()
        self.src = nn.Linear(8, 8)
        self.tgt = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        return self.out(torch.tanh(self.src(x)) + torch.tanh(self.tgt(x)))


def test_stages_out_of_the_programs_order_are_refused():
    """torch cuts the program in its order: stage 0 holding ``tgt`` and stage 1 ``src``, which the model runs first,
    became one stage of both in torch (it split at 'src', before which nothing runs)."""
    from placement_dsl.errors import SpecError
    from placement_dsl.io.torch_export import from_module

    model, x = TwoInputs().eval(), torch.randn(2, 8)
    g = from_module(model, (x,)).graph
    assign = [0 if str(op.attrs.get("module", "")).startswith("tgt") else 1 for op in g.ops]
    with pytest.raises(SpecError, match=r"runs on stage 0 but after op .* of stage 1 in the model's execution order"):
        export(Placement(g, Cluster.stages(2), assign), "torch-pipelining")
    assign = [0 if str(op.attrs.get("module", "")).startswith(("src", "tgt")) else 1 for op in g.ops]
    assert export(Placement(g, Cluster.stages(2), assign), "torch-pipelining").data["split_spec"]


def test_a_stage_of_one_module_ends_at_its_container():
    """``features.2`` alone on a stage, then the root's ``torch.flatten`` starting the next: the stage begins at
    ``features.2`` and ends after ``features``, two keys of split_spec at the points the plan cuts (at depth 2 the
    end point was ``features.2`` again, one key for two points, and the plan was refused)."""
    from torch.distributed.pipelining import SplitPoint, pipeline

    from placement_dsl.io.torch_export import from_module

    model, x = FeaturesThenClassifier().eval(), torch.randn(2, 8)
    g = from_module(model, (x,)).graph
    mods = [str(op.attrs.get("module", "")) for op in g.ops]
    last = max(i for i, m in enumerate(mods) if m.startswith("features"))
    assign = [0 if m.startswith(("features.0", "features.1")) else 1 if i <= last else 2 for i, m in enumerate(mods)]
    spec = export(Placement(g, Cluster.stages(3), assign), "torch-pipelining", depth=2).data["split_spec"]
    assert spec == {"features.2": "beginning", "features": "end"}
    pipe = pipeline(model, (x,), split_spec={k: SplitPoint[v.upper()] for k, v in spec.items()})
    assert pipe.num_stages == 3


class PreBodyHead(nn.Module):
    """Three top-level modules and the root's own calls between ``body`` and ``head``."""

    def __init__(self) -> None:
        super().__init__()
        self.pre, self.body, self.head = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        x = self.body(self.pre(x))
        return self.head(torch.flatten(nn.functional.relu(x) * 2.0, 1))


@pytest.mark.parametrize("depth", [None, 1, 2])
def test_a_top_level_module_alone_on_a_stage_begins_after_the_module_before(depth):
    """``body`` alone on a stage, then the root's ``relu`` starting the next: the stage ends after ``body`` and no
    container holds ``body`` to end at instead, so it begins after ``pre`` (one key of split_spec per point;
    ``body`` at both ends was one key for two points, which torch would build as 2 stages where 3 were planned)."""
    from torch.distributed.pipelining import SplitPoint, pipeline

    from placement_dsl.io.torch_export import from_module

    torch.manual_seed(0)
    model, x = PreBodyHead().eval(), torch.randn(2, 8)
    g = from_module(model, (x,)).graph
    mods = [str(op.attrs.get("module", "")) for op in g.ops]
    last = max(i for i, m in enumerate(mods) if m == "body")
    assign = [0 if m == "pre" else 1 if i <= last else 2 for i, m in enumerate(mods)]
    assert not mods[last + 1] and assign.count(1) and assign.count(2)  # the last stage begins with the root's calls
    spec = export(Placement(g, Cluster.stages(3), assign), "torch-pipelining", depth=depth).data["split_spec"]
    assert spec == {"pre": "end", "body": "end"}
    pipe = pipeline(copy.deepcopy(model), (x,), split_spec={k: SplitPoint[v.upper()] for k, v in spec.items()})
    with torch.no_grad():
        assert pipe.num_stages == 3 and torch.allclose(pipe(x)[0], model(x))
    joined = [min(a, 1) for a in assign]  # the stage joined to its neighbour: one point, at the beginning of body
    assert export(Placement(g, Cluster.stages(2), joined), "torch-pipelining",
                  depth=depth).data["split_spec"] == {"body": "beginning"}
