"""Spiked Wishart and Wigner samplers against their closed-form limits (seeded)."""

import numpy as np
import pytest

from rmt.freeprob import closed_forms as cf
from rmt.problem import ensembles


@pytest.mark.parametrize("spike, seed", [(2.0, 1), (4.0, 2)])
def test_spiked_wishart_outlier_and_overlap(spike, seed):
    n, d = 2000, 1000
    sample = ensembles.spiked_wishart(n, d, spike, rng=seed)
    vals, vecs = np.linalg.eigh(sample.matrix)
    value, overlap = cf.spiked_covariance_outlier(spike, d / n)
    assert abs(vals[-1] - value) < 0.03 * value
    assert abs((vecs[:, -1] @ sample.spike) ** 2 - overlap) < 0.05
    lo, hi = cf.mp_edges(n / d)
    assert abs(vals[-2] - hi) < 0.05 * hi and abs(vals[0] - lo) < 0.05


def test_spiked_wishart_below_threshold_has_no_outlier():
    n, d = 2000, 1000
    sample = ensembles.spiked_wishart(n, d, 0.3, rng=3)  # sqrt(gamma) = 0.707 > 0.3
    top = np.linalg.eigvalsh(sample.matrix)[-1]
    assert abs(top - cf.mp_edges(n / d)[1]) < 0.05


@pytest.mark.parametrize("theta, seed", [(2.0, 4), (3.0, 5)])
def test_spiked_wigner_outlier_and_overlap(theta, seed):
    sample = ensembles.spiked_wigner(1000, theta, rng=seed)
    vals, vecs = np.linalg.eigh(sample.matrix)
    value, overlap = cf.spiked_wigner_outlier(theta)
    assert abs(vals[-1] - value) < 0.03 * value
    assert abs((vecs[:, -1] @ sample.spike) ** 2 - overlap) < 0.05
    assert abs(vals[-2] - 2.0) < 0.05 and abs(vals[0] + 2.0) < 0.05


def test_samplers_are_reproducible_and_validate():
    a = ensembles.spiked_wigner(50, 1.5, rng=7).matrix
    b = ensembles.spiked_wigner(50, 1.5, rng=7).matrix
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError):
        ensembles.spiked_wishart(10, 5, -1.0)
    with pytest.raises(TypeError):
        ensembles.spiked_wigner(10.5, 1.0)
