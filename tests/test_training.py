"""Escape from the plateau: the log(d)/|lambda| order of magnitude (docs/theory.md section 7.3)."""

import numpy as np
import pytest

import rmt
from rmt.dynamics.escape import predicted_escape_time
from rmt.thresholds.points import population_point


def test_predicted_escape_time_closed_form():
    pred = predicted_escape_time(-0.05, 200, 0.5)
    assert abs(pred.time - np.log(200) / 0.05) <= 1e-12
    assert abs(pred.steps - np.log(200) / 0.05 / 0.5) <= 1e-12
    with pytest.raises(ValueError, match="negative curvature"):
        predicted_escape_time(0.1, 200, 0.5)
    with pytest.raises(ValueError, match="lr must be > 0"):
        predicted_escape_time(-0.1, 200, 0.0)


def test_escape_time_against_bottom_eigenvalue():
    """Start at the population point (softplus + huber, y = z^2, d = 100, delta = 8).

    After the plateau the overlap with Theta* grows along the negative curvature until it
    escapes; the delay is compared with log(d)/|lambda_min| from the dense Hessian at W1 (an
    order of magnitude: within a factor 3).
    """
    d = 100
    model = rmt.MultiIndexModel("phase_retrieval")
    data = model.sample(8 * d, d, rng=1)
    net = rmt.TwoLayerNet(1, "softplus", "huber", a=np.array([0.3]))
    W0 = population_point(model, net).draw(d, data.theta, rng=4)
    run = rmt.gradient_descent(net, data, W0=W0, lr=0.5, steps=4000, progress=False)
    assert run.phases.detected and run.escape_step is not None and not run.diverged
    assert run.overlap[run.plateau_step] < 0.5 <= run.overlap[run.escape_step]
    lam = np.linalg.eigvalsh(rmt.Hessian(net, data, run.W1).to_dense())[0]
    assert lam < 0
    pred = predicted_escape_time(lam, d, 0.5)
    assert pred.time / 3 <= run.escape_time <= 3 * pred.time
