"""The fast paths of the theory (issue 15) against the paths they replace and closed forms.

- ``MOMENTS_COMPLEX`` (split real/imaginary arithmetic) against the generic Numba loop and
  dense numpy solves, for complex ``G``;
- the blocked ``weighted_products`` against ``A @ B.T``, at sizes that leave remainders;
- ``bulk_density`` (tangent-predictor warm start) against the previous implementation, kept
  here as the reference, and against the closed-form Marchenko-Pastur density for ``D = I_m``.
"""

import numpy as np
import pytest

import rmt
from rmt.freeprob import closed_forms as cf
from rmt.freeprob import mp as mp_module
from rmt.freeprob.mp import MPSystem
from rmt.freeprob.spectrum import _continue_complex, _physical
from rmt.kernels._generated.freeprob_small import MOMENTS, MOMENTS_COMPLEX, SPIKE_SUMS_WIDE
from rmt.kernels.freeprob import PRODUCT_BLOCK, mp_moments, weighted_products

RTOL = 1e-12
WIDTHS = [1, 2, 3, 4]


def nodes(m, rng, N):
    """Symmetric ``D_i`` of size about 1, weights summing to one, and ``vech`` node-last."""
    A = rng.standard_normal((N, m, m))
    D = 0.5 * (A + np.swapaxes(A, 1, 2))
    w = rng.random(N)
    w /= w.sum()
    ia, ib = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(m))
    return D, w, ia, ib, np.ascontiguousarray(D[:, ia, ib].T)


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
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=RTOL * np.abs(ref).max())


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("N", [37, 1001])  # odd: the vectorised loops run their remainders
def test_complex_moments_match_generic_loop_and_numpy(m, N, rng):
    D, w, ia, ib, Dv = nodes(m, rng, N)
    B = rng.standard_normal((m, m))
    G = -0.2 * (B @ B.T / m + np.eye(m)) * (1.0 + 0.4j) + 0.05j * np.eye(m)
    p = ia.size
    EF_ref, JF_ref = numpy_moments(D, w, G, 0.5, ia, ib)
    EF0, JF0 = np.zeros((m, m), complex), np.zeros((p, p), complex)
    assert mp_moments(D, w, G, 0.5, ia, ib, True, EF0, JF0) == 0
    EF, JF = np.zeros((m, m), complex), np.zeros((p, p), complex)
    assert MOMENTS_COMPLEX[m](Dv, w, G, 0.5, True, EF, JF) == 0
    for got, ref in ((EF, EF_ref), (JF, JF_ref), (EF0, EF_ref), (JF0, JF_ref)):
        assert_close(got, ref)
    EF1, JF1 = np.zeros((m, m), complex), np.zeros((p, p), complex)
    assert MOMENTS_COMPLEX[m](Dv, w, G, 0.5, False, EF1, JF1) == 0
    assert_close(EF1, EF_ref)
    assert not np.any(JF1)  # without the Jacobian, JF is left alone


@pytest.mark.parametrize("m", WIDTHS)
def test_complex_moments_count_a_singular_node(m, rng):
    """``I + D_0 G / delta`` singular (``D_0 = e_0 e_0^T``, ``G = -delta I``): one bad node."""
    D, w, ia, ib, _ = nodes(m, rng, 37)
    D[0] = 0.0
    D[0, 0, 0] = 1.0
    Dv = np.ascontiguousarray(D[:, ia, ib].T)
    G = -2.0 * np.eye(m, dtype=complex)
    p = ia.size
    out = (np.zeros((m, m), complex), np.zeros((p, p), complex))
    assert MOMENTS_COMPLEX[m](Dv, w, G, 0.5, True, *out) >= 1


def test_complex_table_covers_the_unrolled_widths():
    assert sorted(MOMENTS_COMPLEX) == sorted(MOMENTS) == WIDTHS


@pytest.mark.parametrize("shape", [(1, 1), (3, 6), (10, 12), (15, 21)])
def test_blocked_weighted_products_match_numpy(shape, rng):
    nq, nu = shape
    N = 3 * PRODUCT_BLOCK + 17  # full blocks and a remainder
    A, B = rng.standard_normal((nq, N)), rng.standard_normal((nu, N))
    out = np.full((nq, nu), np.nan)  # the kernel must overwrite, not accumulate into, out
    weighted_products(A, B, out)
    np.testing.assert_allclose(out, A @ B.T, rtol=1e-12, atol=1e-12 * np.sqrt(N))


def previous_bulk_density(law, delta, x, eta):
    """The density loop before the tangent predictor: Newton from the previous ``G``, else
    continuation in ``Im zeta`` (the reference of the fast path)."""
    mp = MPSystem(law, delta)
    atom = max(0.0, 1.0 - mp.delta * law.expected_rank / law.m)
    out, prev = np.empty(x.size), None
    for i, xi in enumerate(x - law.shift):
        zeta = complex(xi, eta)
        st = None if prev is None else mp.newton(zeta, prev.G)
        if st is None or not _physical(st.G):
            st, _ = _continue_complex(mp, zeta)
        prev = st
        s = np.trace(st.G) / law.m
        out[i] = s.imag / np.pi - atom * eta / (np.pi * (xi * xi + eta * eta))
    return np.clip(out, 0.0, None)


@pytest.mark.parametrize("m", [1, 3, 4])
@pytest.mark.parametrize("delta", [0.5, 3.0])
def test_density_of_identity_law_is_marchenko_pastur(m, delta):
    """``D = I_m``: ``G = g I`` with the scalar MP ``g``, whatever ``m`` (closed form)."""
    law = rmt.SpikeLaw(np.zeros((1, 1)), np.eye(m)[None], theta_dims=1)
    lo, hi = cf.mp_edges(delta)
    x = np.linspace(lo - 0.2, hi + 0.2, 61)
    x = x[np.abs(x) > 1e-3]
    res = rmt.bulk_density(law, delta, x)
    np.testing.assert_allclose(res.density, cf.mp_density(x, delta), atol=1e-8)
    assert abs(res.atom - cf.mp_atom(delta)) < 1e-12


@pytest.mark.parametrize("m", [2, 3])
def test_density_matches_the_previous_implementation(m, monkeypatch):
    """A quadrature law of the softplus/Huber network (complex split kernels, predictor warm
    starts) against the loop it replaced, on the complex kernels it used, across both edges."""
    net = rmt.TwoLayerNet(m, "softplus", "huber", huber_delta=1.0)
    W = np.random.default_rng(3).standard_normal((20, m)) * 0.4
    law = rmt.SpikeLaw.from_network(
        rmt.MultiIndexModel("phase_retrieval"), net, W.T @ W, nodes="quadrature", order=12
    )
    lo, hi = rmt.bulk_edges(law, 3.0)
    x = np.linspace(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo), 41)
    eta = 1e-3 * (hi - lo)  # a quadrature law: smooth at the scale of the grid
    new = rmt.bulk_density(law, 3.0, x, eta=eta)
    with monkeypatch.context() as patch:  # the complex-typed real-form kernels of before
        patch.setattr(mp_module, "MOMENTS_COMPLEX", MOMENTS)
        ref = previous_bulk_density(law, 3.0, x, eta)
    np.testing.assert_allclose(new.density, ref, rtol=1e-9, atol=1e-9 * ref.max())
    assert ref.max() > 0.5 / (hi - lo)  # the grid crosses the bulk, not only its outside


def test_wide_spike_sums_match_nodes_and_numpy(rng):
    """``m = 3``, ``K = 4`` (10 weight rows) fused against per-node ``F``, ``F G' F`` and numpy."""
    m, n_pairs = 3, 10
    D, w, ia, ib, Dv = nodes(m, rng, 1001)
    B = rng.standard_normal((m, m))
    G = -0.2 * (B @ B.T / m + np.eye(m))
    Gp = G @ G
    ZZ = rng.standard_normal((n_pairs, D.shape[0])) / D.shape[0]
    Y = np.empty((n_pairs, 2 * ia.size))
    assert SPIKE_SUMS_WIDE[(m, n_pairs)](Dv, ZZ, G, Gp, 1 / 3, Y) == 0
    F = np.linalg.solve(np.eye(m) + D @ G / 3, D)
    V = np.concatenate([F[:, ia, ib].T, (F @ Gp @ F)[:, ia, ib].T])
    np.testing.assert_allclose(Y, ZZ @ V.T, rtol=1e-12, atol=1e-12 * np.abs(ZZ @ V.T).max())


def test_outliers_with_wide_fused_sums_match_the_two_pass_form(monkeypatch):
    """An ``m = 3`` Monte-Carlo law (``K = 4``): outliers with the fused sums against the
    per-node kernel followed by the blocked product, and against the generic loops."""
    net = rmt.TwoLayerNet(3, "softplus", "huber", huber_delta=1.0)
    W = np.random.default_rng(5).standard_normal((20, 3)) * 0.4
    law = rmt.SpikeLaw.from_network(
        rmt.MultiIndexModel("phase_retrieval"), net, W.T @ W, nodes="monte_carlo", n_mc=4000
    )
    assert law.K == 4 and MPSystem(law, 3.0).unrolled
    out = rmt.outliers(law, 3.0, side="left")
    with monkeypatch.context() as patch:
        patch.setattr(mp_module, "SPIKE_SUMS_WIDE", {})
        two_pass = rmt.outliers(law, 3.0, side="left")
        patch.setattr(mp_module, "MOMENTS", {})  # m > 4 path: the generic Numba loops
        generic = rmt.outliers(law, 3.0, side="left")
    assert len(out) == len(two_pass) == len(generic) > 0
    for a, b, c in zip(out, two_pass, generic):
        assert abs(a.value - b.value) < 1e-11 and abs(a.value - c.value) < 1e-10
        assert abs(a.overlap_theta - c.overlap_theta) < 1e-8
