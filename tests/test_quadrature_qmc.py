"""Randomised quasi-Monte Carlo nodes (``rmt.problem.quadrature.sobol``), the default of the laws above
three dimensions: closed-form Gaussian integrals, the error estimate from the replicates, and
the errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

from rmt.problem.quadrature import QMC_NODES, QMC_REPLICATES, monte_carlo, sobol


def test_sobol_nodes_integrate_gaussian_closed_forms_within_their_error():
    """``E[cos(a . g)] = exp(-|a|^2 / 2)`` and ``E[g g^T] = I`` in five dimensions: within 4
    replicate standard errors, which are 10x below the i.i.d. error at the same ``n`` (34x
    measured)."""
    K = 5
    a = np.array([0.7, -0.4, 0.3, 0.5, -0.2])
    nodes = sobol(K, rng=3)
    assert nodes.points.shape == (QMC_NODES, K) and nodes.replicates == QMC_REPLICATES
    assert nodes.kind == "qmc" and np.isclose(nodes.weights.sum(), 1.0)
    assert np.all(np.isfinite(nodes.points))
    f = np.cos(nodes.points @ a)
    se = nodes.standard_error(f)[0]
    exact = np.exp(-0.5 * a @ a)
    assert abs(nodes.expect(f) - exact) < 4.0 * se
    iid = monte_carlo(K, QMC_NODES, rng=3)
    se_iid = np.std(np.cos(iid.points @ a)) / np.sqrt(QMC_NODES)
    assert se < se_iid / 10.0, (se, se_iid)

    outer = nodes.points[:, :, None] * nodes.points[:, None, :]
    second = nodes.expect(outer)
    se2 = nodes.standard_error(outer).reshape(K, K)
    assert np.all(np.abs(second - np.eye(K)) < 4.0 * se2 + 1e-12)


def test_replicate_error_matches_the_spread_over_scrambles():
    """The error estimate is calibrated: over 12 independent scrambles, the spread of the mean of
    a discontinuous integrand (an indicator, as Huber's l'') matches the reported errors."""
    K = 4
    b = np.array([1.0, 0.5, -0.3, 0.2])
    exact = 0.5  # P(b . g > 0)
    means, errs = [], []
    for seed in range(12):
        nodes = sobol(K, n=8192, rng=seed, replicates=8)
        v = (nodes.points @ b > 0).astype(float)
        means.append(nodes.expect(v))
        errs.append(nodes.standard_error(v)[0])
    spread = np.std(means, ddof=1)
    assert 0.4 < np.median(errs) / spread < 2.5, (np.median(errs), spread)
    assert abs(np.mean(means) - exact) < 4.0 * spread / np.sqrt(12)


def test_sobol_nodes_are_reproducible_and_seeded():
    first, again, other = sobol(3, n=4096, rng=7), sobol(3, n=4096, rng=7), sobol(3, n=4096, rng=8)
    np.testing.assert_array_equal(first.points, again.points)
    assert not np.allclose(first.points, other.points)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 3000}, "power of two"),
        ({"n": 4096, "replicates": 3}, "power of two"),
        ({"n": 4096, "replicates": 1}, "at least 2"),
        ({"n": 0}, "n"),
    ],
)
def test_sobol_rejects_bad_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sobol(2, **kwargs)


def test_an_explicit_number_of_draws_asks_for_iid_nodes():
    """``n_mc`` with ``nodes="auto"`` keeps its meaning from before the QMC default: that many
    i.i.d. draws; without it, the randomised QMC nodes (same seed: reproducible)."""
    import rmt

    net = rmt.TwoLayerNet(2, "tanh", "logistic")
    model, Q = rmt.MultiIndexModel("sign_z1z2"), np.diag([0.5, 0.3])
    iid = rmt.SpikeLaw.from_network(model, net, Q, n_mc=20_000)
    default = rmt.SpikeLaw.from_network(model, net, Q)
    assert (iid.kind, iid.N) == ("monte_carlo", 20_000)
    assert (default.kind, default.N) == ("qmc", QMC_NODES)
    # both estimate the same E[D]: within 4 of the i.i.d. standard errors
    gap = np.abs(iid.expect(iid.D) - default.expect(default.D))
    assert np.all(gap < 4.0 * iid.stderr + 4.0 * default.stderr)
