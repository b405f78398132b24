"""Passes over the two halves of a law's nodes on two threads (``rmt.kernels.freeprob_halves``).

References: the single-pass kernels ``MOMENTS[m]``, ``PIVOTS[m]`` (themselves checked against
numpy in ``test_freeprob_kernels.py``) and dense numpy solves; the same result on one thread
and on two; the whole solver with the halves against the single pass.
"""

from __future__ import annotations

import numpy as np
import pytest

import rmt
from rmt.freeprob import mp as mp_module
from rmt.freeprob.mp import MPSystem
from rmt.kernels._generated.freeprob_small import MOMENTS, PIVOTS
from rmt.kernels.freeprob_halves import min_pivot_halves, moments_halves

from .conftest import ALL_THREADS, assert_same_theory, numba_threads


def halves_of(m, N, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((N, m, m))
    D = 0.5 * (A + np.swapaxes(A, 1, 2))
    w = rng.random(N)
    w /= w.sum()
    ia, ib = np.triu_indices(m)
    Dv = np.ascontiguousarray(D[:, ia, ib].T)
    h = N // 2
    halves = (Dv[:, :h].copy(), Dv[:, h:].copy(), w[:h].copy(), w[h:].copy())
    B = rng.standard_normal((m, m))
    G = -0.2 * (B @ B.T / m + np.eye(m))
    return D, Dv, w, halves, G


@pytest.mark.parametrize("m", [2, 3, 4])
def test_moments_over_halves_match_one_pass_and_numpy(m):
    D, Dv, w, halves, G = halves_of(m, 1001, m)
    p = m * (m + 1) // 2
    inv_delta = 0.4
    EF, JF = np.zeros((m, m)), np.zeros((p, p))
    assert MOMENTS[m](Dv, w, G, inv_delta, True, EF, JF) == 0
    EFh, JFh = np.zeros((m, m)), np.zeros((p, p))
    with numba_threads(ALL_THREADS):
        assert moments_halves(m, *halves, G, inv_delta, True, EFh, JFh) == 0
    np.testing.assert_allclose(EFh, EF, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(JFh, JF, rtol=1e-13, atol=1e-15)
    F = np.linalg.solve(np.eye(m) + D @ G * inv_delta, D)
    np.testing.assert_allclose(EFh, np.einsum("n,nab->ab", w, F), rtol=1e-12, atol=1e-14)
    # the same bits on one thread as on two: the halves are added in a fixed order
    with numba_threads(1):
        EF1, JF1 = np.zeros((m, m)), np.zeros((p, p))
        moments_halves(m, *halves, G, inv_delta, True, EF1, JF1)
    assert np.array_equal(EF1, EFh) and np.array_equal(JF1, JFh)
    # a singular node in the second half is counted: D = e_0 e_0^T against G = -delta I
    Dv2 = halves[1].copy()
    Dv2[:, 0] = 0.0
    Dv2[0, 0] = 1.0
    G2 = -2.0 * np.eye(m)
    args = (np.zeros((m, m)), np.zeros((p, p)))
    assert moments_halves(m, halves[0], Dv2, halves[2], halves[3], G2, 0.5, True, *args) >= 1


@pytest.mark.parametrize("m", [2, 3, 4])
def test_min_pivot_over_halves_matches_one_pass(m):
    _, Dv, _, halves, G = halves_of(m, 999, 10 + m)
    L = np.ascontiguousarray(np.linalg.cholesky(-G))
    for scale in (0.3, -0.3, 5.0):
        out = np.empty(Dv.shape[1])
        bad = PIVOTS[m](Dv, L, scale, out)
        got = min_pivot_halves(m, halves[0], halves[1], L, scale)
        if bad:
            assert got == -1.0
        else:
            assert got == out.min()


def test_solver_with_halves_matches_one_pass(monkeypatch):
    """Edges and outliers of an m = 3 network law of 32k QMC nodes, with and without the halves."""
    net = rmt.TwoLayerNet(3, "softplus", "huber", huber_delta=1.0)
    A = np.random.default_rng(3).standard_normal((3, 3)) * 0.3
    Q = A @ A.T + 0.05 * np.eye(3)
    law = rmt.SpikeLaw.from_network(
        rmt.MultiIndexModel("phase_retrieval"), net, Q, nodes="qmc", n_qmc=32768
    )
    assert law.D.shape[0] >= mp_module.HALVES_MIN_NODES
    assert MPSystem(law, 4.0)._nodes.halves is not None
    edges = rmt.bulk_edges(law, 4.0)
    out = rmt.outliers(law, 4.0, "left", edges=edges)
    monkeypatch.setattr(mp_module, "HALVES_MIN_NODES", 10**9)
    mp_module._NODE_ARRAYS.clear()
    assert MPSystem(law, 4.0)._nodes.halves is None
    edges0 = rmt.bulk_edges(law, 4.0)
    out0 = rmt.outliers(law, 4.0, "left", edges=edges0)
    mp_module._NODE_ARRAYS.clear()
    assert_same_theory(edges, out, edges0, out0, 1e-11 * (law.scale + 1.0), 1e-9)
