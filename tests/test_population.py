"""delta_NN against an independent scalar reference, and its infinite cases with reasons."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq, minimize_scalar

import rmt
from rmt.thresholds.population import population_threshold


def _gauss_expect(f, breaks):
    """E[f(z)], z ~ N(0,1), by adaptive quadrature split at the kinks of f."""
    pts = [-np.inf, *breaks, np.inf]
    phi = lambda z: np.exp(-z * z / 2) / np.sqrt(2 * np.pi)  # noqa: E731
    return sum(
        quad(lambda z: f(z) * phi(z), a, b, limit=200, epsabs=1e-13, epsrel=1e-12)[0]
        for a, b in zip(pts[:-1], pts[1:])
    )


def _scalar_bbp_reference(T, sup_T, breaks):
    """BBP point of (1/n) sum T(y_i) x_i x_i^T on the right edge, T >= 0 (docs/theory.md section 4,
    the Lu-Li form): the delta where s E[(z^2-1) T/(1 + T s/delta)] = -1 at the edge of zeta."""

    def zeta(s, dl):
        return -1 / s + _gauss_expect(lambda z: T(z) / (1 + T(z) * s / dl), breaks)

    def margin(dl):
        s = minimize_scalar(
            lambda s: zeta(s, dl),
            bounds=(-dl / sup_T * (1 - 1e-9), -1e-9),
            method="bounded",
            options={"xatol": 1e-13},
        ).x
        return s * _gauss_expect(lambda z: (z * z - 1) * T(z) / (1 + T(z) * s / dl), breaks) + 1

    return brentq(margin, 0.5, 8.0, xtol=1e-10)


def test_quadratic_huber_at_origin_matches_scalar_reference():
    """At W = 0 a quadratic unit with Huber loss is the spectral method T(y) = -2 min(y, 1)
    (docs/theory.md section 2); its negative outlier is born below 0, so delta_NN = delta_BBP."""
    ref = _scalar_bbp_reference(lambda z: 2 * min(z * z, 1.0), 2.0, [-1.0, 0.0, 1.0])
    res = population_threshold(
        rmt.MultiIndexModel("phase_retrieval"),
        rmt.TwoLayerNet(1, "quadratic", "huber"),
        point="zero",
    )
    assert res.converged, res.notes
    assert res.delta_pop == pytest.approx(ref, rel=1e-6)
    assert res.delta_bbp == pytest.approx(ref, rel=1e-6)
    assert res.edge < 0 and res.delta_pop >= res.delta_alg == pytest.approx(0.5, rel=1e-8)


def test_square_loss_on_phase_retrieval_is_unbounded():
    res = population_threshold(
        rmt.MultiIndexModel("phase_retrieval"), rmt.TwoLayerNet(2, "softplus", "square")
    )
    assert np.isinf(res.delta_pop) and "unbounded" in res.reason


def test_odd_activation_at_origin_is_label_free():
    """tanh at W = 0 with square loss: D = a a^T for every sample (sigma''(0) = 0)."""
    res = population_threshold(
        rmt.MultiIndexModel("phase_retrieval"), rmt.TwoLayerNet(2, "tanh", "square"), point="zero"
    )
    assert np.isinf(res.delta_pop) and "no label information" in res.reason


def test_population_point_of_tanh_on_even_target_is_the_origin():
    spec = rmt.population_point(
        rmt.MultiIndexModel("phase_retrieval"), rmt.TwoLayerNet(2, "tanh", "square")
    )
    np.testing.assert_array_equal(spec.Q, np.zeros((2, 2)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(side="right"), "left"),
        (dict(delta_range=(2.0, 1.0)), "delta_range"),
        (dict(point="saddle"), "point"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        population_threshold(
            rmt.MultiIndexModel("phase_retrieval"),
            rmt.TwoLayerNet(1, "quadratic", "huber"),
            **kwargs,
        )


def test_positive_semidefinite_curvature_has_no_descent_direction():
    """tanh with Huber loss at W = 0: D = 1[y <= 1] a a^T >= 0, so H >= 0 at every delta."""
    net = rmt.TwoLayerNet(2, "tanh", "huber")
    res = population_threshold(rmt.MultiIndexModel("phase_retrieval"), net, point="zero")
    assert np.isinf(res.delta_pop) and "positive semidefinite" in res.reason
    data = rmt.MultiIndexModel("phase_retrieval").sample(400, 50, rng=3)
    evals = np.linalg.eigvalsh(rmt.Hessian(net, data, np.zeros((50, 2))).to_dense())
    assert evals[0] > -1e-12


def test_point_objects_give_the_same_threshold_as_their_names():
    """A Point, a PointSpec and the name give one law, hence one delta_NN."""
    model, net = rmt.MultiIndexModel("phase_retrieval"), rmt.TwoLayerNet(1, "quadratic", "huber")
    by_name = population_threshold(model, net, point="zero")
    by_object = population_threshold(model, net, point=rmt.ZeroPoint(1, 1))
    given = rmt.GivenPoint(np.zeros((7, 1)), theta=np.eye(7)[:, :1])
    by_weights = population_threshold(model, net, point=given)
    assert by_object.delta_pop == by_name.delta_pop == by_weights.delta_pop


def test_sample_dependent_point_is_refused():
    model, net = rmt.MultiIndexModel("phase_retrieval"), rmt.TwoLayerNet(1, "quadratic", "huber")
    with pytest.raises(ValueError, match="depends on the sample"):
        population_threshold(model, net, point=rmt.TrainedPoint())
    with pytest.raises(ValueError, match="has none"):
        population_threshold(model, net, point=rmt.GivenPoint(np.zeros((7, 1))))
