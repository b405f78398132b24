"""rmt.spectral_density (stochastic Lanczos quadrature) against exact moments and the
Marchenko-Pastur law."""

import numpy as np
import pytest
from scipy.integrate import quad

import rmt


def marchenko_pastur_cdf(x, ratio):
    """CDF of the Marchenko-Pastur law of ``X^T X / n`` with ``d/n = ratio < 1`` (no atom).

    Density ``sqrt((b - t)(t - a)) / (2 pi ratio t)`` on ``[a, b] = [(1 -+ sqrt(ratio))^2]``
    (Marchenko & Pastur, 1967); integrated with the algebraic endpoint weight of QUADPACK.
    """
    a, b = (1 - np.sqrt(ratio)) ** 2, (1 + np.sqrt(ratio)) ** 2
    out = np.empty(len(x))
    for i, xi in enumerate(x):
        if xi <= a or xi >= b:
            out[i] = float(xi >= b)
            continue
        out[i] = quad(
            lambda t: np.sqrt(b - t) / (2 * np.pi * ratio * t),
            a,
            xi,
            weight="alg",
            wvar=(0.5, 0),
        )[0]
    return out


def kolmogorov_distance_to_mp(result, ratio, grid):
    """sup |F_SLQ - F_MP| on ``grid``; F_SLQ passes through the middle of each quadrature jump
    (the true CDF lies within each jump, Chebyshev-Markov-Stieltjes)."""
    order = np.argsort(result.nodes)
    nodes, weights = result.nodes[order], result.weights[order]
    middle = np.cumsum(weights) - weights / 2
    F_slq = np.interp(grid, nodes, middle, left=0.0, right=1.0)
    return float(np.max(np.abs(F_slq - marchenko_pastur_cdf(grid, ratio))))


def test_mp_closed_form_is_a_cdf():
    """The helper itself: mean of the law is 1 and the CDF ends at 1."""
    ratio = 0.5
    grid = np.linspace(0, 3, 3001)
    F = marchenko_pastur_cdf(grid, ratio)
    assert F[-1] == 1.0 and F[0] == 0.0 and np.all(np.diff(F) >= -1e-12)
    mean = np.sum(1 - F) * (grid[1] - grid[0])  # E[x] = int (1 - F) for x >= 0
    assert mean == pytest.approx(1.0, abs=2e-3)


@pytest.mark.slow
@pytest.mark.ci
def test_kolmogorov_distance_to_marchenko_pastur_falls_with_d():
    ratio = 0.5
    grid = np.linspace(0.0, 3.2, 400)
    distances = []
    for d in (100, 400, 1600):
        X = np.random.default_rng(d).standard_normal((int(d / ratio), d))
        A = X.T @ X / X.shape[0]
        result = rmt.spectral_density(A, n_probes=10, steps=d // 8, rng=d + 1)
        assert result.weights.sum() == pytest.approx(1.0, abs=1e-12)
        distances.append(kolmogorov_distance_to_mp(result, ratio, grid))
    assert distances[0] > distances[1] > distances[2], distances
    assert distances[2] < 0.02 and distances[2] < 0.5 * distances[0], distances


def test_gauss_rule_reproduces_moments_of_a_diagonal_matrix():
    """For diagonal A every Rademacher probe sees the uniform measure on the diagonal, so a
    ``steps``-node Gauss rule matches tr(A^p)/N exactly for p < 2 steps."""
    rng = np.random.default_rng(1)
    diag = rng.uniform(-2.0, 3.0, 200)
    steps = 8
    result = rmt.spectral_density(np.diag(diag), n_probes=3, steps=steps, rng=2)
    assert result.n_matvec == 3 * steps
    for p in range(2 * steps):
        exact = np.mean(diag**p)
        assert np.sum(result.weights * result.nodes**p) == pytest.approx(exact, rel=1e-9, abs=1e-9)


def test_full_steps_give_the_eigenvalues_and_a_normalised_density(rng):
    spectrum = np.linspace(-1.0, 1.0, 30)
    U, _ = np.linalg.qr(rng.standard_normal((30, 30)))
    A = (U * spectrum) @ U.T
    result = rmt.spectral_density(0.5 * (A + A.T), n_probes=4, steps=30, rng=3)
    for probe_nodes in result.nodes.reshape(4, 30):
        np.testing.assert_allclose(np.sort(probe_nodes), spectrum, atol=1e-10)
    integral = np.sum(result.density) * (result.grid[1] - result.grid[0])
    assert integral == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_allclose(result.cdf([-2.0, 2.0]), [0.0, 1.0], atol=1e-12)


def test_density_bad_input():
    with pytest.raises(ValueError, match="n_probes"):
        rmt.spectral_density(np.eye(5), n_probes=0)
    with pytest.raises(ValueError, match="symmetric"):
        rmt.spectral_density(np.triu(np.ones((5, 5))))
    with pytest.raises(ValueError, match="width"):
        rmt.spectral_density(np.eye(5), width=-1.0)
