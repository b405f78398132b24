"""The m = 1 edges and outliers on the Silverstein-Choi inverse (``rmt.freeprob.scalar``).

References, each independent of the scalar path:
- the node sums of its kernels against numpy;
- edges and outliers against the general solver, the bordered-Newton continuation of ``G`` in
  ``tau`` and ``lambda`` (``scalar.ENABLED = False``), on discrete laws and on network laws;
- the edges of a discrete law against a bounded minimiser of the closed-form ``zeta(s)``;
- an outlier of a discrete law against the root of ``det S = 0`` found by ``brentq`` on the
  closed forms, and its overlap against a finite difference of ``S`` in ``lambda``;
- the cases the scalar path hands back (a ``"boundary"`` edge, the pole of the extreme node).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

import rmt
from rmt.freeprob import scalar
from rmt.freeprob.mp import MPSystem
from rmt.kernels.freeprob import scalar_moments, scalar_spike_sums


def random_law(seed, N=400, K=2):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((N, K))
    T = 0.6 * Z[:, 0] ** 2 - 0.3 + 0.4 * rng.standard_normal(N) * Z[:, -1]
    return rmt.SpikeLaw(Z, T, None, theta_dims=1)


def network_law(activation):
    net = rmt.TwoLayerNet(1, activation, "huber", huber_delta=1.0)
    return rmt.SpikeLaw.from_network(
        rmt.MultiIndexModel("phase_retrieval"), net, np.array([[0.49]])
    )


def solve(law, delta, enabled, monkeypatch):
    monkeypatch.setattr(scalar, "ENABLED", enabled)
    edges = rmt.bulk_edges(law, delta)
    outs = [rmt.outliers(law, delta, side, edges=edges) for side in ("left", "right")]
    return edges, outs


def closed_zeta(s, law, delta):
    T = law.D[:, 0, 0]
    return -1.0 / s + np.sum(law.weights * T / (1.0 + T * s / delta))


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_kernel_sums_match_numpy(K):
    rng = np.random.default_rng(K)
    N = 301
    T, w, Z = rng.standard_normal(N), rng.random(N), rng.standard_normal((N, K))
    w /= w.sum()
    s, inv_delta = 0.37, 1.0 / 2.5
    F = T / (1.0 + T * s * inv_delta)
    out = np.empty(3)
    assert scalar_moments(T, w, s, inv_delta, out) == 0
    np.testing.assert_allclose(out, [w @ F, w @ F**2, w @ F**3], rtol=1e-13)
    S1, S2, e = np.empty((K, K)), np.empty((K, K)), np.empty(2)
    assert scalar_spike_sums(T, w, Z, s, inv_delta, S1, S2, e) == 0
    np.testing.assert_allclose(S1, (Z * (w * F)[:, None]).T @ Z, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(S2, (Z * (w * F**2)[:, None]).T @ Z, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(e, [w @ F, w @ F**2], rtol=1e-13)
    # past the pole of a node the kernels say so
    assert scalar_moments(T, w, -5.0 / T.min() * 2.5, inv_delta, out) > 0


@pytest.mark.parametrize(
    "law, deltas",
    [
        (random_law(0), (0.7, 2.0, 6.0)),
        (random_law(1, K=3), (1.0, 4.0)),
        (network_law("softplus"), (0.5, 1.0, 4.0, 10.0)),
        (network_law("tanh"), (2.0, 10.0)),
    ],
    ids=["discrete-K2", "discrete-K3", "softplus", "tanh"],
)
def test_edges_and_outliers_match_the_general_continuation(law, deltas, monkeypatch):
    calls = []
    fold = scalar.fold
    monkeypatch.setattr(scalar, "fold", lambda mp, side: calls.append(side) or fold(mp, side))
    n_out = 0
    for delta in deltas:
        e1, o1 = solve(law, delta, True, monkeypatch)
        e0, o0 = solve(law, delta, False, monkeypatch)
        assert (e1.lo_kind, e1.hi_kind) == (e0.lo_kind, e0.hi_kind)
        size = law.scale + abs(e0.lo) + abs(e0.hi)
        assert abs(e1.lo - e0.lo) <= 1e-11 * size and abs(e1.hi - e0.hi) <= 1e-11 * size
        np.testing.assert_allclose(e1.G_lo, e0.G_lo, rtol=1e-6)  # tau is flat in zeta there
        for a, b in zip(o1, o0):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                n_out += 1
                assert abs(x.value - y.value) <= 1e-11 * size
                assert abs(x.overlap_spike - y.overlap_spike) <= 1e-8
                assert abs(x.overlap_theta - y.overlap_theta) <= 1e-8
                assert 0.0 <= x.overlap_theta <= x.overlap_spike <= 1.0 + 1e-12
    assert len(calls) >= 2 * len(deltas)
    assert n_out > 0


def test_edges_are_the_extrema_of_the_closed_form_inverse():
    law = random_law(2)
    delta = 3.0
    T = law.D[:, 0, 0]
    mp = MPSystem(law, delta)
    left, right = scalar.fold(mp, -1), scalar.fold(mp, +1)
    assert left is not None and right is not None
    lo = optimize.minimize_scalar(
        lambda s: -closed_zeta(s, law, delta),
        bounds=(1e-6, delta / -T.min() * (1 - 1e-9)),
        method="bounded",
        options={"xatol": 1e-12},
    )
    hi = optimize.minimize_scalar(
        lambda s: closed_zeta(s, law, delta),
        bounds=(-delta / T.max() * (1 - 1e-9), -1e-6),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert abs(left[0].zeta + lo.fun) < 1e-10 and abs(right[0].zeta - hi.fun) < 1e-10
    assert abs(left[0].tau - lo.x) < 1e-5 * lo.x  # zeta is flat at its extremum
    # the way points are points of (MP) below the fold, farthest first
    for states, side in ((left[1], -1), (right[1], +1)):
        s = [float(st.G[0, 0]) for st in states]
        assert all(-side * v > 0 for v in s) and np.all(np.diff(np.abs(s)) > 0)
        for st in states:
            assert abs(st.zeta - closed_zeta(float(st.G[0, 0]), law, delta)) < 1e-12


def test_an_outlier_is_the_root_of_det_S_with_its_overlap():
    """A law with a spike: ``S(lambda) = E[z z^T F] - lambda I`` at ``G = s(lambda)``."""
    rng = np.random.default_rng(5)
    N = 600
    Z = rng.standard_normal((N, 2))
    T = -1.5 * Z[:, 0] ** 2 + 0.5 + 0.1 * Z[:, 1]
    law = rmt.SpikeLaw(Z, T, None, theta_dims=1)
    delta = 5.0
    edges = rmt.bulk_edges(law, delta)
    out = rmt.outliers(law, delta, "left", edges=edges)
    assert len(out) >= 1
    w = law.weights
    s_edge = float(edges.G_lo[0, 0])

    def min_eig(s):
        F = T / (1.0 + T * s / delta)
        S = (Z * (w * F)[:, None]).T @ Z - closed_zeta(s, law, delta) * np.eye(2)
        return np.linalg.eigvalsh(S)[0]

    s_root = optimize.brentq(min_eig, 1e-3 * s_edge, s_edge * (1 - 1e-12), xtol=1e-15, rtol=1e-15)
    lam = closed_zeta(s_root, law, delta)
    o = out[-1]  # nearest the edge last: the only one here
    assert abs(o.value - lam) < 1e-10

    # overlap: 1 / <A, -dS/dlambda A>, dS/dlambda from central differences in s
    def S_at(s):
        F = T / (1.0 + T * s / delta)
        return (Z * (w * F)[:, None]).T @ Z - closed_zeta(s, law, delta) * np.eye(2)

    h = 1e-5 * s_root
    dS = (S_at(s_root + h) - S_at(s_root - h)) / (
        closed_zeta(s_root + h, law, delta) - closed_zeta(s_root - h, law, delta)
    )
    A = np.linalg.eigh(S_at(s_root))[1][:, 0]
    ov = 1.0 / float(A @ (-dS @ A))
    assert abs(o.overlap_spike - ov) < 1e-6
    assert abs(o.overlap_theta - ov * A[0] ** 2) < 1e-6


def test_the_pole_of_the_extreme_node_and_exact_bounds_go_to_the_general_solver():
    # a heavy extreme node: the fold sits at its pole to within MIN_MARGIN
    T = np.array([-1.0, 0.5, 1.0, 40.0])
    w = np.array([0.3, 0.3, 0.4 - 1e-13, 1e-13])
    law = rmt.SpikeLaw(np.zeros((4, 1)), T, w)
    mp = MPSystem(law, 2.0)
    assert scalar.fold(mp, +1) is None
    # exact bounds that cut the branch before the fold: the general solver gives "boundary"
    # (tests/test_edges.py checks that edge against the closed form)
    phase = rmt.MultiIndexModel("phase_retrieval")
    law = rmt.SpikeLaw.spectral(phase, lambda y: (y - 1) / (y + 1), T_bounds=(-1.0, 1.0))
    assert scalar.fold(MPSystem(law, 0.5), +1) is None
    assert rmt.bulk_edges(law, 0.5).hi_kind == "boundary"
