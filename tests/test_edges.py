"""The economical continuation (edges and outliers in fewer passes) against references that
walk the real branch without its shortcuts.

- The edge: the extremum of ``zeta(tau)`` along the real branch, located by a walk of short
  steps each converged to ``NEWTON_TOL`` and a bounded scalar minimiser over the last bracket.
  ``find_fold`` converges its way points to ``STEP_TOL`` only, caps its steps after a failure
  and polishes the edge point: it must return the same edge, converged to ``NEWTON_TOL``.
- The outliers: at each one, ``G(lambda)`` solved afresh from far (``rmt.stieltjes``) makes
  ``S_lambda`` singular, and the overlaps from that ``G`` are those returned (the roots used
  warm starts a short step outward and stopped on the quadratic prediction of the correction).
- A way point converged to ``STEP_TOL`` only is converged to ``NEWTON_TOL`` when the
  continuation of the outliers starts from it at its own ``zeta``.
- A ``"boundary"`` edge (the last way point) against the closed-form m = 1 inverse.
- The physical sheet: where a Monte Carlo law's real branch meets another sheet short of the
  fold, the edge is where the density of the complex transform ends.
"""

import pathlib

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import rmt
from rmt.freeprob import edges as edges_module
from rmt.freeprob.mp import NEWTON_TOL, MPSystem
from rmt.freeprob.spectrum import continue_real_branch

PHASE = rmt.MultiIndexModel("phase_retrieval")


def sweep_law(m, n_qmc=4096):
    """The ``rmt sweep`` default network (softplus, Huber threshold 1) at a generic ``Q``: QMC
    nodes, whose discrete extreme nodes make the branch past the fold hard to follow."""
    A = np.random.default_rng(0).standard_normal((m, m)) * 0.3
    Q = A @ A.T + 0.05 * np.eye(m)
    net = rmt.TwoLayerNet(m, "softplus", "huber", huber_delta=1.0)
    return rmt.SpikeLaw.from_network(PHASE, net, Q, nodes="qmc", n_qmc=n_qmc)


def walked_edge(mp, side):
    """The edge (before the shift) by short steps along ``tau``, each to ``NEWTON_TOL``."""
    pt = edges_module._start(mp, side)

    def step(src, tau):
        dt = tau - src.tau
        return edges_module.solve_at_tau(
            mp, tau, src.G + mp.unvech(src.dG) * dt, src.zeta + src.h * dt
        )

    ratio = 1.05
    while True:
        new = step(pt, pt.tau * ratio)
        if new is None:  # the branch is hard to follow here: shorter steps
            ratio = 1.0 + 0.2 * (ratio - 1.0)
            assert ratio - 1.0 > 1e-9, "the reference walk stalled"
            continue
        if new.h <= 0.0:
            break
        pt = new
    a, b = pt.tau, new.tau
    res = minimize_scalar(
        lambda t: side * step(pt, t).zeta,
        bounds=(min(a, b), max(a, b)),
        method="bounded",
        options={"xatol": 1e-11 * abs(a)},
    )
    return side * res.fun


@pytest.mark.parametrize("m", [2, 3, 4])
def test_edges_equal_the_extremum_of_zeta_along_a_walk_of_short_steps(m):
    law = sweep_law(m)
    delta = 4.0
    edges = rmt.bulk_edges(law, delta)
    assert edges.lo_kind == edges.hi_kind == "fold"
    assert edges.residual <= NEWTON_TOL
    mp = MPSystem(law, delta)
    for side, edge in ((-1, edges.lo), (1, edges.hi)):
        ref = walked_edge(mp, side) + law.shift
        assert abs(edge - ref) <= 1e-11 * abs(ref), (side, edge, ref)


@pytest.mark.parametrize("m,delta", [(2, 12.0), (4, 4.0)])
def test_outliers_make_S_singular_at_a_freshly_solved_G(m, delta):
    law = sweep_law(m)
    edges = rmt.bulk_edges(law, delta)
    found = rmt.outliers(law, delta, side="left", edges=edges)
    assert len(found) >= 1
    mp = MPSystem(law, delta)
    for o in found:
        lam = o.value - law.shift
        G = np.asarray(rmt.stieltjes(law, delta, o.value, edges=edges)).real
        st = mp.newton(lam, G)
        ES, ESp = mp.spike_matrices(st.G, mp.tangent(st))
        eye = np.eye(ES.shape[0])
        vals, vecs = np.linalg.eigh(ES - lam * eye)
        j = int(np.argmin(np.abs(vals)))
        # mu_j falls at a rate of about 1 in lambda: a root to 1e-12 leaves mu_j that small
        assert abs(vals[j]) <= 1e-12 * (law.scale + abs(lam)), (o.value, vals[j])
        A = vecs[:, j]
        overlap = 1.0 / float(A @ ((ESp / delta + eye) @ A))
        assert abs(overlap - o.overlap_spike) <= 1e-9, (overlap, o.overlap_spike)


def test_a_way_point_converged_loosely_is_polished_when_targeted():
    law = sweep_law(3)
    delta = 4.0
    edges = rmt.bulk_edges(law, delta)
    loose = [p for p in edges.branch_lo if p.residual > NEWTON_TOL]
    assert loose, "every way point is converged to NEWTON_TOL: nothing to polish"
    mp = MPSystem(law, delta)
    p = loose[-1]
    st, _ = continue_real_branch(mp, p, p.zeta, -1)
    assert st.residual <= NEWTON_TOL
    fresh = np.asarray(rmt.stieltjes(law, delta, p.zeta + law.shift, edges=edges)).real
    np.testing.assert_allclose(st.G, fresh, rtol=1e-11, atol=1e-11 * np.abs(fresh).max())


def test_a_boundary_edge_is_the_closed_form_inverse_at_the_bound():
    """``T = (y - 1) / (y + 1)`` reaches its supremum 1 only as ``y -> inf``; with the exact
    ``T_bounds`` the right edge at ``delta = 0.5`` ends the branch where ``1 + tau sup T /
    delta`` vanishes (kind ``"boundary"``).  There ``zeta = -1/tau + E[T / (1 + T tau /
    delta)]`` (the m = 1 inverse), summed here over the law's nodes: the edge is the last way
    point of the continuation, which converges to ``STEP_TOL`` only, polished to ``NEWTON_TOL``
    (for m = 1 Newton's last step lands far below both)."""
    law = rmt.SpikeLaw.spectral(PHASE, lambda y: (y - 1) / (y + 1), T_bounds=(-1.0, 1.0))
    delta = 0.5
    edges = rmt.bulk_edges(law, delta)
    assert edges.hi_kind == "boundary"
    tau = -delta / 1.0
    T, w = law.D[:, 0, 0], law.weights
    ref = -1.0 / tau + float(w @ (T / (1.0 + T * tau / delta))) + law.shift
    assert abs(edges.hi - ref) <= 1e-13 * abs(ref), (edges.hi, ref)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_fold_estimates_for_the_steps_of_the_continuation(m, monkeypatch):
    """The estimates of ``edges.fold_bracket`` for the pairs of consecutive way points of
    ``find_fold`` (with and without the estimates shaping the steps), on both sides of the bulk
    of the 32k-node sweep laws at five values of ``delta``: the upper one is never short of the
    fold; the lower one is a heuristic that may pass it, near the fold (measured: 15 of 452
    pairs, by up to 3%, at ``delta <= 2``), never by more than 5%.  The fold is ``find_fold``'s
    with the geometric rule alone (``FOLD_MODEL = False``)."""
    law = sweep_law(m, n_qmc=32768)
    checked = 0
    for delta in (0.5, 1.0, 2.0, 4.0, 6.0):
        mp = MPSystem(law, delta)
        for side in (-1, 1):
            paths = []
            for model in (False, True):
                monkeypatch.setattr(edges_module, "FOLD_MODEL", model)
                fold, kind, _, path = edges_module.find_fold(mp, side)
                assert kind == "fold"
                paths.append(path)
                if not model:
                    tau_fold = abs(fold.tau)
            for path in paths:
                for a, b in zip(path[:-1], path[1:]):
                    bracket = edges_module.fold_bracket(a, b)
                    if bracket is not None:
                        low, high = map(abs, bracket)
                        assert high >= tau_fold * (1 - 1e-9), (delta, side, high / tau_fold)
                        assert low <= 1.05 * tau_fold, (delta, side, low / tau_fold)
                        checked += 1
    assert checked >= 100


@pytest.mark.parametrize("m", [2, 4])
def test_edges_with_and_without_the_fold_bracket_agree(m, monkeypatch):
    """Steps aimed by the fold bracket and by the geometric rule alone reach the same edges."""
    law = sweep_law(m)
    for delta in (0.5, 2.0, 6.0):
        now = rmt.bulk_edges(law, delta)
        monkeypatch.setattr(edges_module, "FOLD_MODEL", False)
        before = rmt.bulk_edges(law, delta)
        monkeypatch.setattr(edges_module, "FOLD_MODEL", True)
        for x, y in ((now.lo, before.lo), (now.hi, before.hi)):
            assert abs(x - y) <= 1e-11 * abs(y), (delta, x, y)


@pytest.mark.parametrize("m,delta", [(3, 2.0), (4, 4.0)])
def test_outliers_with_and_without_warm_roots_agree(m, delta, monkeypatch):
    """The roots of ``mu_j`` started from the evaluations made for the other roots
    (``outliers._warm_start``) are those started from the far end of their brackets: values to
    1e-11, overlaps to 1e-10 (the sweep laws have two and three outliers on the left)."""
    import importlib

    outliers_module = importlib.import_module("rmt.freeprob.outliers")
    law = sweep_law(m, n_qmc=32768)
    edges = rmt.bulk_edges(law, delta)
    now = rmt.outliers(law, delta, side="left", edges=edges)
    monkeypatch.setattr(outliers_module, "WARM_ROOTS", False)
    before = rmt.outliers(law, delta, side="left", edges=edges)
    assert len(now) == len(before) == m - 1
    for a, b in zip(now, before):
        assert abs(a.value - b.value) <= 1e-11 * abs(b.value)
        assert abs(a.overlap_theta - b.overlap_theta) <= 1e-10


def _density(law, delta, x, eta):
    """``Im tr G(x + i eta) / (m pi)`` from the complex continuation (independent of the fold
    search on the real axis)."""
    return float(rmt.stieltjes(law, delta, complex(x, eta)).G.trace().imag) / (law.m * np.pi)


def test_fold_search_stays_on_the_physical_sheet():
    """200 Monte Carlo nodes of a DMFT law at its plateau (``|z|``, m = 3, delta = 2.2) whose
    real branch meets an unphysical sheet just short of the fold: a long continuation step
    lands on it (its ``G'`` has a negative eigenvalue) and finds that sheet's fold 3e-5 past
    the edge.  The edge must be where the density of the complex transform ends: outside,
    ``Im G(x + i eta)`` falls with ``eta`` (ratio 10 from 1e-6 to 1e-7); inside it does not."""
    f = np.load(pathlib.Path(__file__).parent / "data" / "dmft_law_m3_sheet.npz")
    law = rmt.SpikeLaw(f["zhat"], f["D"], theta_dims=int(f["theta_dims"]))
    delta = float(f["delta"])
    lo, _ = rmt.bulk_edges(law, delta)
    for x, inside in [(lo - 2e-5, False), (lo - 5e-6, False), (lo + 1e-5, True)]:
        ratio = _density(law, delta, x, 1e-6) / _density(law, delta, x, 1e-7)
        assert (ratio < 1.2) if inside else (ratio > 9.0), (x, ratio)
    mp = MPSystem(law, delta)
    _, _, _, path = edges_module.find_fold(mp, -1)
    for p in path:  # G' = dG/dtau / h: positive definite on this law's branch
        Gp = mp.unvech(p.dG) / p.h
        assert np.linalg.eigvalsh(0.5 * (Gp + Gp.T))[0] > 0.0, p.zeta


@pytest.mark.parametrize("m", [2, 3])
def test_one_edge_alone_is_that_edge_of_both_to_the_last_bit(m):
    """``bulk_edges(side=...)`` finds one edge as :func:`bulk_edges` of both does, to the last
    bit, and leaves the other uncomputed; the edge itself against the walk of short steps."""
    law = sweep_law(m)
    both = rmt.bulk_edges(law, 3.0)
    left = rmt.bulk_edges(law, 3.0, side="left")
    right = rmt.bulk_edges(law, 3.0, side="right")
    assert left.lo == both.lo and right.hi == both.hi
    assert np.isnan(left.hi) and left.hi_kind == "not computed"
    assert np.isnan(right.lo) and right.lo_kind == "not computed"
    assert left.lo == pytest.approx(walked_edge(MPSystem(law, 3.0), -1) + law.shift, rel=1e-8)
    # the outliers and the Theta* margin from one edge are those of both
    for name in ("value", "overlap_theta"):
        got = [getattr(o, name) for o in rmt.outliers(law, 3.0, "left", edges=left)]
        assert got == [getattr(o, name) for o in rmt.outliers(law, 3.0, "left", edges=both)]
    assert rmt.theta_margin(law, 3.0, edges=left) == rmt.theta_margin(law, 3.0)
    with pytest.raises(ValueError, match="side must be"):
        rmt.bulk_edges(law, 3.0, side="bottom")
