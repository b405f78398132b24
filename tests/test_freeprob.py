"""The free-probability engine against closed forms, published values and scipy quadrature."""

import numpy as np
import pytest
from scipy import integrate, optimize

import rmt
from rmt.freeprob import closed_forms as cf
from rmt.freeprob.mp import ConvergenceError, MPSystem
from rmt.kernels.freeprob import mp_moments, spike_moments

PHASE = rmt.MultiIndexModel("phase_retrieval")


def constant_law(m=1):
    return rmt.SpikeLaw(np.zeros((1, 1)), np.eye(m)[None], theta_dims=1)


# -- Marchenko-Pastur (D = 1) --------------------------------------------------------------
@pytest.mark.parametrize("delta", [1.5, 2.0, 4.0, 10.0])
@pytest.mark.parametrize("m", [1, 2])
def test_identity_law_reproduces_marchenko_pastur_edges(delta, m):
    lo, hi = rmt.bulk_edges(constant_law(m), delta)
    ref = cf.mp_edges(delta)
    assert abs(lo - ref[0]) < 1e-8 and abs(hi - ref[1]) < 1e-8


@pytest.mark.parametrize("delta", [0.5, 2.0, 4.0])
def test_identity_law_reproduces_marchenko_pastur_density(delta):
    lo, hi = cf.mp_edges(delta)
    x = np.linspace(lo - 0.2, hi + 0.2, 41)
    x = x[np.abs(x) > 1e-3]
    res = rmt.bulk_density(constant_law(), delta, x)
    np.testing.assert_allclose(res.density, cf.mp_density(x, delta), atol=1e-8)
    assert abs(res.atom - cf.mp_atom(delta)) < 1e-12


def mp_scalar_stieltjes(zeta, delta):
    """Root of (zeta/delta) s^2 + (zeta - 1 + 1/delta) s + 1 = 0 with Im s > 0 (or s -> 0 at -inf)."""
    roots = np.roots([zeta / delta, zeta - 1.0 + 1.0 / delta, 1.0])
    if np.imag(zeta) != 0:
        return roots[np.argmax(np.imag(roots))]
    return roots[np.argmin(np.abs(roots))]


@pytest.mark.parametrize("zeta", [1.0 + 0.5j, 0.3 + 1e-3j, 2.5 + 2j, -0.7 + 0j, 5.0 + 0j])
def test_stieltjes_matches_marchenko_pastur_quadratic(zeta):
    delta = 2.0
    res = rmt.stieltjes(constant_law(2), delta, zeta)
    ref = mp_scalar_stieltjes(zeta, delta)
    np.testing.assert_allclose(np.asarray(res), ref * np.eye(2), atol=1e-10)
    assert res.converged and res.residual < 1e-12


def test_real_zeta_inside_the_bulk_is_refused():
    with pytest.raises(ValueError, match="lies in the bulk"):
        rmt.stieltjes(constant_law(), 2.0, 1.0)


# -- m = 1: the fold against the closed-form inverse zeta(s) -------------------------------
def scalar_zeta(s, T_vals, w, delta):
    return -1.0 / s + np.sum(w * T_vals / (1.0 + T_vals * s / delta))


def test_m1_fold_agrees_with_closed_form_inverse():
    """Edges = critical points of zeta(s) = -1/s + E[T/(1+Ts/delta)] (Silverstein-Choi)."""
    T_vals = np.array([-1.5, 0.4, 2.0, 3.0])
    w = np.array([0.2, 0.3, 0.4, 0.1])
    law = rmt.SpikeLaw(np.zeros((4, 1)), T_vals, w)
    delta = 3.0
    lo, hi = rmt.bulk_edges(law, delta)
    # left: s in (0, delta/1.5), zeta has a maximum; right: s in (-delta/3, 0), a minimum
    left = optimize.minimize_scalar(
        lambda s: -scalar_zeta(s, T_vals, w, delta),
        bounds=(1e-6, delta / 1.5 - 1e-9),
        method="bounded",
        options={"xatol": 1e-12},
    )
    right = optimize.minimize_scalar(
        lambda s: scalar_zeta(s, T_vals, w, delta),
        bounds=(-delta / 3.0 + 1e-9, -1e-6),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert abs(lo - (-left.fun)) < 1e-9
    assert abs(hi - right.fun) < 1e-9


# -- kernels and Jacobian ------------------------------------------------------------------
@pytest.mark.parametrize("m", [1, 2, 3])
def test_moment_kernel_matches_numpy_reference(m, rng):
    N = 50
    A = rng.standard_normal((N, m, m))
    D = A + np.swapaxes(A, 1, 2)
    w = rng.random(N)
    w /= w.sum()
    B = rng.standard_normal((m, m))
    G = (B @ B.T + np.eye(m)) * (0.3 + 0.2j)
    ia, ib = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(m))
    EF, JF = np.zeros((m, m), complex), np.zeros((ia.size, ia.size), complex)
    assert mp_moments(D, w, G, 0.5, ia, ib, True, EF, JF) == 0
    F = np.linalg.solve(np.eye(m) + D @ G * 0.5, D)
    np.testing.assert_allclose(EF, np.einsum("n,nab->ab", w, F), rtol=1e-12, atol=1e-12)
    for q in range(ia.size):
        E = np.zeros((m, m))
        E[ia[q], ib[q]] = E[ib[q], ia[q]] = 1.0
        ref = np.einsum("n,nab->ab", w, F @ E @ F)
        np.testing.assert_allclose(JF[:, q], ref[ia, ib], rtol=1e-11, atol=1e-12)


def test_spike_kernel_matches_numpy_reference(rng):
    N, m, K = 40, 2, 3
    A = rng.standard_normal((N, m, m))
    D = A + np.swapaxes(A, 1, 2)
    z = rng.standard_normal((N, K))
    w = np.full(N, 1.0 / N)
    G = np.array([[0.2, 0.05], [0.05, 0.1]])
    Gp = np.array([[1.0, 0.3], [0.3, 2.0]])
    ES, ESp = np.zeros((K * m, K * m)), np.zeros((K * m, K * m))
    spike_moments(D, w, z, G, Gp, 1 / 3, ES, ESp)
    F = np.linalg.solve(np.eye(m) + D @ G / 3, D)
    zz = np.einsum("na,nb->nab", z, z)
    ref = np.einsum("n,nab,ncd->acbd", w, zz, F).reshape(K * m, K * m)
    ref_p = np.einsum("n,nab,ncd->acbd", w, zz, F @ Gp @ F).reshape(K * m, K * m)
    np.testing.assert_allclose(ES, ref, atol=1e-12)
    np.testing.assert_allclose(ESp, ref_p, atol=1e-12)


def test_newton_jacobian_matches_finite_differences(rng):
    A = rng.standard_normal((30, 3, 3))
    law = rmt.SpikeLaw(rng.standard_normal((30, 2)), A + np.swapaxes(A, 1, 2))
    mp = MPSystem(law, 2.0)
    G = np.diag([0.1, 0.15, 0.12]) + 0.01
    _, J, _ = mp.residual_jacobian(G, -3.0)
    h = 1e-7
    for q in range(mp.e.size):
        dg = np.zeros(mp.e.size)
        dg[q] = h
        R1, _, _ = mp.residual_jacobian(G + mp.unvech(dg), -3.0)
        R2, _, _ = mp.residual_jacobian(G - mp.unvech(dg), -3.0)
        np.testing.assert_allclose((R1 - R2) / (2 * h), J[:, q], rtol=1e-6, atol=1e-6)


# -- scalar spectral estimator: published values (Lu & Li 2017; docs/theory.md section 4) --------
def lu_li_law():
    return rmt.SpikeLaw.spectral(PHASE, lambda y: 1.0 - 1.0 / y, T_bounds=(-np.inf, 1.0))


@pytest.mark.parametrize("delta, value, overlap", [(1.0, 1.000, 0.230), (2.0, 0.500, 0.639)])
def test_lu_li_published_outlier_and_overlap(delta, value, overlap):
    """Published to three decimals (0.2307 is printed as 0.230: truncated, so tolerance 1e-3);
    the same numbers by adaptive quad agree to 1e-9."""
    out = rmt.outliers(lu_li_law(), delta, side="right")
    assert len(out) == 1
    assert abs(out[0].value - value) < 1e-3
    assert abs(out[0].overlap_theta - overlap) < 1e-3
    assert out[0].overlap_spike == pytest.approx(out[0].overlap_theta)
    _, value_ref, overlap_ref = scalar_reference_outlier(lambda y: 1.0 - 1.0 / y, [0.0], delta)
    assert abs(out[0].value - value_ref) < 1e-9
    assert abs(out[0].overlap_theta - overlap_ref) < 1e-9


def test_lu_li_published_threshold():
    res = rmt.bbp_threshold(lu_li_law(), side="right", delta_range=(0.1, 5.0))
    assert res.found and abs(res.delta - 0.5) < 1e-8


@pytest.mark.parametrize("c", [2.0, 3.0])
def test_boundary_threshold_c_over_two_with_exact_supremum(c):
    """T = (y-1)/(y+c-1): sup T = 1 only as y -> inf; with T_bounds the threshold is c/2."""
    law = rmt.SpikeLaw.spectral(
        PHASE, lambda y: (y - 1) / (y + c - 1), T_bounds=(-1.0 / (c - 1.0), 1.0)
    )
    res = rmt.bbp_threshold(law, side="right", delta_range=(0.2, 5.0))
    assert res.found and abs(res.delta - c / 2) < 1e-8
    out = rmt.outliers(law, 1.1 * c / 2, side="right")
    assert len(out) == 1 and out[0].overlap_theta > 0


def test_boundary_threshold_without_supremum_is_not_determined():
    """Without T_bounds the largest node would set the edge (and a threshold 0.958 instead of
    c/2 = 1): the edge is reported as not determined instead of as a biased number."""
    c = 2.0
    law = rmt.SpikeLaw.spectral(PHASE, lambda y: (y - 1) / (y + c - 1))
    with pytest.raises(ConvergenceError, match="not determined"):
        rmt.bbp_threshold(law, side="right", delta_range=(0.2, 5.0))


# -- non-smooth preprocessing: adaptive nodes against scipy.integrate.quad ----------------
def quad_expect(f, kinks):
    pts = sorted({k for k in kinks if -12 < k < 12})
    val, _ = integrate.quad(
        lambda z: f(z) * np.exp(-z * z / 2) / np.sqrt(2 * np.pi),
        -12,
        12,
        points=pts or None,
        limit=400,
        epsabs=1e-13,
        epsrel=1e-12,
    )
    return val


def scalar_reference_outlier(T, kinks, delta):
    """docs/theory.md section 4, m = K = 1, every expectation by adaptive quad (independent code)."""

    def EF(s, p):
        return quad_expect(lambda z: (z * z) ** p * T(z * z) / (1 + T(z * z) * s / delta), kinks)

    def EF2(s, p):
        return quad_expect(
            lambda z: (z * z) ** p * (T(z * z) / (1 + T(z * z) * s / delta)) ** 2, kinks
        )

    def dzeta(s):
        return 1 / s**2 - EF2(s, 0) / delta

    tmax = T(144.0)
    s_pole = -delta / tmax
    s_edge = optimize.brentq(dzeta, s_pole * (1 - 1e-9), -1e-3, xtol=1e-14)
    s_out = optimize.brentq(lambda s: s * (EF(s, 1) - EF(s, 0)) + 1, s_edge, -1e-4, xtol=1e-14)
    value = -1 / s_out + EF(s_out, 0)
    overlap = 1 / (1 + EF2(s_out, 1) / (delta * dzeta(s_out)))
    return -1 / s_edge + EF(s_edge, 0), value, overlap


NONSMOOTH = {
    "min": (lambda y: np.minimum(y, 3.0) - 1.0, [-np.sqrt(3), np.sqrt(3)]),
    "indicator": (lambda y: (y > 2.0) - 0.3, [-np.sqrt(2), np.sqrt(2)]),
}


@pytest.mark.parametrize("name", sorted(NONSMOOTH))
def test_nonsmooth_preprocessing_matches_adaptive_quad(name):
    T, kinks = NONSMOOTH[name]
    delta = 3.0
    edge_ref, value_ref, overlap_ref = scalar_reference_outlier(T, kinks, delta)
    law = rmt.SpikeLaw.spectral(PHASE, lambda y: np.asarray(T(y), dtype=float))
    hi = rmt.bulk_edges(law, delta).hi
    out = rmt.outliers(law, delta, side="right")
    assert abs(hi - edge_ref) < 1e-7 * abs(edge_ref)
    assert abs(out[0].value - value_ref) < 1e-7 * abs(value_ref)
    assert abs(out[0].overlap_theta - overlap_ref) < 1e-7
    # plain Gauss-Hermite is visibly off across the kinks
    gh = rmt.SpikeLaw.spectral(PHASE, lambda y: np.asarray(T(y), dtype=float), nodes="quadrature")
    assert abs(rmt.bulk_edges(gh, delta).hi - edge_ref) > 1e-3 * abs(edge_ref)


# -- unbounded curvature (docs/theory.md section 4) -----------------------------------------------
def test_unbounded_side_is_reported():
    net = rmt.TwoLayerNet(1, "softplus", "square", a=np.array([1.0]))
    law = rmt.SpikeLaw.from_network(PHASE, net, np.array([[0.5]]))
    assert law.unbounded == (True, False)
    lo, hi = rmt.bulk_edges(law, 2.0)
    assert lo == -np.inf and np.isfinite(hi)
    out = rmt.outliers(law, 2.0, side="left")
    assert out == [] and "unbounded" in out.reason
    thr = rmt.bbp_threshold(law, side="left")
    assert not thr.found and thr.delta == np.inf and "unbounded" in thr.reason


def test_bounded_network_law_is_not_flagged():
    net = rmt.TwoLayerNet(2, "tanh", "huber", a=np.array([1.0, 1.0]))
    law = rmt.SpikeLaw.from_network(PHASE, net, np.diag([0.5, 0.3]))
    assert law.unbounded == (False, False)


# -- input validation -------------------------------------------------------------------------
def test_bad_inputs_raise():
    law = constant_law()
    with pytest.raises(ValueError, match="delta"):
        rmt.bulk_edges(law, -1.0)
    with pytest.raises(TypeError, match="SpikeLaw"):
        rmt.bulk_edges(np.eye(2), 1.0)
    with pytest.raises(ValueError, match="side"):
        rmt.outliers(law, 2.0, side="top")
    with pytest.raises(ValueError, match="symmetric"):
        rmt.SpikeLaw(np.zeros((1, 1)), np.array([[[0.0, 1.0], [0.0, 0.0]]]))
    with pytest.raises(ValueError, match="weights"):
        rmt.SpikeLaw(np.zeros((2, 1)), np.ones(2), weights=[0.7, 0.7])
    with pytest.raises(ValueError, match="positive semidefinite"):
        rmt.SpikeLaw.from_network(PHASE, rmt.TwoLayerNet(1), np.array([[0.1]]), M=np.array([[1.0]]))
    with pytest.raises(ValueError, match="delta_range"):
        rmt.bbp_threshold(law, delta_range=(2.0, 1.0))


@pytest.fixture(scope="module")
def softplus_huber_law():
    """The law at the softplus/Huber m = 2 population point of phase retrieval (the demo's)."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, "softplus", "huber")
    spec = rmt.population_point(model, net)
    return rmt.SpikeLaw.from_network(model, net, spec.Q, spec.M)


def test_edge_stays_on_the_physical_branch_at_small_delta(softplus_huber_law):
    # softplus/Huber m = 2 at its population point, delta = 0.335: a long continuation step
    # once landed on another real branch of (MP) whose fold lies 4e-5 away.  That gave a wrong
    # G at the edge (off-diagonal of the wrong sign) and a left outlier (-0.738, overlap 0.75)
    # that simulations do not show (their bottom eigenvector carries 0.02 of Theta*).
    # Reference: G by continuation in Im zeta from far above (stieltjes at x + 1e-9 i), which
    # shares no code path with the fold search; near a square-root edge G moves by O(sqrt(eps)).
    law = softplus_huber_law
    edges = rmt.bulk_edges(law, 0.335)
    for eps in (1e-4, 1e-6):
        G = rmt.stieltjes(law, 0.335, complex(edges.lo - eps, 1e-9)).G
        np.testing.assert_allclose(edges.G_lo, G.real, atol=30 * np.sqrt(eps))
    assert len(rmt.outliers(law, 0.335, side="left", edges=edges)) == 0


def test_edge_G_is_the_limit_of_the_stieltjes_transform_across_small_delta(
    softplus_huber_law,
):
    # the same check on a grid of delta where the bulk meets the atom at 0 (D singular on a
    # set of positive mass for delta < 1): every fold must be that of the physical branch
    law = softplus_huber_law
    for delta in [0.3346, 0.4, 0.48, 0.55, 0.689, 0.8, 0.988, 1.42]:
        edges = rmt.bulk_edges(law, delta)
        for edge, G_edge, out in ((edges.lo, edges.G_lo, -1), (edges.hi, edges.G_hi, 1)):
            eps = 1e-6 * max(1.0, abs(edge))
            G = rmt.stieltjes(law, delta, complex(edge + out * eps, 1e-10)).G
            np.testing.assert_allclose(G_edge, G.real, atol=0.02 * (1 + np.abs(G_edge).max()))


@pytest.mark.parametrize("delta", [1.0, 4.0])
def test_blocks_sharing_one_range_put_an_atom_at_zero_at_every_delta(delta):
    """``D_i = c_i a a^T`` for every node (tanh at ``W = 0``): ``H = a a^T (x) S_c`` vanishes on
    ``a^perp (x) R^d``, an atom of mass 1/2 at 0 for m = 2 at every ``delta`` (also where
    ``delta E[rank D] = delta > m``).  The left end of the spectrum is that atom; dense ``eigh``
    of a simulated ``H`` (d = 150) has ``d`` eigenvalues at 0 and none below, and the right
    edge agrees with its top eigenvalue within the ``d^{-2/3}`` edge fluctuations."""
    rng = np.random.default_rng(3)
    a = np.array([1.0, 1.0]) / np.sqrt(2)
    c = 1.0 + 0.5 * rng.random(4000)
    D = c[:, None, None] * np.outer(a, a)
    law = rmt.SpikeLaw(rng.standard_normal((4000, 1)), D, None, 1)
    assert law.common_rank == 1
    edges = rmt.bulk_edges(law, delta)
    assert edges.lo == 0.0 and edges.lo_kind == "atom"
    d = 150
    n = int(delta * d)
    X = rng.standard_normal((n, d))
    w = 1.0 + 0.5 * rng.random(n)
    H = np.kron(np.outer(a, a), (X.T * w) @ X / n)
    ev = np.linalg.eigvalsh(H)
    assert np.sum(np.abs(ev) < 1e-10) >= d and ev[0] > -1e-10
    assert abs(edges.hi - ev[-1]) <= 3 * d ** (-2 / 3) * ev[-1]
