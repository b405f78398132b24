"""Closed-form laws against independent quadrature and each other."""

import numpy as np
import pytest
from scipy import integrate

from rmt.freeprob import closed_forms as cf


@pytest.mark.parametrize("delta", [0.3, 1.0, 2.5])
def test_mp_density_integrates_to_one_minus_atom(delta):
    lo, hi = cf.mp_edges(delta)
    mass, _ = integrate.quad(lambda x: cf.mp_density(np.array([x]), delta)[0], lo, hi, limit=200)
    assert abs(mass + cf.mp_atom(delta) - 1.0) < 1e-7


@pytest.mark.parametrize("delta", [0.5, 3.0])
def test_mp_mean_is_one(delta):
    """E[lambda] = tr((1/n) X^T X)/d = 1 for unit-variance entries."""
    lo, hi = cf.mp_edges(delta)
    mean, _ = integrate.quad(lambda x: x * cf.mp_density(np.array([x]), delta)[0], lo, hi)
    assert abs(mean - 1.0) < 1e-7


def test_mp_cdf_matches_quad():
    delta = 2.0
    lo, hi = cf.mp_edges(delta)
    for x in np.linspace(lo, hi, 7)[1:-1]:
        ref, _ = integrate.quad(lambda t: cf.mp_density(np.array([t]), delta)[0], lo, x)
        assert abs(cf.mp_cdf(x, delta) - ref) < 1e-6


def test_spiked_formulas_are_continuous_at_threshold():
    gamma = 0.5
    ell = np.sqrt(gamma)
    value, overlap = cf.spiked_covariance_outlier(ell * (1 + 1e-9), gamma)
    assert abs(value - (1 + np.sqrt(gamma)) ** 2) < 1e-7 and abs(overlap) < 1e-7
    value, overlap = cf.spiked_wigner_outlier(1 + 1e-9)
    assert abs(value - 2.0) < 1e-7 and abs(overlap) < 1e-7


def test_semicircle_is_a_probability_density():
    mass, _ = integrate.quad(lambda x: cf.semicircle_density(np.array([x]))[0], -2, 2)
    assert abs(mass - 1.0) < 1e-9


def test_bad_parameters_raise():
    with pytest.raises(ValueError):
        cf.mp_edges(0.0)
    with pytest.raises(TypeError):
        cf.spiked_wigner_outlier("big")
