"""The plateau-length law (rmt.dynamics.escape.plateau_length, docs/theory.md section 7.7)
against the linear dynamics it describes, summed direction by direction, and the predicted
plateau of gradient descent from the DMFT Hessian (rmt.experiments.grokking)."""

import numpy as np
import pytest

import rmt
from rmt.dynamics.escape import plateau_length
from rmt.experiments.grokking import plateau_law, prediction_row


def _linear_race(outlier, bulk, lr, weights=1.0):
    """The first step at which the outlier's energy, started at ``1 / N``, exceeds the weights'
    energy plus the bulk's, each bulk direction started at ``1 / N`` (N = all directions)."""
    n = bulk.size + 1
    log_o = np.log(abs(1.0 - lr * outlier))
    log_b = np.log(np.abs(1.0 - lr * bulk))
    for t in range(1, 10**6):
        energy_o = np.exp(2 * t * log_o) / n
        energy_b = np.sum(np.exp(2 * t * log_b)) / n
        if energy_o >= weights + energy_b:
            return t
    raise AssertionError("no crossing")


@pytest.mark.parametrize("edge", [-0.08, -0.095, 0.1])
def test_the_law_is_the_race_of_the_linear_dynamics(edge):
    """A uniform bulk on ``[edge, 0.5]`` of ``N - 1`` directions (quantiles of the density, so
    the sum is the integral) and one outlier at -0.1: the law's root is the first step of the
    direction-by-direction sum within one step, for a bulk that grows (edges -0.08, -0.095:
    near the threshold) and one that does not (0.1)."""
    n, lr, outlier = 4000, 0.5, -0.1
    bulk = edge + (0.5 - edge) * (np.arange(n - 1) + 0.5) / (n - 1)
    direct = _linear_race(outlier, bulk, lr)
    x = np.linspace(edge, 0.5, 2001)
    pred = plateau_length(outlier, edge, x, np.ones_like(x), width=1, d=n, lr=lr)
    assert pred.steps is not None and abs(pred.steps - direct) <= 1.0
    assert pred.gap == pytest.approx(edge - outlier)


def test_the_plateau_grows_like_d_to_the_two_thirds_at_the_threshold_and_like_log_d_far():
    """A square-root edge at -0.1: with the outlier at the edge (gap 2e-5) the bulk term grows
    like ``t^(-3/2) g_e^(2 t)``, so the root grows like ``(m d)^(2/3)``: doubling ``d``
    multiplies it by ``2^(2/3)``; far from the edge (gap 0.2) by ``log(4000) / log(2000)``."""
    x = np.linspace(-0.1, 0.5, 20001)
    rho = np.sqrt(np.clip(x + 0.1, 0, None))
    ratios = []
    for outlier in (-0.10002, -0.3):
        p1, p2 = (plateau_length(outlier, -0.1, x, rho, width=2, d=d, lr=0.5) for d in (1000, 2000))
        ratios.append(p2.steps / p1.steps)
    near, far = ratios
    assert near == pytest.approx(2 ** (2 / 3), rel=0.02)
    assert far == pytest.approx(np.log(4000) / np.log(2000), rel=0.01)


def test_no_prediction_without_a_negative_outlier_or_when_the_bulk_is_faster():
    x = np.linspace(-0.1, 0.5, 101)
    rho = np.ones_like(x)
    above = plateau_length(0.05, 0.1, x, rho, width=2, d=1000, lr=0.5)
    assert above.steps is None and "no negative outlier" in above.reason
    inside = plateau_length(-0.05, -0.1, x, rho, width=2, d=1000, lr=0.5)
    assert inside.steps is None and "no negative outlier" in inside.reason
    with pytest.raises(ValueError, match="nonnegative"):
        plateau_length(-0.2, -0.1, x, -rho, width=2, d=1000, lr=0.5)
    with pytest.raises(ValueError, match="shape"):
        plateau_length(-0.2, -0.1, x, rho[:-1], width=2, d=1000, lr=0.5)


@pytest.mark.slow
@pytest.mark.ci
def test_predicted_plateau_from_the_dmft_shortens_away_from_the_threshold():
    """Phase retrieval, softplus/Huber, m = 2: above the asymptotic delta_NN (about 2.6) the
    DMFT Hessian at its plateau has a negative Theta* outlier just below a negative edge; the
    predicted plateau falls as delta grows and grows with d, faster near the threshold."""
    cfg = rmt.RunConfig()
    laws = plateau_law(cfg, [3.0, 6.0], [1000, 2000])
    rows = {(r["delta"], r["d"]): r for law in laws for r in (prediction_row(law, 1000),
                                                               prediction_row(law, 2000))}  # fmt: skip
    for (delta, d), r in rows.items():
        assert r["outlier"] < r["edge"] < 0 and r["predicted_steps"] > 0
    assert rows[3.0, 1000]["predicted_steps"] > 2 * rows[6.0, 1000]["predicted_steps"]
    growth = {
        x: rows[x, 2000]["predicted_steps"] / rows[x, 1000]["predicted_steps"] for x in (3, 6)
    }
    assert growth[3.0] > growth[6.0] > 1.0


@pytest.mark.slow
@pytest.mark.ci
def test_predicted_plateau_against_gradient_descent_at_d_250():
    """Gradient descent at d = 250 (phase retrieval, softplus/Huber, m = 2, 4 seeds) at
    delta = 4.6 and 7: the median plateau length (escape step - plateau step) is within a
    factor 1.5 of the law's prediction from the DMFT spectrum (docs/theory.md 7.7; measured
    0.91-0.98 with 6 seeds, benchmarks/RESULTS.md)."""
    from dataclasses import replace

    from rmt.experiments.learning import run_descent

    cfg = replace(rmt.RunConfig(), d=250, train_steps=3000)
    laws = {law.delta: law for law in plateau_law(cfg, [4.6, 7.0], [250])}
    for delta, law in laws.items():
        lengths = []
        for seed in range(4):
            _, run, _ = run_descent(cfg, delta, seed, with_test=False)
            assert run.escape_step is not None
            lengths.append(run.escape_step - run.plateau_step)
        predicted = law.by_d[250].steps
        assert 1 / 1.5 <= np.median(lengths) / predicted <= 1.5, (delta, lengths, predicted)
