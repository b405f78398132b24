"""The ``Theta*`` row of a finite-``d`` run along the DMFT (docs/theory.md 7.8):
``rmt.dynamics.dmft.theta_row_covariance`` against a simulation of the linear Gaussian row,
``dmft_gd(theta_row=True)`` against gradient descent, the escape quantiles
(``rmt.dynamics.escape.seeded_escape_steps``) against sampling, and ``row_escape``."""

import numpy as np
import pytest
from scipy import stats

import rmt
from rmt.dynamics.dmft import theta_row_covariance
from rmt.dynamics.escape import seeded_escape_steps
from rmt.experiments.grokking import ROW_QUANTILES, RowEscape


def test_the_row_covariance_is_that_of_the_linear_gaussian_row():
    """Random responses and a random PSD noise covariance: the formula against 200 000 paths of
    ``v(t+1) = keep v(t) - lr sum_s R_z(t, s) v(s) - lr zeta(t)``."""
    rng = np.random.default_rng(3)
    T, m, lr, delta, init, wd = 6, 2, 0.4, 1.5, 0.3, 0.1
    R = np.zeros((T, T, m, m))
    for t in range(T):
        R[t, : t + 1] = 0.3 * rng.standard_normal((t + 1, m, m))
    A = rng.standard_normal((T * m, T * m))
    Cf = A @ A.T / (T * m)
    C = Cf.reshape(T, m, T, m).transpose(0, 2, 1, 3)
    S = theta_row_covariance(R, C, lr, delta, init, wd)
    P = 200_000
    zeta = rng.standard_normal((P, T * m)) @ np.linalg.cholesky(Cf / delta).T
    v = np.zeros((T + 1, P, m))
    v[0] = init * rng.standard_normal((P, m))
    for t in range(T):
        memory = sum(v[s] @ R[t, s].T for s in range(t + 1))
        v[t + 1] = (1 - lr * wd) * v[t] - lr * memory - lr * zeta[:, t * m : (t + 1) * m]
    for t in range(T + 1):
        emp = v[t].T @ v[t] / P
        assert np.abs(emp - S[t]).max() <= 0.02 * np.abs(S[t]).max() + 1e-12


@pytest.fixture(scope="module")
def row_and_runs():
    """The DMFT with the row (phase retrieval, softplus/Huber, m = 2, delta = 4, 40 steps)
    and ``M = W^T Theta*`` after 40 updates of 40 gradient-descent runs at d = 400."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    res = rmt.dmft_gd(model, net, 4.0, 0.5, 41, 0.01, n_samples=4000, rng=1, theta_row=True)
    d, M = 400, []
    for s in range(40):
        data = model.sample(1600, d, rng=100 + s)
        run = rmt.gradient_descent(
            net, data, lr=0.5, steps=40, rng=200 + s, init_scale=0.01, progress=False
        )
        M.append(run.W_final.T @ data.theta[:, 0])
    return res, d, np.array(M)


def test_the_row_is_the_theta_component_of_gradient_descent(row_and_runs):
    """``d M^T S^{-1} M`` of the runs is chi-square with 2 degrees of freedom (Kolmogorov-Smirnov,
    level 0.001), and the runs' mean of ``d |M|^2`` is ``tr S`` within three standard errors."""
    res, d, M = row_and_runs
    S = res.seed_cov[40]
    x = d * np.einsum("ni,ij,nj->n", M, np.linalg.inv(S), M)
    assert stats.kstest(x, stats.chi2(df=2).cdf).pvalue > 1e-3
    sq = d * np.sum(M**2, axis=1)
    assert abs(sq.mean() - np.trace(S)) < 3 * sq.std(ddof=1) / np.sqrt(sq.size)
    # the start alone (no noise) would be 2 init^2 = 2e-4: the sample's noise sets the row
    assert np.trace(S) > 100 * 2e-4


def test_the_row_leaves_the_solve_as_it_is(row_and_runs):
    res, _, _ = row_and_runs
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    plain = rmt.dmft_gd(model, net, 4.0, 0.5, 41, 0.01, n_samples=4000, rng=1)
    np.testing.assert_array_equal(plain.train_loss, res.train_loss)
    np.testing.assert_array_equal(plain.Q, res.Q)
    assert plain.seed_cov is None and res.seed_cov.shape == (42, 2, 2)


def test_the_row_is_refused_where_m_equals_zero_is_not_invariant():
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    with pytest.raises(ValueError, match="even target"):
        rmt.dmft_gd(rmt.MultiIndexModel("z1z2"), net, 4.0, 0.5, 5, theta_row=True)
    with pytest.raises(ValueError, match="even target"):
        rmt.dmft_gd(rmt.MultiIndexModel("linear"), net, 4.0, 0.5, 5, theta_row=True)
    with pytest.raises(ValueError, match="M0"):
        rmt.dmft_gd(
            rmt.MultiIndexModel("phase_retrieval"), net, 4.0, 0.5, 5, M0=[0.1, 0.0], theta_row=True
        )
    with pytest.raises(TypeError, match="theta_row"):
        rmt.dmft_gd(rmt.MultiIndexModel("phase_retrieval"), net, 4.0, 0.5, 5, theta_row="yes")


def test_escape_quantiles_against_sampled_rows():
    """An anisotropic ``S(t)`` growing at two rates: the escape step of each quantile against
    the escape steps of 100 000 sampled runs, each following ``v(t) = S(t)^{1/2} g`` with one
    ``g`` per run (the runs keep their order, so sampling is exact here)."""
    t = np.arange(300.0)
    S = np.zeros((300, 2, 2))
    S[:, 0, 0] = 0.5 * 1.05**t
    S[:, 1, 1] = 2.0 * 1.02**t
    trace_q = 1.0 + 0.01 * t
    got = seeded_escape_steps(S, trace_q, 300, quantiles=(0.1, 0.5, 0.9))
    g = np.random.default_rng(9).standard_normal((100_000, 2)) ** 2
    sq = g[:, :1] * S[None, :, 0, 0] + g[:, 1:] * S[None, :, 1, 1]
    hit = sq >= 0.5 * 300 * trace_q
    steps = np.where(hit.any(axis=1), hit.argmax(axis=1), 10**6)
    want = np.quantile(steps, [0.1, 0.5, 0.9])
    assert np.all(np.abs(np.array(got) - want) <= 1)
    # beyond the horizon: None, never a number
    assert seeded_escape_steps(S[:20], trace_q[:20], 10**6, quantiles=(0.5,)) == [None]
    with pytest.raises(ValueError, match="quantiles"):
        seeded_escape_steps(S, trace_q, 300, quantiles=(0.0,))
    with pytest.raises(ValueError, match="finite"):
        seeded_escape_steps(S * np.nan, trace_q, 300)


def test_row_lengths_are_escapes_minus_the_plateau_with_their_spread():
    row = RowEscape(
        delta=3.0, steps=500, t1=(100, 110),
        escape=({250: [150, 200, 260]}, {250: [140, 230, 300]}),
    )  # fmt: skip
    mean, se = row.length(250, 0.5)
    assert mean == pytest.approx((100 + 120) / 2) and se == pytest.approx(10.0)
    late = RowEscape(delta=3.0, steps=500, t1=(100, 110), escape=({250: [150, None, None]},) * 2)
    assert late.length(250, 0.5)[0] is None and "later than step 500" in late.length(250, 0.5)[1]
    early = RowEscape(delta=9.0, steps=500, t1=(100, 110), escape=({250: [50, 60, 70]},) * 2)
    assert early.length(250, 0.25) == (0.0, 0.0)
    assert ROW_QUANTILES == (0.25, 0.5, 0.75)


def test_row_escape_is_the_escape_of_a_direct_solve():
    """``row_escape`` against ``dmft_replicas(theta_row=True)`` with the same settings and
    seed, read by ``plateau_of_curves`` and ``seeded_escape_steps`` directly."""
    from dataclasses import replace

    from rmt.dynamics.dmft import plateau_of_curves
    from rmt.experiments.grokking import row_escape
    from rmt.thresholds.asymptotic import dmft_plateau_rule

    cfg = replace(rmt.RunConfig(), dmft_samples=400)
    row = row_escape(cfg, 7.0, [250, 1000], steps=260, replicas=2)
    rep = rmt.dmft_replicas(
        cfg.model(), cfg.net(), 7.0, cfg.lr, 260, cfg.init_scale, replicas=2, n_samples=400,
        rng=cfg.seeds[0], theta_row=True,
    )  # fmt: skip
    for r, res in enumerate(rep.results):
        t1 = plateau_of_curves(
            res.train_loss, res.grad_norm, res.overlap, dmft_plateau_rule()
        ).plateau_step
        assert row.t1[r] == t1 is not None
        tq = np.trace(res.Q, axis1=1, axis2=2)
        for d in (250, 1000):
            assert row.escape[r][d] == seeded_escape_steps(res.seed_cov, tq, d, ROW_QUANTILES)
    assert row.length(1000, 0.5)[0] > row.length(250, 0.5)[0] > 0
    with pytest.raises(ValueError, match="even target"):
        row_escape(replace(cfg, target="z1z2"), 7.0, [250], steps=50)


@pytest.mark.slow
@pytest.mark.ci
def test_the_row_gives_the_finite_size_escape_of_an_even_target():
    """Quadratic/Huber from ``init_scale = 0.01`` (phase retrieval, m = 2, ``delta = 4``,
    ``lr = 0.1``): gradient descent at d = 2000 (3 seeds) leaves ``M = 0`` by step 59, which the
    ``d -> inf`` limit cannot show (``|M|^2 = 0``, outside the tolerance of
    ``tests/test_dmft_validation.py``); the row's ``tr S / d`` is within it.  Measured:
    GD 0.034 ± 0.006, the row 0.029 ± 0.002 (4 replicas of 10 000 draws)."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="quadratic", loss="huber")
    d, sq = 2000, []
    for s in (0, 1, 2):
        data = model.sample(8000, d, rng=1000 + s)
        run = rmt.gradient_descent(
            net, data, lr=0.1, steps=59, rng=3000 + s, init_scale=0.01, progress=False
        )
        sq.append(np.sum((run.W_final.T @ data.theta) ** 2))
    rep = rmt.dmft_replicas(
        model, net, 4.0, 0.1, 60, 0.01, replicas=4, n_samples=10_000, rng=0, theta_row=True
    )
    row = np.array([np.trace(r.seed_cov[59]) / d for r in rep.results])
    se_gd = np.std(sq, ddof=1) / np.sqrt(3)
    tol = 4 * np.hypot(se_gd, row.std(ddof=1) / 2) + 3 / d
    assert abs(row.mean() - np.mean(sq)) <= tol
    assert np.mean(sq) > 4 * se_gd + 3 / d  # the limit's 0 is outside the tolerance
