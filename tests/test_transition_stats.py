"""The statistical rules behind simulated thresholds, against closed forms and simulations."""

import numpy as np
import pytest
from scipy.stats import norm

from rmt import ensembles, overlaps
from rmt.transition_stats import (
    bisect_transition,
    descent_outlier_decision,
    overlap_null_level,
    significance_interval,
)


def test_overlap_null_level_matches_random_unit_vectors():
    d, k, m = 60, 1, 2
    rng = np.random.default_rng(0)
    v = rng.standard_normal((20000, m * d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    theta = np.zeros((d, k))
    theta[0, 0] = 1.0
    ov = overlaps(v.T, theta, m)
    assert np.mean(ov) == pytest.approx(k / d, rel=0.03)
    q = overlap_null_level(d, k, m, level=0.99)
    assert np.mean(ov > q) == pytest.approx(0.01, abs=0.003)


def _negated_wigner(d, spike, shift, seed):
    """Bottom of ``shift - (spike v v^T + GOE)``: an outlier at ``shift - spike - 1/spike``."""
    s = ensembles.spiked_wigner(d, spike, rng=seed)
    vals, vecs = np.linalg.eigh(shift * np.eye(d) - s.matrix)
    return vals[:10], overlaps(vecs[:, :10], s.spike, 1)


def test_decision_finds_a_planted_negative_outlier():
    vals, ov = _negated_wigner(400, 3.0, 0.0, seed=1)
    dec = descent_outlier_decision(vals, ov, d=400, k=1, m=1)
    assert dec.has_outlier and dec.index == 0
    assert dec.value == pytest.approx(-(3.0 + 1.0 / 3.0), abs=0.1)  # closed form, d = 400
    assert dec.overlap == pytest.approx(1 - 1 / 9.0, abs=0.05)


def test_decision_rejects_a_pure_bulk_edge():
    false = 0
    for seed in range(20):
        vals, ov = _negated_wigner(300, 0.0, 0.0, seed=seed)
        false += descent_outlier_decision(vals, ov, d=300, k=1, m=1).has_outlier
    assert false <= 1


def test_decision_rejects_a_positive_outlier_and_says_why():
    vals, ov = _negated_wigner(400, 3.0, 5.0, seed=2)
    dec = descent_outlier_decision(vals, ov, d=400, k=1, m=1)
    assert not dec.has_outlier and dec.n_outliers == 1 and "not negative" in dec.reason


def test_decision_validates_input():
    with pytest.raises(ValueError, match="at least 4"):
        descent_outlier_decision([1.0, 2.0], [0.1, 0.1], d=10, k=1, m=1)
    with pytest.raises(ValueError, match="ascending"):
        descent_outlier_decision([3.0, 2.0, 4.0, 5.0], [0.0] * 4, d=10, k=1, m=1)


def test_bisection_locates_a_sharp_step():
    est = bisect_transition(lambda x, s: x > 2.5, 0.5, 8.0, seeds=(0, 1, 2), rtol=0.02)
    assert est.found
    assert est.bracket[0] <= 2.5 <= est.bracket[1]
    assert est.bracket[1] / est.bracket[0] <= 1.02
    assert est.interval[0] <= 2.5 <= est.interval[1]


def test_bisection_interval_covers_a_noisy_threshold():
    """Outcomes with P(yes) = Phi(log(delta/2)/0.15); the interval must cover delta = 2."""
    covered = 0
    for rep in range(20):

        def outcome(x, s, rep=rep):
            u = np.random.default_rng([rep, s, int(1e6 * x)]).random()
            return u < norm.cdf(np.log(x / 2.0) / 0.15)

        est = bisect_transition(outcome, 0.5, 8.0, seeds=range(5), rtol=0.05, alpha=0.1)
        covered += est.found and est.interval[0] <= 2.0 <= est.interval[1]
    assert covered >= 17


def test_bisection_reports_an_unbracketed_search():
    est = bisect_transition(lambda x, s: True, 0.5, 8.0, seeds=(0, 1))
    assert not est.found and np.isnan(est.delta) and "already" in est.reason
    est = bisect_transition(lambda x, s: False, 0.5, 8.0, seeds=(0, 1))
    assert not est.found and "still" in est.reason


def test_significance_interval_spans_a_non_monotone_record():
    evals = [(1.0, 5, 5), (2.0, 0, 5), (4.0, 5, 5)]  # yes at 1, no at 2: not monotone
    assert significance_interval(evals, 0.1, (0.5, 8.0)) == (1.0, 2.0)


def test_significance_interval_pools_neighbouring_evaluations():
    """Three seeds alone are never significant at 0.1 (1/8 > 0.1); pooled neighbours are."""
    evals = [(1.0, 0, 3), (2.83, 0, 3), (4.76, 0, 3), (5.08, 0, 3), (5.42, 2, 3), (6.17, 2, 3)]
    lo, hi = significance_interval(evals + [(8.0, 3, 3)], 0.1, (1.0, 8.0))
    # 0/6 over [4.76, 5.08] has P = 1/64; 0/3 + 2/3 over [5.08, 5.42] is not significant
    assert lo == 4.76
    # yes at 8: 3/3 alone P = 1/8; 7/9 over [5.42, 8] has P = 0.09 <= 0.1
    assert hi == 8.0
    assert significance_interval(evals + [(8.0, 3, 3), (9.0, 3, 3)], 0.1, (1, 9))[1] == 8.0
