"""Convolutional networks: ResNet (bottleneck blocks) and Inception-v3 (branching modules)."""
from __future__ import annotations

from ..cluster import Cluster
from ..errors import SpecError
from ..workload import Workload
from .build import GraphBuilder, build_workload, check_choice, check_positive, default_cluster
from .costs import concat, conv, elementwise, matmul, pool

# ============================================================================ resnet
RESNET_STAGES = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _bottleneck(g: GraphBuilder, prefix: str, x: str, batch: int, size: int, c_in: int, width: int,
                stride: int) -> tuple[str, int, int]:
    c_out = 4 * width
    a, s1 = conv(batch, size, c_in, width, 1, 1)
    b, s2 = conv(batch, s1, width, width, 3, 3, stride)
    c, _ = conv(batch, s2, width, c_out, 1, 1)
    h = g.add(f"{prefix}.conv1", a, [x], "conv")
    h = g.add(f"{prefix}.conv2", b, [h], "conv")
    h = g.add(f"{prefix}.conv3", c, [h], "conv")
    skip = x
    if stride != 1 or c_in != c_out:
        d, _ = conv(batch, size, c_in, c_out, 1, 1, stride)
        skip = g.add(f"{prefix}.down", d, [x], "conv")
    out = g.add(f"{prefix}.add", elementwise(batch * s2 * s2 * c_out, 2.0, inputs=2), [h, skip], "add")
    return out, s2, c_out


def resnet(depth: int = 50, batch: int = 32, image: int = 224, classes: int = 1000, training: bool = False,
           cluster: Cluster | None = None, name: str | None = None) -> Workload:
    """A ResNet with bottleneck blocks (He et al.): stem, four stages, average pool, classifier.

    Stem: ``7x7/2`` conv to 64 channels and a ``3x3/2`` max pool. Stage ``j`` has ``blocks[j]``
    bottlenecks of width ``64 * 2^j`` (``1x1 -> 3x3 -> 1x1`` to ``4 * width`` channels, the first
    with stride 2 from stage 2 on and a ``1x1`` projection on the skip), each ending in a residual
    ``add`` (with ReLU). ``depth`` selects the blocks: 50 ``(3,4,6,3)``, 101 ``(3,4,23,3)``,
    152 ``(3,8,36,3)``.
    """
    check_positive("resnet", batch=batch, image=image, classes=classes)
    check_choice("resnet", "depth", depth, list(RESNET_STAGES))
    g = GraphBuilder()
    stem, size = conv(batch, image, 3, 64, 7, 7, 2)
    x = g.add("stem.conv", stem, kind="conv")
    mp, size = pool(batch, size, 64, 3, 2, same=True)
    x, channels = g.add("stem.pool", mp, [x], "pool"), 64
    for j, blocks in enumerate(RESNET_STAGES[depth]):
        for i in range(blocks):
            stride = 2 if (i == 0 and j > 0) else 1
            x, size, channels = _bottleneck(g, f"s{j + 1}.b{i}", x, batch, size, channels, 64 * 2**j, stride)
    avg, _ = pool(batch, size, channels, size, size)
    x = g.add("avgpool", avg, [x], "pool")
    g.add("fc", matmul(batch, channels, classes), [x], "matmul")
    params = {"depth": depth, "batch": batch, "image": image, "classes": classes}
    return build_workload(name or f"resnet{depth}", g, training, cluster or default_cluster(), "resnet", params)


# ============================================================================ inception
# A branch is a list of layers; a layer is ("conv", c_out, kh, kw, stride, same) or ("pool", k, stride, same,
# avg) or a tuple of convs run in parallel on the branch so far (all of them feed the concat).


def _c(c_out: int, kh: int, kw: int | None = None, stride: int = 1, same: bool = True) -> tuple:
    return ("conv", c_out, kh, kh if kw is None else kw, stride, same)


_POOL_SAME = ("pool", 3, 1, True)
_POOL_DOWN = ("pool", 3, 2, False)


def _module_a(pool_features: int) -> list[list]:
    return [[_c(64, 1)], [_c(48, 1), _c(64, 5)], [_c(64, 1), _c(96, 3), _c(96, 3)], [_POOL_SAME, _c(pool_features, 1)]]


def _module_c(c7: int) -> list[list]:
    return [[_c(192, 1)], [_c(c7, 1), _c(c7, 1, 7), _c(192, 7, 1)],
            [_c(c7, 1), _c(c7, 7, 1), _c(c7, 1, 7), _c(c7, 7, 1), _c(192, 1, 7)], [_POOL_SAME, _c(192, 1)]]


def _module_e() -> list[list]:
    fork = (_c(384, 1, 3), _c(384, 3, 1))
    return [[_c(320, 1)], [_c(384, 1), fork], [_c(448, 1), _c(384, 3), fork], [_POOL_SAME, _c(192, 1)]]


INCEPTION_V3_MODULES = (
    [("a", _module_a(32)), ("a", _module_a(64)), ("a", _module_a(64)),
     ("b", [[_c(384, 3, stride=2, same=False)], [_c(64, 1), _c(96, 3), _c(96, 3, stride=2, same=False)],
            [_POOL_DOWN]]),
     ("c", _module_c(128)), ("c", _module_c(160)), ("c", _module_c(160)), ("c", _module_c(192)),
     ("d", [[_c(192, 1), _c(320, 3, stride=2, same=False)],
            [_c(192, 1), _c(192, 1, 7), _c(192, 7, 1), _c(192, 3, stride=2, same=False)], [_POOL_DOWN]]),
     ("e", _module_e()), ("e", _module_e())]
)
"""Inception-v3's modules (Szegedy et al. 2016, Fig. 5-7): 3 x A (35x35), B, 4 x C (17x17), D, 2 x E (8x8)."""


def _layer(g: GraphBuilder, name: str, layer: tuple, x: str, batch: int, size: int, ch: int) -> tuple[str, int, int]:
    if layer[0] == "conv":
        _, c_out, kh, kw, stride, same = layer
        cost, out = conv(batch, size, ch, c_out, kh, kw, stride, same)
        return g.add(name, cost, [x], "conv"), out, c_out
    _, k, stride, same = layer
    cost, out = pool(batch, size, ch, k, stride, same)
    return g.add(name, cost, [x], "pool"), out, ch


def _branch(g: GraphBuilder, prefix: str, layers: list, x: str, batch: int, size: int,
            ch: int) -> tuple[list[str], int, int]:
    for i, layer in enumerate(layers):
        if isinstance(layer[0], tuple):  # parallel fork ending the branch
            outs = [_layer(g, f"{prefix}.{i}{chr(97 + j)}", f, x, batch, size, ch) for j, f in enumerate(layer)]
            return [o[0] for o in outs], outs[0][1], sum(o[2] for o in outs)
        x, size, ch = _layer(g, f"{prefix}.{i}", layer, x, batch, size, ch)
    return [x], size, ch


def _inception_module(g: GraphBuilder, prefix: str, branches: list, x: str, batch: int, size: int,
                      ch: int) -> tuple[str, int, int]:
    tails, channels = [], 0
    for j, layers in enumerate(branches):
        outs, out_size, out_ch = _branch(g, f"{prefix}.br{j}", layers, x, batch, size, ch)
        tails += outs
        channels += out_ch
    return g.add(f"{prefix}.concat", concat(batch * out_size * out_size * channels), tails, "concat"), out_size, channels


def inception(batch: int = 32, image: int = 299, classes: int = 1000, training: bool = False,
              cluster: Cluster | None = None, name: str | None = None) -> Workload:
    """An Inception-v3-style CNN: a conv stem, then modules of parallel branches merging by ``concat``.

    Stem (valid convolutions unless noted): ``3x3/2 -> 3x3 -> 3x3 same -> pool/2 -> 1x1 -> 3x3 ->
    pool/2`` (299 -> 35), then :data:`INCEPTION_V3_MODULES`, global average pool and classifier.
    Auxiliary heads are left out.
    """
    check_positive("inception", batch=batch, image=image, classes=classes)
    if image < 75:
        raise SpecError(f"inception: image must be >= 75 pixels for the stem and reductions, got {image}")
    g = GraphBuilder()
    stem = [_c(32, 3, stride=2, same=False), _c(32, 3, same=False), _c(64, 3), _POOL_DOWN, _c(80, 1),
            _c(192, 3, same=False), _POOL_DOWN]
    (x,), size, ch = _branch(g, "stem", stem, "", batch, image, 3)
    for i, (letter, branches) in enumerate(INCEPTION_V3_MODULES):
        x, size, ch = _inception_module(g, f"m{i}{letter}", branches, x, batch, size, ch)
    avg, _ = pool(batch, size, ch, size, size)
    x = g.add("avgpool", avg, [x], "pool")
    g.add("fc", matmul(batch, ch, classes), [x], "matmul")
    params = {"batch": batch, "image": image, "classes": classes}
    return build_workload(name or "inception-v3", g, training, cluster or default_cluster(), "inception", params)
