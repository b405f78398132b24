"""The unrolled (MP) kernels for ``m <= 4`` against the generic loops and dense numpy.

Every kernel of ``rmt.kernels._generated.freeprob_small`` (moments with and without the Jacobian, per-node
``F`` and ``F G' F``, Cholesky pivots) is compared with the generic Numba loop it replaces and
with an independent numpy computation, for real and complex ``G``; the solvers (edges, outliers)
are compared with themselves run on the generic loops.
"""

import pathlib
import sys

import numpy as np
import pytest

import rmt
from rmt.freeprob import mp as mp_module
from rmt.freeprob.mp import MPSystem
from rmt.kernels._generated.freeprob_small import MOMENTS, PIVOTS, SPIKE_SUMS
from rmt.kernels.freeprob import min_pd_pivot, mp_moments, mp_residual, spike_moments

from .conftest import assert_same_theory

# the generators live in tools/ (run as scripts: ``python tools/gen_*.py``)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import gen_freeprob_small as gen
from codegen import GENERATED, same_syntax

RTOL = 1e-12
WIDTHS = [1, 2, 3, 4]
N_NODES = 37  # odd: the vectorised loops run their remainder iterations


def nodes(m, rng, N=N_NODES):
    """Symmetric ``D_i`` of size about 1, weights summing to one, and ``vech`` node-last."""
    A = rng.standard_normal((N, m, m))
    D = 0.5 * (A + np.swapaxes(A, 1, 2))
    w = rng.random(N)
    w /= w.sum()
    ia, ib = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(m))
    return D, w, ia, ib, np.ascontiguousarray(D[:, ia, ib].T)


def stieltjes_like(m, rng, dtype):
    """A symmetric ``G``, small enough that every ``I + D_i G / delta`` is well conditioned."""
    B = rng.standard_normal((m, m))
    G = -0.2 * (B @ B.T / m + np.eye(m))
    return G.astype(dtype) * (1.0 if dtype is float else 1.0 + 0.4j)


def numpy_moments(D, w, G, inv_delta, ia, ib):
    """``E[F]`` and ``JF[:, q] = vech E[F E_q F]`` by dense solves (reference)."""
    m = G.shape[0]
    F = np.linalg.solve(np.eye(m) + D @ G * inv_delta, D.astype(G.dtype))
    EF = np.einsum("n,nab->ab", w, F)
    JF = np.empty((ia.size, ia.size), dtype=G.dtype)
    for q in range(ia.size):
        E = np.zeros((m, m))
        E[ia[q], ib[q]] = E[ib[q], ia[q]] = 1.0
        JF[:, q] = np.einsum("n,nab->ab", w, F @ E @ F)[ia, ib]
    return EF, JF


def assert_close(got, ref):
    scale = np.abs(ref).max()
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=RTOL * scale)


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("dtype", [float, complex])
def test_moments_match_generic_loop_and_numpy(m, dtype, rng):
    D, w, ia, ib, Dv = nodes(m, rng)
    G = stieltjes_like(m, rng, dtype)
    p = ia.size
    EF, JF = np.zeros((m, m), dtype), np.zeros((p, p), dtype)
    assert MOMENTS[m](Dv, w, G, 0.5, True, EF, JF) == 0
    EF0, JF0 = np.zeros((m, m), dtype), np.zeros((p, p), dtype)
    assert mp_moments(D, w, G, 0.5, ia, ib, True, EF0, JF0) == 0
    EF_ref, JF_ref = numpy_moments(D, w, G, 0.5, ia, ib)
    for got in (EF, EF0):
        assert_close(got, EF_ref)
    for got in (JF, JF0):
        assert_close(got, JF_ref)
    EF1, JF1 = np.zeros((m, m), dtype), np.zeros((p, p), dtype)
    assert MOMENTS[m](Dv, w, G, 0.5, False, EF1, JF1) == 0
    assert_close(EF1, EF_ref)
    assert not np.any(JF1)  # without the Jacobian, JF is left alone


@pytest.mark.parametrize("m", WIDTHS)
def test_singular_node_is_counted(m, rng):
    """``I + D_0 G / delta`` singular (``D_0 = e_0 e_0^T``, ``G = -delta I``): one bad node."""
    D, w, ia, ib, _ = nodes(m, rng)
    D[0] = 0.0
    D[0, 0, 0] = 1.0
    Dv = np.ascontiguousarray(D[:, ia, ib].T)
    G = -2.0 * np.eye(m)
    p = ia.size
    args = (np.zeros((m, m)), np.zeros((p, p)))
    assert MOMENTS[m](Dv, w, G, 0.5, True, *args) >= 1
    assert mp_moments(D, w, G, 0.5, ia, ib, True, np.zeros((m, m)), np.zeros((p, p))) >= 1


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("K", [1, 2, 3])
def test_spike_sums_match_numpy(m, K, rng):
    D, w, _, _, Dv = nodes(m, rng)
    z = rng.standard_normal((D.shape[0], K))
    qa, qb = np.triu_indices(K)
    ZZ = np.ascontiguousarray((w[:, None] * z[:, qa] * z[:, qb]).T)
    G = stieltjes_like(m, rng, float)
    B = rng.standard_normal((m, m))
    Gp = B + B.T
    p = m * (m + 1) // 2
    Y = np.empty((qa.size, 2 * p))
    assert SPIKE_SUMS[(m, qa.size)](Dv, ZZ, G, Gp, 1 / 3, Y) == 0
    F = np.linalg.solve(np.eye(m) + D @ G / 3, D)
    ia, ib = np.triu_indices(m)
    V = np.concatenate([F[:, ia, ib], (F @ Gp @ F)[:, ia, ib]], axis=1)
    assert_close(Y, ZZ @ V)


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("scale", [0.05, 0.5, -0.5, 3.0])
def test_pivots_match_generic_loop_and_numpy(m, scale, rng):
    D, _, ia, ib, Dv = nodes(m, rng)
    B = rng.standard_normal((m, m))
    L = np.linalg.cholesky(B @ B.T + np.eye(m))
    pivots = np.empty(D.shape[0])
    bad = PIVOTS[m](Dv, L, scale, pivots)
    ref = min_pd_pivot(D, L, scale)
    C = np.eye(m) + scale * L.T @ D @ L
    definite = np.all(np.linalg.eigvalsh(C) > 0, axis=1)
    assert (bad == 0) == bool(np.all(definite))
    if bad == 0:
        node_pivots = np.diagonal(np.linalg.cholesky(C), axis1=1, axis2=2) ** 2
        assert_close(pivots, node_pivots.min(axis=1))
        assert_close(pivots.min(), ref)
    else:
        assert ref == -1.0


@pytest.mark.parametrize("m", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", [float, complex])
def test_residual_and_jacobian_match_numpy(m, dtype, rng):
    """``mp_residual`` against ``vech(-zeta I + E[F] - G^{-1})`` and the numpy sandwich."""
    D, w, ia, ib, _ = nodes(m, rng)
    law = rmt.SpikeLaw(np.zeros((D.shape[0], 1)), D, w)
    mp = MPSystem(law, 2.0)
    G = stieltjes_like(m, rng, dtype)
    zeta = -1.3 + (0.2j if dtype is complex else 0.0)
    EF, JF, bad = mp.moments(G)
    assert bad == 0
    R, J = np.empty(ia.size, dtype), np.empty((ia.size, ia.size), dtype)
    ok, scale, ginv_max = mp_residual(EF, JF, G, zeta, 0.5, ia, ib, R, J)
    Ginv = np.linalg.inv(G)
    assert ok
    assert_close(R, mp.vech(-zeta * np.eye(m) + EF - Ginv))
    assert_close(J, -JF / 2.0 + mp.sandwich(Ginv))
    assert abs(ginv_max - np.abs(Ginv).max()) <= 1e-12 * ginv_max
    assert abs(scale - (1 + abs(zeta) + np.abs(Ginv).max() + np.abs(EF).max())) <= 1e-12 * scale
    G[:, 0] = G[0, :] = 0.0  # singular
    assert not mp_residual(EF, JF, G, zeta, 0.5, ia, ib, R, J)[0]
    assert mp.residual_jacobian(G, zeta)[0] is None


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("K", [1, 2, 3, 4, 6])
def test_mp_system_spike_matrices_and_margins_match_generic(m, K, rng):
    """``MPSystem`` on the unrolled kernels (one fused kernel for ``K <= 3`` and for ``m = 3``,
    ``K = 4``; groups of fused kernels, the last padded, for 10 and 21 pairs) against the
    generic ``spike_moments``."""
    D, w, _, _, _ = nodes(m, rng)
    law = rmt.SpikeLaw(rng.standard_normal((D.shape[0], K)), D, w, theta_dims=1)
    mp = MPSystem(law, 2.0)
    assert mp.unrolled
    G = stieltjes_like(m, rng, float)
    B = rng.standard_normal((m, m))
    Gp = B @ B.T
    ES, ESp = mp.spike_matrices(G, Gp)
    Km = K * m
    ref, ref_p = np.zeros((Km, Km)), np.zeros((Km, Km))
    spike_moments(mp.D, mp.w, mp.zhat, G, Gp, 0.5, ref, ref_p)
    assert_close(ES, 0.5 * (ref + ref.T))
    assert_close(ESp, 0.5 * (ref_p + ref_p.T))
    L = np.linalg.cholesky(-G)  # left branch: G > 0; right branch: G < 0
    assert_close(mp.pole_margin(-G, -1), min_pd_pivot(mp.D, L, 0.5))
    assert_close(mp.pole_margin(G, 1), min_pd_pivot(mp.D, L, -0.5))


def small_network_law(m):
    """A quadrature law with ``K = 3`` for width ``m`` (softplus, Huber; low order: fast)."""
    net = rmt.TwoLayerNet(m, "softplus", "huber", huber_delta=2.0, a=np.ones(m))
    C = np.array([[0.5, 0.3, 0.1, -0.2], [0.0, 0.25, -0.35, 0.2]])[:, :m]
    Q = C.T @ C  # rank 2: K = 1 + 2
    model = rmt.MultiIndexModel("phase_retrieval")
    return rmt.SpikeLaw.from_network(model, net, Q, nodes="quadrature", order=14)


@pytest.mark.parametrize("m", [3, 4])
def test_edges_and_outliers_agree_with_generic_kernels(m, monkeypatch):
    """The whole solver on the unrolled kernels and on the generic loops (m = 3, 4)."""
    law = small_network_law(m)
    delta = 4.0
    edges = rmt.bulk_edges(law, delta)
    out = rmt.outliers(law, delta, side="left", edges=edges)
    with monkeypatch.context() as patch:
        patch.setattr(mp_module, "MOMENTS", {})
        assert not MPSystem(law, delta).unrolled
        edges0 = rmt.bulk_edges(law, delta)
        out0 = rmt.outliers(law, delta, side="left", edges=edges0)
    assert_same_theory(edges, out, edges0, out0, 1e-10 * (law.scale + 1.0), 1e-8)


def test_generated_module_is_up_to_date():
    """``_generated/freeprob_small.py`` has the syntax tree of what the generator writes now
    (formatting aside, so no ruff version can break it), and is the module that is imported."""
    committed = GENERATED / "freeprob_small.py"
    assert pathlib.Path(sys.modules[MOMENTS[1].py_func.__module__].__file__) == committed
    text = committed.read_text()
    assert text.startswith("# GENERATED by tools/gen_freeprob_small.py")
    assert same_syntax(text, gen.module_source())
    assert not same_syntax(text, gen.module_source().replace("min(", "max(", 1))
    assert sorted(MOMENTS) == sorted(PIVOTS) == list(gen.WIDTHS)
    assert sorted(SPIKE_SUMS) == [(m, k) for m in gen.WIDTHS for k in gen.SPIKE_PAIRS]


def test_m1_pole_margin_without_a_pass_matches_the_pivot_kernel(rng):
    """For ``m = 1`` ``MPSystem.pole_margin`` reads the extreme node of ``law.node_range``
    instead of running the pivot kernel over the nodes: the same value on both branches,
    ``-1`` past a pole and for a ``G`` of the wrong sign."""
    D = rng.standard_normal(500)
    law = rmt.SpikeLaw(rng.standard_normal((500, 1)), D)
    mp = MPSystem(law, 2.0)
    seen_pole = False
    for g in (0.3, 1.5, 4.0, 10.0):  # past -delta / D_min (about 0.7) the left branch has a pole
        for side, G in ((-1, g), (1, -g), (-1, -g), (1, g)):
            if -side * G <= 0.0:
                assert mp.pole_margin(np.array([[G]]), side) == -1.0
                continue
            pivots = np.empty(500)
            bad = PIVOTS[1](mp.Dv, np.array([[np.sqrt(-side * G)]]), -side / 2.0, pivots)
            expected = -1.0 if bad else pivots.min()
            seen_pole |= bool(bad)
            got = mp.pole_margin(np.array([[G]]), side)
            assert got == pytest.approx(expected, rel=1e-13, abs=1e-15)
    assert seen_pole
