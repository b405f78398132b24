"""Escape-time prediction against gradient descent on an exactly quadratic saddle."""

import numpy as np
import pytest

from rmt.dynamics.escape import predict_escape


def _saddle(d, m, lams, seed):
    """A symmetric ``H`` with prescribed bottom eigenvalues ``lams`` and the rest in [0.5, 1]."""
    rng = np.random.default_rng(seed)
    N = m * d
    Q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    spec = np.concatenate([lams, rng.uniform(0.5, 1.0, N - len(lams))])
    return (Q * spec) @ Q.T, Q[:, : len(lams)]


def _gd_escape(H, W_star, W1, lr, theta, threshold, max_steps=100000):
    """Steps of GD on ``(1/2) (w - w*)^T H (w - w*)`` until the Theta* overlap of W reaches it."""
    d, m = W1.shape
    w_star = W_star.T.reshape(-1)
    w = W1.T.reshape(-1).copy()
    for t in range(max_steps):
        W = w.reshape(m, d).T
        P = theta.T @ W
        if np.sum(P * P) / np.sum(W * W) >= threshold:
            return t
        w -= lr * H @ (w - w_star)
    return None


def _problem(lams, seed, theta_dir):
    d, m = 20, 2
    H, V = _saddle(d, m, np.asarray(lams), seed)
    rng = np.random.default_rng(seed + 1)
    # Theta* is e_0; make eigenvector theta_dir lie in R^m (x) span(e_0) as much as we ask
    theta = np.zeros((d, 1))
    theta[0, 0] = 1.0
    W_star = rng.standard_normal((d, m))
    W_star -= theta @ (theta.T @ W_star)
    W1 = W_star + 1e-4 * rng.standard_normal((d, m))
    grad = (H @ (W1 - W_star).T.reshape(-1)).reshape(m, d).T
    return H, V, theta, W_star, W1, grad


def test_linearised_escape_is_exact_on_a_quadratic_saddle():
    # the eigenvectors of H are random, so rotate theta onto the outlier's neuron-0 part
    H, V, _, W_star, W1, grad = _problem([-0.08, 0.01], 0, 0)
    v = V[:, 0].reshape(2, 20)
    theta = (v[0] / np.linalg.norm(v[0]))[:, None]
    pred = predict_escape([-0.08, 0.01], V, grad, W1, 0.5, theta, threshold=0.3)
    measured = _gd_escape(H, W_star, W1, 0.5, theta, 0.3)
    # only the two eigenpairs passed in move in the prediction; the other directions of the
    # true run decay (eigenvalues in [0.5, 1]), which changes the overlap by O(1e-4) only
    assert pred.race_won and measured is not None
    assert abs(pred.steps - measured) <= 2


def test_a_faster_direction_without_theta_loses_the_race():
    H, V, theta, W_star, W1, grad = _problem([-0.2, -0.05], 2, 0)
    v = V[:, 1].reshape(2, 20)
    theta = (v[0] / np.linalg.norm(v[0]))[:, None]  # the slow direction carries Theta*
    pred = predict_escape([-0.2, -0.05], V, grad, W1, 0.5, theta, threshold=0.3)
    assert pred.index == 0 and not pred.race_won and pred.steps is None


def test_no_negative_direction_predicts_no_escape():
    H, V, theta, W_star, W1, grad = _problem([0.1, 0.2], 4, 0)
    pred = predict_escape([0.1, 0.2], V, grad, W1, 0.5, theta)
    assert pred.steps is None and pred.index is None and not pred.race_won


def test_growth_of_a_lone_outlier_follows_the_closed_form():
    """Amplitude grows by 1 + lr |lambda| per step: c_t = c_0 (1 + lr |lambda|)^t."""
    H, V, _, W_star, W1, grad = _problem([-0.1, 0.3], 6, 0)
    pred = predict_escape([-0.1, 0.3], V, grad, W1, 0.25, np.eye(20)[:, :1])
    c0 = abs(V[:, 0] @ grad.T.reshape(-1) / -0.1)
    assert pred.amplitudes[0] == pytest.approx(c0)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="need vectors"):
        predict_escape([-0.1], np.ones((4, 2)), np.ones((2, 2)), np.ones((2, 2)), 0.5, np.ones(2))
