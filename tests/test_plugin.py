"""The cavity-corrected plug-in law at trained points against dense eigh (rmt.freeprob.plugin).

Phase retrieval, ``TwoLayerNet(2, "softplus", "huber")``, full-batch GD from ``1e-2`` stopped at
the first minimum of the gradient norm.  Tolerances: the bulk edge fluctuates by about
``width * d^{-2/3}`` (width ~0.4, so ~0.009 at d = 300) and an outlier by ``d^{-1/2}``;
measured errors of the corrected law at d = 400 were <= 0.004 (eigenvalue) and <= 0.05 (overlap).
"""

import numpy as np
import pytest

import rmt
from rmt.freeprob import SpikeLaw
from rmt.freeprob.plugin import (
    cavity_self_term,
    first_phase_trajectory,
    plugin_law,
    plugin_prediction,
)

EDGE_TOL = 0.008  # ~ d^{-2/3} edge fluctuation at d = 300, times the bulk width
OVERLAP_TOL = 0.12
D = 300
NET = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
MODEL = rmt.MultiIndexModel("phase_retrieval")


def _trained_point(delta, seed, d=D):
    data = MODEL.sample(int(delta * d), d, rng=seed)
    traj = first_phase_trajectory(NET, data, lr=0.5, init_scale=1e-2, rng=seed + 100)
    assert traj.stopped
    vals, vecs = np.linalg.eigh(rmt.Hessian(NET, data, traj.W).to_dense())
    ov = rmt.overlaps(vecs[:, :2], data.theta, NET.width)
    old = plugin_prediction(plugin_law(NET, data, traj.W), delta)
    st = cavity_self_term(NET, data, traj, probes=4, rng=0)
    new = plugin_prediction(plugin_law(NET, data, traj.W, self_term=st), delta)
    return vals, ov, old, new


@pytest.fixture(scope="module")
def below_threshold():
    return _trained_point(2.0, 0)


@pytest.fixture(scope="module")
def above_threshold():
    return _trained_point(8.0, 0)


def test_old_plugin_predicts_a_spurious_outlier(below_threshold):
    """At delta = 2 the spectrum has no Theta* outlier; the old plug-in puts one without Theta*
    overlap (the w1 - w2 direction of W) well below the true bottom (measured 0.011-0.017)."""
    vals, ov, old, _ = below_threshold
    assert ov[0] < 0.2
    assert old.outliers.size >= 1
    assert old.overlaps_theta[0] < 0.05
    assert old.outliers[0] < vals[0] - 1.5 * EDGE_TOL


def test_cavity_plugin_has_no_spurious_outlier(below_threshold):
    vals, _, _, new = below_threshold
    assert new.outliers.size == 0 or new.overlaps_theta[0] > 0.2
    assert abs(new.bottom - vals[0]) <= EDGE_TOL


def test_cavity_plugin_matches_the_theta_outlier(above_threshold):
    vals, ov, old, new = above_threshold
    assert ov[0] > 0.5 and vals[1] - vals[0] > 0.02  # a separated Theta* outlier
    assert new.outliers.size == 1
    assert abs(new.outliers[0] - vals[0]) <= EDGE_TOL
    assert abs(new.overlaps_theta[0] - ov[0]) <= OVERLAP_TOL
    assert abs(new.edge_lo - vals[1]) <= EDGE_TOL
    assert abs(new.outliers[0] - vals[0]) < abs(old.outliers[0] - vals[0])


def test_self_term_matches_exact_leave_one_out():
    """``x_i^T (W - W^{(-i)})`` from rerunning GD without sample ``i`` (row set to 0)."""
    data = MODEL.sample(600, 200, rng=3)
    traj = first_phase_trajectory(NET, data, lr=0.5, rng=4)
    st = cavity_self_term(NET, data, traj, probes=16, rng=0)
    for i in (0, 1, 2):
        X = data.X.copy()
        X[i] = 0.0
        loo = rmt.problem.models.Dataset(X, data.y, data.theta)
        W = traj.iterates[0].copy()
        for _ in range(traj.steps):
            W = W - traj.lr * NET.loss_and_grad(loo, W)[1]
        exact = data.X[i] @ (traj.W - W)
        assert np.linalg.norm(st[i] - exact) <= 0.25 * np.linalg.norm(exact)


def test_data_independent_W_old_and_new_agree():
    """At a random W orthogonal to Theta* the self-term is zero: both laws are the old one and
    match dense eigh."""
    delta, d = 4.0, D
    data = MODEL.sample(int(delta * d), d, rng=5)
    rng = np.random.default_rng(6)
    G = rng.standard_normal((d, 2))
    G -= data.theta @ (data.theta.T @ G)
    W = np.linalg.qr(G)[0] @ np.array([[1.0, 0.3], [0.0, 0.8]])
    old = plugin_prediction(plugin_law(NET, data, W), delta)
    new = plugin_prediction(plugin_law(NET, data, W, self_term=np.zeros((data.n, 2))), delta)
    ref = plugin_prediction(SpikeLaw.from_hessian(rmt.Hessian(NET, data, W), data.theta), delta)
    vals = np.linalg.eigvalsh(rmt.Hessian(NET, data, W).to_dense())
    assert np.isclose(old.bottom, new.bottom, rtol=1e-10) and np.isclose(old.bottom, ref.bottom)
    assert abs(old.bottom - vals[0]) <= EDGE_TOL


def test_input_validation():
    data = MODEL.sample(40, 10, rng=0)
    with pytest.raises(TypeError, match="TwoLayerNet"):
        plugin_law("net", data, np.zeros((10, 2)))
    with pytest.raises(ValueError, match="self_term"):
        plugin_law(NET, data, np.ones((10, 2)), self_term=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="theta"):
        plugin_law(NET, rmt.problem.models.Dataset(data.X, data.y), np.ones((10, 2)))
    with pytest.raises(ValueError, match="lr"):
        first_phase_trajectory(NET, data, lr=0.0)
    with pytest.raises(TypeError, match="SpikeLaw"):
        plugin_prediction("law", 2.0)
