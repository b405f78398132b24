"""The phase transition at a population point, theory against simulation at d = 2000
(docs/theory.md sections 4 and 6)."""

import numpy as np
import pytest

import rmt

D = 2000
MODEL = rmt.MultiIndexModel("phase_retrieval")
NET = rmt.TwoLayerNet(2, "softplus", "huber")


@pytest.fixture(scope="module")
def spec():
    return rmt.population_point(MODEL, NET)


def _bottom_pairs(spec, delta, seed, k=3):
    rng = np.random.default_rng([seed, 2026])
    data = MODEL.sample(int(round(delta * D)), D, rng=rng)
    H = rmt.Hessian(NET, data, spec.draw(D, data.theta, rng))
    res = rmt.extreme_eigs(H, k=k, which="smallest", method="lanczos", tol=1e-9, rng=seed)
    return res.values, rmt.overlaps(res.vectors, data.theta, NET.width)


@pytest.mark.slow
@pytest.mark.ci
def test_separated_outlier_matches_prediction(spec):
    """Mean over 3 seeds: bottom eigenvalue within 2%, squared overlap within 0.05."""
    delta = 6.0
    law = rmt.SpikeLaw.from_network(MODEL, NET, spec.Q, spec.M)
    edges = rmt.bulk_edges(law, delta)
    pred = min(rmt.outliers(law, delta, side="left"), key=lambda o: o.value)
    assert pred.value < edges.lo - 0.1 * abs(edges.lo)  # well separated from the bulk
    sims = [_bottom_pairs(spec, delta, s) for s in range(3)]
    bottom = np.mean([v[0] for v, _ in sims])
    overlap = np.mean([o[0] for _, o in sims])
    assert abs(bottom / pred.value - 1) < 0.02
    assert abs(overlap - pred.overlap_theta) < 0.05


@pytest.mark.slow
@pytest.mark.ci
def test_no_theta_outlier_well_below_delta_nn(spec):
    res = rmt.population_threshold(MODEL, NET, point=spec)
    assert res.converged and res.delta_pop >= res.delta_alg
    for seed in range(2):
        _, overlaps = _bottom_pairs(spec, res.delta_pop / 3, seed)
        assert np.max(overlaps) < 0.1
