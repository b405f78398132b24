"""The fast paths of the theory against the paths they replace and closed forms.

- ``MOMENTS_COMPLEX`` (split real/imaginary arithmetic) against the generic Numba loop and
  dense numpy solves, for complex ``G``;
- ``bulk_density`` (tangent-predictor warm start) against the previous implementation, kept
  here as the reference, and against the closed-form Marchenko-Pastur density for ``D = I_m``;
- the serial curvature kernel against the parallel one (bit-identical) and a numpy closed form;
- the adaptive refinement against the previous implementation (identical nodes and weights),
  kept here, and against closed-form integrals across a kink and a jump;
- ``probe_unbounded``'s Gershgorin-filtered extremes against ``eigvalsh`` over every block;
- a sweep's law of a population point: built once, predictions as from each sample's ``W``.
"""

import numpy as np
import pytest

import rmt
from rmt.freeprob import closed_forms as cf
from rmt.freeprob import mp as mp_module
from rmt.freeprob import nodes as nodes_module
from rmt.freeprob.mp import MPSystem
from rmt.freeprob.spectrum import _continue_complex, _physical
from rmt.kernels._generated.freeprob_small import MOMENTS, MOMENTS_COMPLEX, SPIKE_NODES
from rmt.kernels.freeprob import mp_moments

from .test_freeprob_kernels import numpy_moments

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


@pytest.mark.parametrize("m", WIDTHS)
def test_spike_nodes_match_numpy_in_their_block_workspace(m, rng):
    """``SPIKE_NODES``: per-node ``vech F``, ``vech F G' F`` in the block workspace against
    numpy solves (1001 nodes: the last block padded), the padding zero, the weight rows
    ``w zhat_q zhat_r`` of the workspace (``fill_spike_workspace``) against numpy's products,
    and the batched product over blocks against ``ZZ @ V^T``."""
    D, w, ia, ib, Dv = nodes(m, rng, 1001)
    zhat = rng.standard_normal((D.shape[0], 4))  # K = 4: 10 weight rows
    qa, qb = np.triu_indices(4)
    ZZ = (w[:, None] * zhat[:, qa] * zhat[:, qb]).T
    B = rng.standard_normal((m, m))
    G = -0.2 * (B @ B.T / m + np.eye(m))
    Gp = G @ G
    W, blocks, ZZb = mp_module._spike_workspace(Dv, w, zhat)
    N = D.shape[0]
    got_zz = ZZb.transpose(1, 0, 2).reshape(ZZ.shape[0], -1)
    np.testing.assert_allclose(got_zz[:, :N], ZZ, rtol=1e-15, atol=0.0)
    assert not np.any(got_zz[:, N:])
    assert SPIKE_NODES[m](W, blocks.shape[0], G, Gp, 1 / 3) == 0
    p = ia.size
    F = np.linalg.solve(np.eye(m) + D @ G / 3, D)
    V = np.concatenate([F[:, ia, ib].T, (F @ Gp @ F)[:, ia, ib].T])  # 2p x N
    got = blocks[:, p:, :].transpose(1, 0, 2).reshape(2 * p, -1)
    np.testing.assert_allclose(got[:, :N], V, rtol=1e-12, atol=1e-12 * np.abs(V).max())
    assert not np.any(got[:, N:])
    Y = np.matmul(ZZb, blocks[:, p:, :].transpose(0, 2, 1)).sum(axis=0)
    ref = ZZ @ V.T
    np.testing.assert_allclose(Y, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("m,K", [(3, 4), (4, 5)])
def test_outliers_with_the_spike_node_kernels_match_the_generic_loops(m, K, monkeypatch):
    """Monte-Carlo laws with ``K = 4, 5`` (10 and 15 weight rows: the per-node kernels and the
    batched product) against the generic Numba loops of ``m > 4``."""
    net = rmt.TwoLayerNet(m, "softplus", "huber", huber_delta=1.0)
    W = np.random.default_rng(5).standard_normal((20, m)) * 0.4
    law = rmt.SpikeLaw.from_network(
        rmt.MultiIndexModel("phase_retrieval"), net, W.T @ W, nodes="monte_carlo", n_mc=4000
    )
    assert law.K == K and MPSystem(law, 3.0).unrolled
    out = rmt.outliers(law, 3.0, side="left")
    with monkeypatch.context() as patch:
        patch.setattr(mp_module, "MOMENTS", {})  # m > 4 path: the generic Numba loops
        generic = rmt.outliers(law, 3.0, side="left")
    assert len(out) == len(generic) > 0
    for a, c in zip(out, generic):
        assert abs(a.value - c.value) < 1e-10
        assert abs(a.overlap_theta - c.overlap_theta) < 1e-8


# -- law construction: the serial curvature kernel and the adaptive refinement -------------------


def numpy_curvature(act, loss, U, y, a, c):
    """``D_i = l'' g g^T + diag(l' a sigma'')``, ``g = a sigma'(u_i)``, in plain numpy."""
    if act == "tanh":
        t = np.tanh(U)
        s, ds, d2s = t, 1 - t * t, -2 * t * (1 - t * t)
    else:  # softplus
        s, ds = np.logaddexp(0.0, U), 1.0 / (1.0 + np.exp(-U))
        d2s = ds * (1 - ds)
    r = s @ a - y
    if loss == "square":
        dl, d2l = r, np.ones_like(r)
    else:  # huber
        dl, d2l = np.clip(r, -c, c), (np.abs(r) <= c).astype(float)
    g = ds * a
    return d2l[:, None, None] * g[:, :, None] * g[:, None, :] + np.einsum(
        "ij,jk->ijk", dl[:, None] * a * d2s, np.eye(U.shape[1])
    )


@pytest.mark.parametrize("m", WIDTHS)
@pytest.mark.parametrize("act,loss", [("tanh", "square"), ("softplus", "huber")])
def test_serial_curvature_matches_parallel_kernel_and_numpy(m, act, loss, rng):
    from rmt.kernels.curvature import curvature_blocks_serial
    from rmt.kernels.hessian import curvature_blocks

    net = rmt.TwoLayerNet(m, act, loss, a=rng.standard_normal(m), huber_delta=0.7)
    N = 513
    U, y = 1.5 * rng.standard_normal((N, m)), rng.standard_normal(N) ** 2
    outs = []
    for kernel in (curvature_blocks_serial, curvature_blocks):
        D, f, dl = np.empty((N, m, m)), np.empty(N), np.empty(N)
        kernel(U, y, net.a, net.act_code, net.loss_code, net.huber_delta, D, f, dl)
        outs.append((D, f, dl))
    for got, ref in zip(outs[0], outs[1]):
        assert np.array_equal(got, ref)  # same arithmetic in the same order: bit-identical
    ref = numpy_curvature(act, loss, U, y, net.a, net.huber_delta)
    np.testing.assert_allclose(outs[0][0], ref, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(net.curvature(U, y), ref, rtol=1e-12, atol=1e-13)  # dispatch


def test_curvature_dispatch_is_the_same_on_both_sides_of_the_threshold(rng, monkeypatch):
    from rmt.problem import network

    net = rmt.TwoLayerNet(3, "softplus", "huber", huber_delta=0.5)
    U, y = rng.standard_normal((2000, 3)), rng.standard_normal(2000) ** 2
    serial = net.curvature(U, y)
    monkeypatch.setattr(network, "SERIAL_MAX_ROWS", 10)  # the parallel kernel
    parallel = net.curvature(U, y)
    assert np.array_equal(serial, parallel)
    np.testing.assert_allclose(
        serial, numpy_curvature("softplus", "huber", U, y, net.a, 0.5), rtol=1e-12, atol=1e-13
    )


# the adaptive refinement before it reused the halves' integrals and batched its calls (reference)
def old_gauss_legendre_panels(lo, hi, order):
    """Nodes and weights (times the Gaussian density) of Gauss-Legendre on each panel."""
    x, w = np.polynomial.legendre.leggauss(order)
    half = 0.5 * (hi - lo)
    mid = 0.5 * (hi + lo)
    pts = mid[:, None] + half[:, None] * x[None, :]
    wts = half[:, None] * w[None, :] * np.exp(-0.5 * pts**2) / np.sqrt(2.0 * np.pi)
    return pts, wts


def old_panel_integrals(func, lo, hi, owner, order):
    pts, wts = old_gauss_legendre_panels(lo, hi, order)
    vals = func(pts.ravel(), np.repeat(owner, order)).reshape(pts.shape[0], order, -1)
    return np.einsum("pn,pnq->pq", wts, vals), pts, wts


def old_extrapolation_weights(order):
    """Weights giving the interpolant through the Gauss-Legendre nodes at -1 and +1."""
    x, _ = np.polynomial.legendre.leggauss(order)
    out = np.ones((2, order))
    for row, t in enumerate((-1.0, 1.0)):
        for n in range(order):
            others = np.delete(x, n)
            out[row, n] = np.prod((t - others) / (x[n] - others))
    return out


def old_hidden_jump(func, lo, hi, owner, order):
    """A jump that no Gauss node of the panel sees: it sits between an end and the first node.

    The values just inside both ends must match the polynomial through the nodes."""
    pts, _ = old_gauss_legendre_panels(lo, hi, order)
    vals = func(pts.ravel(), np.repeat(owner, order)).reshape(pts.shape[0], order, -1)
    ends = np.stack([lo + 1e-12 * (hi - lo), hi - 1e-12 * (hi - lo)], axis=1)
    end_vals = func(ends.ravel(), np.repeat(owner, 2)).reshape(lo.size, 2, -1)
    pred = np.einsum("en,pnq->peq", old_extrapolation_weights(order), vals)
    return np.max(np.abs(end_vals - pred), axis=(1, 2)) > nodes_module.JUMP_TOL


def old_refine_panels(func, lo, hi, owner, order, tol, min_width, max_panels):
    """Bisect panels until each integral agrees with the sum over its halves (vectorised)."""
    pts_acc, wts_acc, own_acc = [], [], []
    while lo.size:
        small = hi - lo <= 1e-2
        out = []
        for sel, o in ((~small, order), (small, 3)):
            if not np.any(sel):
                continue
            a, h, ow = lo[sel], hi[sel], owner[sel]
            mid = a + nodes_module.SPLIT * (h - a)
            whole, _, _ = old_panel_integrals(func, a, h, ow, o)
            left, lp, lw = old_panel_integrals(func, a, mid, ow, o)
            right, rp, rw = old_panel_integrals(func, mid, h, ow, o)
            err = np.max(np.abs(whole - left - right), axis=1)
            ok = err <= tol
            if np.any(ok):
                ok[ok] = ~old_hidden_jump(func, a[ok], h[ok], ow[ok], o)
            done = ok | (h - a <= min_width)
            pts_acc += [lp[done].ravel(), rp[done].ravel()]
            wts_acc += [lw[done].ravel(), rw[done].ravel()]
            own_acc += [np.repeat(ow[done], o), np.repeat(ow[done], o)]
            out.append(
                (
                    np.concatenate([a[~done], mid[~done]]),
                    np.concatenate([mid[~done], h[~done]]),
                    np.tile(ow[~done], 2),
                )
            )
        lo, hi, owner = (np.concatenate([t[i] for t in out]) for i in range(3))
        if lo.size > max_panels:
            raise RuntimeError(
                f"adaptive Gauss-Legendre: more than {max_panels} open panels; "
                f"the integrand is not piecewise smooth at tolerance {tol}"
            )
    # adjacent halves sum to the panel integrals
    return np.concatenate(pts_acc), np.concatenate(wts_acc), np.concatenate(own_acc)


def kinked(z, j):
    """Kinks and a jump that move with the owner ``j``."""
    c = 0.3 + 0.11 * j
    return np.stack([np.abs(z - c), (z > 1.1 - c).astype(float), np.tanh(3 * z) * z], axis=1)


def nested_network_law(outer_order):
    net = rmt.TwoLayerNet(1, "softplus", "huber", huber_delta=1.0)
    model = rmt.MultiIndexModel("phase_retrieval")

    def curvature(pts):
        return net.curvature(0.6 * pts[:, 1:2], model.link(pts[:, :1], 0))

    return nodes_module.nested_nodes(curvature, 1, outer_order)


RULES = {
    "adaptive_1d": lambda: nodes_module.adaptive_gauss_1d(lambda z: kinked(z, 0)),
    "batch": lambda: nodes_module.adaptive_gauss_batch(kinked, 7, tol=1e-9),
    "nested_network": lambda: nested_network_law(24),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_refinement_gives_the_nodes_of_the_previous_implementation(rule, monkeypatch):
    new = RULES[rule]()
    with monkeypatch.context() as patch:
        patch.setattr(nodes_module, "_refine_panels", old_refine_panels)
        old = RULES[rule]()
    new = (new.points, new.weights) if hasattr(new, "points") else new
    old = (old.points, old.weights) if hasattr(old, "points") else old
    for a, b in zip(new, old):
        assert a.shape == b.shape and np.array_equal(a, b)


def test_refinement_integrates_a_kink_and_a_jump():
    """``E|z - c|`` and ``P(z > t)`` in closed form."""
    from scipy.stats import norm

    g = nodes_module.adaptive_gauss_1d(lambda z: kinked(z, 0))
    z, w, c, t = g.points[:, 0], g.weights, 0.3, 0.8
    assert abs(w @ np.abs(z - c) - (2 * norm.pdf(c) + c * (2 * norm.cdf(c) - 1))) < 1e-10
    assert abs(w @ (z > t) - norm.sf(t)) < 1e-10


# -- probe_unbounded: extreme eigenvalues over many blocks -------------------------------------


@pytest.mark.parametrize("m", WIDTHS)
def test_extreme_eigenvalues_equal_eigvalsh_over_all_blocks(m, rng):
    from rmt.freeprob.unbounded import _extreme_eigenvalues

    D, *_ = nodes(m, rng, 5000)
    cases = [D, D * np.eye(m), D[:, :1, :1] * np.ones((1, m, m)), 1e-3 * D]  # dense, diagonal,
    big = D.copy()  # rank one, small; and blocks at the clipped infinities of probe_unbounded
    big[7], big[11] = 1e300 * np.eye(m), -1e300 * np.eye(m)
    cases.append(big)
    for blocks in cases:
        eig = np.linalg.eigvalsh(blocks)
        lo, hi = _extreme_eigenvalues(blocks)
        assert abs(lo - eig.min()) <= 1e-14 * abs(eig.min()) + 1e-300
        assert abs(hi - eig.max()) <= 1e-14 * abs(eig.max()) + 1e-300


def previous_probe_unbounded(func, dims):
    """``probe_unbounded`` with ``eigvalsh`` over every block (the reference)."""
    from rmt.freeprob import unbounded as ub

    def extremes(points):
        with np.errstate(all="ignore"):
            D = np.nan_to_num(func(points), nan=0.0, posinf=1e300, neginf=-1e300)
        eig = np.linalg.eigvalsh(D)
        return eig.min(), eig.max()

    dirs = ub._directions(dims)
    lows, highs = np.array([extremes(r * dirs) for r in ub.RADII]).T
    return lows, highs


@pytest.mark.parametrize(
    "m,act,loss", [(1, "softplus", "huber"), (2, "quadratic", "huber"), (3, "tanh", "square")]
)
def test_probe_unbounded_matches_eigvalsh_over_every_block(m, act, loss):
    from rmt.freeprob import unbounded as ub

    net = rmt.TwoLayerNet(m, act, loss, huber_delta=1.0)
    model = rmt.MultiIndexModel("phase_retrieval")
    C = np.linalg.cholesky(0.3 * np.eye(m) + 0.1).T
    Mv = np.full((m, 1), 0.2)

    def curvature(pts):
        return net.curvature(pts[:, :1] @ Mv.T + pts[:, 1:] @ C, model.link(pts[:, :1], 0))

    lows, highs = previous_probe_unbounded(curvature, 1 + m)
    (below, above), reason = ub.probe_unbounded(curvature, 1 + m)
    assert f"min {np.array2string(lows, precision=3)}" in reason
    assert f"max {np.array2string(highs, precision=3)}" in reason
    dirs = ub._directions(1 + m)
    got = np.array([ub._extremes(curvature, r * dirs) for r in ub.RADII]).T
    ref = np.stack([lows, highs])  # block_eigenvalues (Jacobi) against LAPACK: m eps |D_i|
    assert np.all(np.abs(got - ref) <= 1e-14 * np.abs(ref))


# -- a sweep builds the law of a data-independent point once ---------------------------------


def test_sweep_builds_the_population_law_once_and_predicts_as_from_its_own_W(monkeypatch):
    """Four ``(delta, seed)`` points of a population point: one law, and the predictions of the
    law of each sample's own ``W^T W``, ``W^T Theta*`` (built independently, the reference)."""
    from rmt.experiments import sweep as sweep_module
    from rmt.experiments import theory as theory_module
    from rmt.experiments.simulation import simulate_point
    from rmt.thresholds.points import PointSpec, PopulationPoint

    config = rmt.RunConfig(d=60, deltas=(2.0, 3.0), seeds=(0, 1), width=2, n_eigs=2)
    Q = np.array([[0.3, 0.05], [0.05, 0.2]])
    spec = PointSpec(
        Q=Q,
        M=np.zeros((2, 1)),
        risk=0.0,
        converged=True,
        grad_norm=0.0,
        iterations=0,
        message="",
        risk_error=0.0,
        quadrature="quadrature",
        order=12,
        curvature=None,
    )
    point = PopulationPoint(spec)
    monkeypatch.setattr(theory_module, "_LAWS", type(theory_module._LAWS)())
    built, original = [], rmt.SpikeLaw.from_network.__func__

    def counting(cls, *args, **kwargs):
        built.append(args[2])
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(rmt.SpikeLaw, "from_network", classmethod(counting))
    got = {}
    for delta in config.deltas:
        for seed in config.seeds:
            sim = simulate_point(config, point, delta, seed)
            got[delta, seed] = sweep_module._theory_pair(config, sim, delta, point)[0], sim
    assert len(built) == 1 and np.array_equal(built[0], Q)  # one law for the four points
    monkeypatch.undo()
    for delta in config.deltas:
        th, sim = got[delta, 1]
        W, theta = sim.W, sim.data.theta
        law = rmt.SpikeLaw.from_network(config.model(), config.net(), W.T @ W, W.T @ theta)
        ref = theory_module.theory_at(law, delta, config.n_eigs)
        for key in ("edge_lo", "edge_hi", "bottom"):  # nan: an edge not determined in both
            assert np.isclose(th[key], ref[key], rtol=1e-9, atol=0.0, equal_nan=True)


def test_spike_node_workspace_is_per_thread():
    """The workspace of ``SPIKE_NODES`` is cached per law and thread (the kernel writes into
    it): outliers of one law solved in four threads at once equal the serial ones exactly."""
    from concurrent.futures import ThreadPoolExecutor

    net = rmt.TwoLayerNet(3, "softplus", "huber", huber_delta=1.0)
    W = np.random.default_rng(5).standard_normal((20, 3)) * 0.4
    law = rmt.SpikeLaw.from_network(
        rmt.MultiIndexModel("phase_retrieval"), net, W.T @ W, nodes="monte_carlo", n_mc=4000
    )
    deltas = [2.5, 3.0, 3.5, 4.0]
    serial = [[o.value for o in rmt.outliers(law, dl, side="left")] for dl in deltas]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(
            pool.map(lambda dl: [o.value for o in rmt.outliers(law, dl, side="left")], deltas)
        )
    assert threaded == serial and any(serial)
    assert len(mp_module._SPIKE_WORKSPACES[law]) >= 2


def test_checked_lu_solve_matches_numpy_and_flags_a_singular_matrix(rng):
    """``lu_solve_checked`` against ``np.linalg.solve``; on a bordered matrix made singular (two
    equal sectors), ``_lstsq`` falls back to the minimum-norm solution of ``pinv``."""
    from rmt.freeprob.edges import LU_PIVOT_RATIO, _lstsq
    from rmt.kernels.freeprob import lu_solve_checked

    for n in (1, 4, 11, 16):
        A = rng.standard_normal((n, n)) + n * np.eye(n)
        b = rng.standard_normal(n)
        x = np.empty(n)
        assert lu_solve_checked(A, b, x) >= LU_PIVOT_RATIO
        np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(_lstsq(A, b), x, rtol=0, atol=0)
    A = rng.standard_normal((6, 6))
    A[:, 3] = A[:, 2]  # rank 5
    b = A @ rng.standard_normal(6)  # consistent
    x = np.empty(6)
    assert lu_solve_checked(A, b, x) < LU_PIVOT_RATIO
    np.testing.assert_allclose(_lstsq(A, b), np.linalg.pinv(A) @ b, rtol=1e-9, atol=1e-11)


def test_node_arrays_are_shared_by_the_systems_of_a_law_and_follow_new_nodes(rng):
    """Every ``MPSystem`` of a law reads one copy of its node arrays; a law given new nodes
    gets new arrays, and its moments then equal those of a fresh law with those nodes."""
    D, w, ia, ib, _ = nodes(3, rng, 500)
    D = D + 2.0 * np.eye(3)  # definite: no node system near a pole at G = -0.3 I
    zhat = rng.standard_normal((500, 2))
    law = rmt.SpikeLaw(zhat, D, w)
    a, b = MPSystem(law, 2.0), MPSystem(law, 5.0)
    assert a.Dv is b.Dv and a.D is b.D
    G = -0.3 * np.eye(3)
    D2 = 0.5 * D
    law.D = D2
    c = MPSystem(law, 2.0)
    assert c.D is not a.D
    fresh = MPSystem(rmt.SpikeLaw(zhat, D2, w), 2.0)
    for got, ref in zip(c.moments(G)[:2], fresh.moments(G)[:2]):
        np.testing.assert_allclose(got, ref, rtol=0, atol=0)
    np.testing.assert_allclose(c.moments(G)[0], numpy_moments(D2, w, G, 0.5, ia, ib)[0], rtol=RTOL)
