"""The lattice's quick paths: DPL's chain (a path through every supernode) has the prefixes of that path as its
ideals, built at once, the same arrays as the enumeration's; the DP sizes its lattice once per contraction; and
the ideals' sums in Python are the compiled kernel's to the bit."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.heuristics import ideal_lattice as L
from placement_dsl.heuristics import jit, run
from placement_dsl.heuristics.contract import contract
from placement_dsl.testing import random_graph


@pytest.mark.parametrize("n", [1, 2, 9, 64, 65, 140])
def test_the_prefixes_of_dpl_s_chain_are_the_enumerated_lattice(n):
    g = random_graph(np.random.default_rng(n), n, density=0.3)
    con = contract(g, kinds={"accelerator"}, memory=1e18)
    order = L.dfs_order(con)
    chain = con.with_edges(order[:-1], order[1:])
    with jit.interpreted():
        walked, built = L.ideal_lattice(chain), L.ideal_lattice(chain, chain=order)
    for field in ("ideals", "sub_ptr", "sub_idx"):
        assert np.array_equal(getattr(walked, field), getattr(built, field)), field
        assert getattr(walked, field).dtype == getattr(built, field).dtype, field


def test_the_dp_sizes_its_lattice_once(monkeypatch):
    sampled, counted = [], []
    real_sample, real_count = L.K.log2_ideal_estimate, L.count_ideals
    monkeypatch.setattr(L.K, "log2_ideal_estimate", lambda *a: sampled.append(1) or real_sample(*a))
    monkeypatch.setattr(L, "count_ideals", lambda *a, **k: counted.append(1) or real_count(*a, **k))
    g = random_graph(np.random.default_rng(4), 14, density=0.3, name="g")
    with jit.interpreted():
        run("dp", g, Cluster.accelerators(2, cpus=1))
    assert len(counted) == 1  # the size check before DPL's run; DPL's chain and the DP's lattice reuse or skip it
    assert not sampled  # counted exactly: no sample


@pytest.mark.parametrize("n", [3, 64, 130])
def test_ideal_sums_in_python_are_the_kernel_s_to_the_bit(n):
    rng = np.random.default_rng(n)
    W = -(-n // 64)
    ideals = rng.integers(0, 2**63, size=(200, W), dtype=np.uint64)
    if n % 64:
        ideals[:, -1] &= np.uint64((1 << (n % 64)) - 1)
    values = rng.standard_normal((n, 3)) * 10.0 ** rng.integers(-6, 6, (n, 3))
    kernel = next(k for k in jit._KERNELS if k.__qualname__ == "ideal_sums")  # numba's dispatcher may be in its place
    assert kernel.in_python is not kernel.py_func  # a numpy version, not the kernel's loops
    with np.errstate(over="ignore"):
        loops = kernel.py_func(ideals, values)
    assert np.array_equal(kernel.in_python(ideals, values), loops)


def test_the_most_work_below_in_python_is_the_kernel_s():
    rng = np.random.default_rng(5)
    N, C, S = 40, 2, 70
    work, mem = rng.random((C, N)) * 100, rng.random(N) * 1e9
    feas = rng.integers(0, 2**63, size=(N, 2), dtype=np.uint64)
    sub_ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 4, N))]).astype(np.int64)
    sub_idx = np.array([rng.integers(0, max(1, i)) for i in range(N) for _ in range(sub_ptr[i + 1] - sub_ptr[i])],
                       dtype=np.int64)
    kernel = next(k for k in jit._KERNELS if k.__qualname__ == "_most_below")
    assert kernel.in_python is not kernel.py_func
    loops, whole = (np.full((N, C + 1, S), -np.inf, np.float32) for _ in range(2))
    with np.errstate(over="ignore"), jit.interpreted():
        for i in range(N):
            kernel.py_func(loops, feas, i, work, mem, sub_ptr, sub_idx, S)
            kernel.in_python(whole, feas, i, work, mem, sub_ptr, sub_idx, S)
    assert np.array_equal(loops, whole)
