"""Laws of ``rmt.freeprob`` (``SpikeLaw``, ``robust_scale``) checked against independent
references: a trimmed law's closed-form edge and outlier, dense ``eigh`` of a simulation, and
reproducible Monte Carlo laws."""

import numpy as np
import pytest
from scipy import special

import rmt
from rmt.freeprob.law import robust_scale

TRIM = 3.0  # T(y) = 1{y > TRIM}: D = 0 on about 92% of the mass


def _trimmed_closed_form(delta, t=TRIM):
    """Bulk top edge and outlier of ``(1/n) sum 1{z_i^2 > t} x_i x_i^T``, ``y = z^2``.

    The ``n p`` kept rows (``p = P(z^2 > t)``) form a sample covariance of ratio ``gamma = 1 /
    (delta p)`` whose population covariance is ``I + (ell - 1) theta theta^T`` with ``ell =
    E[z^2 | z^2 > t]``: Marchenko-Pastur edge and Baik-Silverstein outlier, times ``p``."""
    tau = np.sqrt(t)
    p = special.erfc(tau / np.sqrt(2.0))
    ell = 1.0 + 2.0 * tau * np.exp(-0.5 * t) / np.sqrt(2.0 * np.pi) / p
    gamma = 1.0 / (delta * p)
    return p * (1.0 + np.sqrt(gamma)) ** 2, p * ell * (1.0 + gamma / (ell - 1.0))


def _trimmed_law():
    model = rmt.MultiIndexModel("phase_retrieval")
    return rmt.SpikeLaw.spectral(model, lambda y: (y > TRIM).astype(float))


def test_robust_scale_ignores_an_atom_at_zero():
    sizes = np.array([0.0, 0.0, 0.0, 2.0, 3.0, 5.0])
    assert robust_scale(sizes, np.full(6, 1 / 6)) == 3.0
    assert robust_scale(np.zeros(3), np.full(3, 1 / 3)) == 1e-300


@pytest.mark.parametrize("delta", [2.0, 4.0])
def test_trimmed_law_is_bounded_with_closed_form_edge_and_outlier(delta):
    law = _trimmed_law()
    assert law.unbounded == (False, False)
    assert law.scale == 1.0
    edge, outlier = _trimmed_closed_form(delta)
    be = rmt.bulk_edges(law, delta)
    assert be.hi_kind == "fold"
    assert be.hi == pytest.approx(edge, rel=1e-6)
    out = rmt.outliers(law, delta, side="right")
    assert len(out) == 1
    assert out[0].value == pytest.approx(outlier, rel=1e-6)


def test_trimmed_law_matches_dense_eigh_of_a_simulation():
    """Top two eigenvalues of the simulated spectral matrix, through its Gram matrix."""
    delta, d = 4.0, 2000
    law = _trimmed_law()
    hi = rmt.bulk_edges(law, delta).hi
    lam = rmt.outliers(law, delta, side="right")[0].value
    tops = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        n = int(delta * d)
        z = rng.standard_normal(n)
        keep = z * z > TRIM
        X = rng.standard_normal((int(keep.sum()), d))
        X[:, 0] = z[keep]  # theta = e_1
        gram = X @ X.T / n  # the same nonzero eigenvalues as (1/n) X^T X
        tops.append(np.linalg.eigvalsh(gram)[-2:])
    second, first = np.mean(tops, axis=0)
    assert first == pytest.approx(lam, abs=0.02)
    assert second == pytest.approx(hi, abs=0.03)
    assert first - second > 0.04  # a separated outlier, not an unbounded bulk


def _mc_law(rng=None):
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    Q = np.array([[1.0, 0.3], [0.3, 1.0]])
    M = np.array([[0.4], [0.2]])
    return rmt.SpikeLaw.from_network(model, net, Q, M, nodes="monte_carlo", n_mc=20_000, rng=rng)


def test_monte_carlo_laws_are_reproducible_by_default():
    first, second = _mc_law(), _mc_law()
    assert first.kind == "monte_carlo"
    np.testing.assert_array_equal(first.zhat, second.zhat)
    np.testing.assert_array_equal(first.D, second.D)
    assert rmt.bulk_edges(first, 4.0).lo == rmt.bulk_edges(second, 4.0).lo
    other = _mc_law(rng=1)
    assert not np.array_equal(first.D, other.D)
    np.testing.assert_array_equal(other.D, _mc_law(rng=1).D)


def test_spectral_monte_carlo_law_is_reproducible_by_default():
    model = rmt.MultiIndexModel("phase_retrieval", noise=0.2)
    first, second = (
        rmt.SpikeLaw.spectral(model, np.tanh, nodes="monte_carlo", n_mc=5_000) for _ in range(2)
    )
    np.testing.assert_array_equal(first.D, second.D)
    other = rmt.SpikeLaw.spectral(model, np.tanh, nodes="monte_carlo", n_mc=5_000, rng=3)
    assert not np.array_equal(first.D, other.D)
