"""The statistical rules behind simulated thresholds, against closed forms and simulations."""

import json

import numpy as np
import pytest
from scipy.stats import beta, kstest, norm
from scipy.stats import t as student

from rmt import overlaps
from rmt.problem import ensembles
from rmt.thresholds.statistics import (
    ORDER_LEVEL,
    bisect_order_parameter,
    bisect_transition,
    crossing_estimate,
    descent_outlier_decision,
    order_level,
    order_parameter,
    overlap_null_level,
    overlap_null_sf,
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


def test_overlap_null_law_of_several_directions_matches_random_unit_vectors():
    """k = 2, m = 3: Beta(mk/2, m(d-k)/2) = Beta(3, 57) against 20000 seeded unit vectors; the
    KS test rejects a correct law with probability 0.001, the tail counts are 4 sigma."""
    d, k, m, draws = 40, 2, 3, 20000
    rng = np.random.default_rng(7)
    v = rng.standard_normal((draws, m * d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    theta = np.linalg.qr(rng.standard_normal((d, k)))[0]
    ov = overlaps(v.T, theta, m)
    assert kstest(ov, beta(m * k / 2, m * (d - k) / 2).cdf).pvalue > 1e-3
    # the Bonferroni quantile over 5 tests: each exceeds it with probability 0.01 / 5
    q = overlap_null_level(d, k, m, level=0.99, n_tests=5)
    p, sd = 0.002, np.sqrt(0.002 * 0.998 / draws)
    assert abs(np.mean(ov > q) - p) < 4 * sd
    assert overlap_null_sf(q, d, k, m) == pytest.approx(p, rel=1e-9)


def test_null_tail_of_one_direction_is_the_closed_form():
    """m = 2, k = 1: Beta(1, m(d-1)/2) has the tail (1 - x)^(d-1) (a closed form)."""
    d = 1000
    for x in (0.007, 0.01, 0.05):
        assert overlap_null_sf(x, d, 1, 2) == pytest.approx((1 - x) ** (d - 1), rel=1e-9)
    # 0.7% of Theta* is the 0.999 quantile of one test, and within the null over 200 tests
    assert overlap_null_level(d, 1, 2, level=0.999) == pytest.approx(-np.log(1e-3) / 999, rel=0.01)
    assert overlap_null_level(d, 1, 2, level=0.99, n_tests=200) > 0.007


def _goe(N, rng):
    A = rng.standard_normal((N, N))
    return (A + A.T) / np.sqrt(2.0 * N)


def _family_fires(spectra, d, k, m, alpha, n_spectra, **kw):
    """Whether any of ``n_spectra`` decisions (3 bottom eigenvectors tested each) says yes."""
    theta = np.zeros((d, k))
    theta[0, 0] = 1.0
    fired = False
    for vals, vecs in spectra:
        ov = overlaps(vecs, theta, m)
        dec = descent_outlier_decision(
            vals, ov, d, k, m, alpha=alpha, n_vectors=3, n_spectra=n_spectra, **kw
        )
        fired |= dec.has_outlier
    return fired


def test_decision_never_fires_on_pure_noise_spectra():
    """GOE spectra with no spike (N = m d = 100; eigenvectors uniformly random), in 150 families
    of 10 spectra with 3 bottom eigenvectors tested each: the family-wise rate of the bare test
    (no stated level) is at most alpha = 0.05, within 3 binomial sigma."""
    d, k, m, alpha, n_spectra, families = 50, 1, 2, 0.05, 10, 150
    rng = np.random.default_rng(11)
    fired = 0
    for _ in range(families):
        spectra = []
        for _ in range(n_spectra):
            vals, vecs = np.linalg.eigh(_goe(m * d, rng))
            spectra.append((vals[:8], vecs[:, :8]))
        fired += _family_fires(spectra, d, k, m, alpha, n_spectra, min_overlap=0.0)
    assert fired / families <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / families)


def test_decision_never_fires_on_null_bottoms_at_the_simulated_size():
    """d = 1000, m = 2: bottoms of a GOE of size 2000, whose eigenvectors are a uniformly random
    orthonormal frame independent of the eigenvalues (drawn here by QR of Gaussian columns), in
    400 families of 10.  The bare test fires at the rate of 30 independent tests at 0.05/30
    (3 sigma); with the stated level it never fires."""
    d, k, m, alpha, n_spectra, families = 1000, 1, 2, 0.05, 10, 400
    rng = np.random.default_rng(12)
    vals = np.linalg.eigvalsh(_goe(200, rng))[:8]  # negative, ascending
    bare = level = 0
    for _ in range(families):
        frames = [np.linalg.qr(rng.standard_normal((m * d, 8)))[0] for _ in range(n_spectra)]
        spectra = [(vals, f) for f in frames]
        bare += _family_fires(spectra, d, k, m, alpha, n_spectra, min_overlap=0.0)
        level += _family_fires(spectra, d, k, m, alpha, n_spectra)
    p = 1 - (1 - alpha / 30) ** 30
    assert abs(bare / families - p) <= 3 * np.sqrt(p * (1 - p) / families)
    assert level == 0


def test_decision_rejects_a_separated_bottom_with_a_null_overlap():
    """A negative eigenvalue 34 median spacings below the rest whose eigenvector carries 0.7% of
    Theta* (d = 1000, m = 2): separated, but its overlap is within the null."""
    vals = np.array([-0.1, -0.066, -0.065, -0.064, -0.063, -0.062, -0.061, -0.060])
    ov = np.array([0.007, 0.001, 0.0, 0.002, 0.001, 0.0, 0.0, 0.001])
    dec = descent_outlier_decision(vals, ov, d=1000, k=1, m=2, n_spectra=16)
    assert not dec.has_outlier and dec.n_outliers == 1 and dec.gap_ratio == pytest.approx(34)
    assert "within the null" in dec.reason
    assert dec.p_value == pytest.approx(min(1.0, 16 * (1 - 0.007) ** 999), rel=1e-9)
    assert dec.threshold == ORDER_LEVEL


def test_decision_fires_on_a_planted_spike_in_two_neurons():
    """``shift - (spike v v^T + GOE)`` in R^{2d}, ``v`` inside R^2 (x) span(theta) (k = 2): the
    bottom is ``-(spike + 1/spike)`` with squared overlap ``1 - 1/spike^2`` (closed forms)."""
    d, m, spike = 300, 2, 3.0
    s = ensembles.spiked_wigner(m * d, spike, rng=3)
    theta = np.linalg.qr(s.spike.reshape(m, d).T)[0]  # d x 2: the spike lies in R^2 (x) theta
    vals, vecs = np.linalg.eigh(-s.matrix)
    ov = overlaps(vecs[:, :8], theta, m)
    dec = descent_outlier_decision(vals[:8], ov, d=d, k=2, m=m, n_spectra=100)
    assert dec.has_outlier and dec.index == 0
    assert dec.value == pytest.approx(-(spike + 1 / spike), abs=0.1)
    assert dec.overlap == pytest.approx(1 - 1 / spike**2, abs=0.05)
    assert dec.p_value < 1e-100


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
    with pytest.raises(ValueError, match="alpha"):
        descent_outlier_decision([1.0, 2.0, 3.0, 4.0], [0.0] * 4, d=10, k=1, m=1, alpha=1.0)


def test_order_parameter_is_the_overlap_of_a_descent_direction():
    assert order_parameter(-0.05, 0.2) == 0.2
    assert order_parameter(0.01, 0.9) == 0.0  # no descent direction
    assert order_parameter(None, None) == 0.0  # no plateau, no W1


def test_order_level_is_the_stated_level_unless_the_null_reaches_it():
    # d = 1000, m = 2: the null over 4 seeds x 8 deltas stays below 1%: the level is 5%
    assert order_level(1000, 1, 2, 32) == ORDER_LEVEL
    # d = 60: Beta(1, 59) over 32 draws at 0.01 has the quantile 1 - (1e-2/32)^(1/59) > 5%
    assert order_level(60, 1, 2, 32) == pytest.approx(1 - (0.01 / 32) ** (1 / 59), rel=1e-9)


def test_crossing_estimate_interpolates_and_tests_each_end():
    """Hand computation: the crossing of 0.05 between 2.5 (mean 0.04) and 3 (mean 0.21) is
    ``2.5 (3/2.5)^(1/17)``; an end is significant when the t bound at 0.1/(2*3) clears 0.05."""
    evals = [(2.0, [0.01, 0.02, 0.0]), (3.0, [0.2, 0.22, 0.21]), (2.5, [0.02, 0.06, 0.04])]
    est = crossing_estimate(evals, 0.05, alpha=0.1)
    assert est.found and est.bracket == (2.5, 3.0)
    assert est.delta == pytest.approx(2.5 * 1.2 ** (1 / 17), rel=1e-12)
    t = student.ppf(1 - 0.1 / 6, 2)
    assert 0.01 + t * 0.01 / np.sqrt(3) < 0.05  # 2.0: significantly below
    assert 0.04 + t * 0.02 / np.sqrt(3) > 0.05  # 2.5: not significant
    assert est.interval == (2.0, 3.0)
    json.dumps(est.as_dict(), allow_nan=False)


def test_crossing_estimate_says_why_there_is_no_number():
    low = crossing_estimate([(1.0, [0.0, 0.01]), (8.0, [0.01, 0.02])], 0.05)
    assert not low.found and low.delta is None and "stays below" in low.reason
    high = crossing_estimate([(1.0, [0.3, 0.2]), (8.0, [0.4, 0.5])], 0.05)
    assert not high.found and "already" in high.reason
    one = crossing_estimate([(1.0, [0.0]), (2.0, [0.3])], 0.05)
    assert one.found and one.interval is None and "one seed" in one.interval_reason
    for est in (low, high, one):
        json.dumps(est.as_dict(), allow_nan=False)


def test_order_parameter_bisection_covers_a_planted_crossing():
    """Seed values ``max(0, 0.6 (delta - 2.5)) + |N(0, 0.02)|``, whose mean crosses 0.05 at
    ``2.5 + (0.05 - 0.02 sqrt(2/pi)) / 0.6 = 2.557``: the interval must cover it in at least 17
    of 20 repetitions and be narrower than [2, 4]."""
    x_true = 2.5 + (0.05 - 0.02 * np.sqrt(2 / np.pi)) / 0.6
    covered = 0
    for rep in range(20):

        def measure(x, s, rep=rep):
            u = np.random.default_rng([rep, s, int(1e6 * x)]).standard_normal()
            return max(0.0, 0.6 * (x - 2.5)) + 0.02 * abs(u)

        est = bisect_order_parameter(measure, 1.0, 8.0, range(4), 1000, 1, 2, rtol=0.03)
        assert est.found and est.level == ORDER_LEVEL and abs(est.delta - x_true) < 0.1
        lo, hi = est.interval
        covered += lo is not None and hi is not None and lo <= x_true <= hi
        assert lo is not None and hi is not None and hi - lo < 2
    assert covered >= 17


def test_order_parameter_bisection_finds_nothing_in_null_overlaps():
    """Seed values drawn from the null law itself (d = 100, m = 2), with no stated level: the
    mean never reaches the null quantile over all draws in 200 searches (bound: fwer = 0.05)."""
    found = 0
    for rep in range(200):

        def measure(x, s, rep=rep):
            rng = np.random.default_rng([rep, s, int(1e6 * x)])
            return rng.beta(1.0, 99.0)

        est = bisect_order_parameter(
            measure, 1.0, 8.0, range(3), 100, 1, 2, level=0.0, fwer=0.05, max_evals=6
        )
        found += est.found
        # 3 seeds x (6 bisection + 4 confirming evaluations) spectra counted
        assert est.level == pytest.approx(beta.isf(0.05 / 30, 1.0, 99.0), rel=1e-9)
    assert found <= 0.05 * 200


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
