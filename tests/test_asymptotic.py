"""The asymptotic ``delta_NN`` (``rmt.thresholds.asymptotic``, docs/theory.md 8.10).

- The search (walk, regula falsi, pilot and straddle, interpolation, jackknife) on planted
  margins whose root and standard error are known in closed form.
- The BBP margin of the ``Theta*`` direction against ``rmt.bbp_threshold`` on a population
  law, and against the outliers it stands for.
- The replicas: their mean curves and errors against the individual solves, and one shared
  plateau.
- The law check: a planted shift of the margin with the law's draws against its closed-form
  decision; the square loss (whose law's left edge is set by rare draws) flagged and the Huber
  loss not, each confirmed by the edge of a law of 16 times the draws.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rmt
import rmt.thresholds.asymptotic as dt
from rmt.dynamics.dmft import CURVE_SMOOTHING, hessian_at_step, resampled_laws, smoothed_curve
from rmt.thresholds.asymptotic import DMFTEvaluation

ROOT, SLOPE = 2.7, 0.03
#: the replicas' offsets of a planted margin: the same at every delta (common draws); replica
#: ``r`` has offset ``OFFSETS[r]`` whatever batch it is solved in
OFFSETS = np.concatenate(
    [[0.004, -0.002, 0.001, -0.005, 0.003, 0.0, -0.001, 0.002],
     np.random.default_rng(11).normal(0.0, 0.003, 24)]
)  # fmt: skip


def _failed(delta, message, replicas):
    """An evaluation that failed at ``delta``: no margin, only its message."""
    nan = np.full(replicas, np.nan)
    return DMFTEvaluation(
        delta=delta,
        t1=None,
        margins=nan,
        loo_margins=nan,
        margin=np.nan,
        margin_se=np.nan,
        hessians=(),
        converged=False,
        message=message,
    )


def _planted(fail_below=None, calls=None, pilot_shift=0.0, full=4000, log=False, batches=None):
    """A :func:`dmft_margin` whose replica ``r`` has the margin ``SLOPE (delta - ROOT) +
    OFFSETS[r]`` (with ``log``: ``SLOPE ROOT log(delta / ROOT) + OFFSETS[r]``), failing (no
    plateau) below ``fail_below``; evaluations with fewer than ``full`` draws (the pilot's)
    have their root moved by ``pilot_shift``.  ``calls`` collects ``(delta, n_samples)``,
    ``batches`` the ``(first_replica, replicas)`` of the evaluations with ``full`` draws."""

    def fake(model, net, delta, *, replicas, n_samples, rng, first_replica=0, **kwargs):
        if calls is not None:
            calls.append((delta, n_samples))
        if batches is not None and n_samples >= full:
            batches.append((first_replica, replicas))
        if fail_below is not None and delta < fail_below:
            return _failed(delta, "no plateau within 1200 steps", replicas)
        root = ROOT + (pilot_shift if n_samples < full else 0.0)
        x = ROOT * np.log(delta / root) if log else delta - root
        g = SLOPE * x + OFFSETS[first_replica : first_replica + replicas]
        loo = np.array([np.delete(g, i).mean() for i in range(replicas)])
        se = float(np.sqrt((replicas - 1) / replicas * np.sum((loo - loo.mean()) ** 2)))
        return DMFTEvaluation(
            delta=delta,
            t1=100,
            margins=g,
            loo_margins=loo,
            margin=float(g.mean()),
            margin_se=se,
            hessians=(),
            converged=True,
            message="ok",
            vertex=100.0,
        )

    return fake


def _assert_the_planted_root(out, log=False, R=8):
    """``out`` holds the root of the mean planted margin of the first ``R`` replicas and its
    jackknife error, exactly: ``ROOT - mean(e) / SLOPE`` and ``std(e) / (SLOPE sqrt(R))``
    (with ``log``: ``ROOT exp(-mean(e) / (SLOPE ROOT))`` and the jackknife of ``ROOT
    exp(-e_(-r) / (SLOPE ROOT))`` over the leave-one-out means ``e_(-r)``); returns the
    root."""
    assert out.converged, out.message
    e = OFFSETS[:R]
    if log:
        want = ROOT * np.exp(-e.mean() / (SLOPE * ROOT))
        loo = (e.sum() - e) / (R - 1)  # the leave-one-out means
        want_se = _jackknife_of(ROOT * np.exp(-loo / (SLOPE * ROOT)))
    else:
        want = ROOT - e.mean() / SLOPE
        want_se = e.std(ddof=1) / (SLOPE * np.sqrt(R))
    np.testing.assert_allclose(out.value, want, rtol=1e-10)
    np.testing.assert_allclose(out.stderr, want_se, rtol=1e-8)
    return want


def _jackknife_of(loo):
    R = loo.size
    return np.sqrt((R - 1) / R * np.sum((loo - loo.mean()) ** 2))


def test_the_search_finds_the_root_and_the_jackknife_error_of_a_planted_margin(monkeypatch):
    """A margin linear in ``log delta`` with replica offsets ``e_r``: the Newton step in
    ``log delta`` from the pilot's root is exact, so the value is the root of the mean
    margin, ``ROOT exp(-mean(e) / (SLOPE ROOT))``, and its error the jackknife of the leave-one-out
    roots."""
    calls = []
    monkeypatch.setattr(dt, "dmft_margin", _planted(calls=calls, log=True))
    out = rmt.dmft_delta_nn(None, None, n_samples=4000, pilot=4, stderr_rtol=None)
    want = _assert_the_planted_root(out, log=True)
    assert out.lo <= want <= out.hi and out.hi / out.lo <= 1.11
    # the pilot walks with a quarter of the draws; one evaluation at its root uses them all
    assert {n for _, n in calls} == {1000, 4000} and len(out.evaluations) == 1
    assert set(out.pilot_evaluations) == {x for x, n in calls if n == 1000}
    assert "Newton step" in out.message and out.replicas == 8


def test_a_finite_size_takes_each_law_from_the_samples_of_that_network(monkeypatch):
    """With ``d``, every evaluation (the pilot's, the full one and its further replicas) takes
    its laws from ``ceil(delta d)`` draws, the ``n`` samples of a network of input dimension
    ``d`` at that ``delta``, and no law check is made; the root is the planted one."""
    laws = []
    fake = _planted(log=True)

    def recording(model, net, delta, *, law_draws, law_check, **kwargs):
        laws.append((delta, law_draws, law_check))
        return fake(model, net, delta, **kwargs)

    monkeypatch.setattr(dt, "dmft_margin", recording)
    out = rmt.dmft_delta_nn(None, None, n_samples=4000, d=1000)
    _assert_the_planted_root(out, log=True, R=out.replicas)
    assert out.d == 1000 and np.isnan(out.law_shift) and out.replicas > 8
    assert len({x for x, _, _ in laws}) >= 3
    for delta, n, checked in laws:
        assert n == int(np.ceil(delta * 1000)) and checked is False
    with pytest.raises(ValueError, match="d must be"):
        rmt.dmft_delta_nn(None, None, d=1)


def test_further_replicas_bring_the_error_to_its_goal(monkeypatch):
    """With the default standard error goal (0.75% of the value), replicas are added at the
    Newton point in batches sized by the ``R^{-1/2}`` law (at least 4, at most half the
    replicas so far, each batch starting where the last ended): the value and error are then
    exactly those of all the replicas used, and the error meets the goal; with a cap on the
    replicas the goal is missed and the message says so."""
    calls, batches = [], []
    monkeypatch.setattr(dt, "dmft_margin", _planted(calls=calls, log=True, batches=batches))
    out = rmt.dmft_delta_nn(None, None, n_samples=4000)
    R = out.replicas
    assert 8 < R < 32 and out.stderr <= dt.STDERR_RTOL * out.value
    assert batches[0] == (0, 8) and sum(n for _, n in batches) == R
    for (first, n), (after, _) in zip(batches[1:], batches[2:] + [(R, 0)]):
        assert 4 <= n <= max(first // 2, 4) and after == first + n, batches
    _assert_the_planted_root(out, log=True, R=R)
    (ev,) = out.evaluations.values()
    e = OFFSETS[:R]
    np.testing.assert_allclose(ev.margins - ev.margins.mean(), e - e.mean(), rtol=0, atol=1e-15)
    # every replica beyond the first 8 came from a new seed, none twice
    assert sum(1 for _, n in calls if n == 4000) >= 2
    capped = rmt.dmft_delta_nn(None, None, n_samples=4000, stderr_rtol=1e-4, max_replicas=12)
    assert capped.converged and capped.replicas == 12 and "was not reached" in capped.message
    _assert_the_planted_root(capped, log=True, R=12)


def test_the_pilot_slope_is_the_least_squares_line_over_its_near_points():
    """Two close pilot points with noisy margins do not set the slope alone: every
    converged pilot point within a factor 2 of the root enters a least-squares line in
    ``log delta``, and the leave-one-out slopes are those of the leave-one-out margins."""
    R = 4

    def ev(delta, margin, loo_shift):
        loo = margin + loo_shift * np.arange(R)
        return DMFTEvaluation(
            delta=delta,
            t1=100,
            margins=np.full(R, margin),
            loo_margins=loo,
            margin=margin,
            margin_se=0.0,
            hessians=(),
            converged=True,
            message="ok",
        )

    pts = {6.0: ev(6.0, 0.05, 0.0), 4.0: ev(4.0, 0.03, 1e-4), 2.62: ev(2.62, 0.0005, -2e-4),
           2.60: ev(2.60, -0.0004, 3e-4)}  # fmt: skip
    slope, slopes = dt._pilot_slope(pts, 2.61, pts[2.60], pts[2.62])
    x = np.log([4.0, 2.62, 2.60]) - np.log(2.61)  # 6.0 is beyond the factor 2
    assert slope == pytest.approx(np.polyfit(x, [0.03, 0.0005, -0.0004], 1)[0], rel=1e-10)
    for r in range(R):
        y = [0.03 + 1e-4 * r, 0.0005 - 2e-4 * r, -0.0004 + 3e-4 * r]
        assert slopes[r] == pytest.approx(np.polyfit(x, y, 1)[0], rel=1e-10)


@pytest.mark.parametrize("shift, full_evaluations", [(0.2, 2), (0.4, 3), (-0.3, 3)])
def test_a_pilot_that_misses_the_root_is_corrected_with_full_evaluations(
    monkeypatch, shift, full_evaluations
):
    """The pilot's margin has its root ``shift`` away: the Newton step from its root leaves
    ``NEWTON_STEP``, so one full evaluation goes past the Newton value, on the far side from
    the pilot's root; the two bracket the root (narrowed by regula falsi when they are more
    than ``rtol`` apart) and the value is interpolated between the closest two: the root of
    the full margin and its jackknife error, exactly."""
    calls = []
    monkeypatch.setattr(dt, "dmft_margin", _planted(calls=calls, pilot_shift=shift))
    out = rmt.dmft_delta_nn(None, None, n_samples=4000, pilot=4)
    want = _assert_the_planted_root(out)
    assert "interpolated" in out.message and len(out.evaluations) == full_evaluations
    assert out.lo < want < out.hi and out.hi / out.lo <= 1.1
    # the first full evaluation is at the pilot's root (exact: a linear margin); the next
    # go away from it past the Newton value (at -0.3 the first of them falls short)
    full = [x for x, n in calls if n == 4000]
    assert full[0] == pytest.approx(ROOT + shift - OFFSETS[:8].mean() / SLOPE, rel=1e-9)
    assert (full[1] - full[0]) * (want - full[0]) > 0
    assert any((x - want) * (full[0] - want) < 0 for x in full[1:])


def test_the_walk_keeps_its_direction_when_two_close_margins_are_noise():
    """Two close points whose margins fall with ``delta`` (noise): the next point comes from
    the secant through the farthest point, not a blind halving of ``delta``."""
    nan = np.full(2, np.nan)

    def ev(delta, margin):
        return DMFTEvaluation(
            delta=delta,
            t1=100,
            margins=nan,
            loo_margins=nan,
            margin=margin,
            margin_se=0.0,
            hessians=(),
            converged=True,
            message="ok",
        )

    evals = {4.0: ev(4.0, 0.03), 2.67: ev(2.67, 0.0011), 2.61: ev(2.61, 0.0020)}
    nxt = dt._next_point(evals[2.61], evals[2.67], evals)
    slope = (0.03 - 0.0020) / (4.0 - 2.61)
    root = 2.61 - 0.0020 / slope
    assert nxt == pytest.approx(root - 0.1 * (2.61 - root), rel=1e-12)


def test_a_failed_evaluation_does_not_end_the_search(monkeypatch):
    """Points below 2.2 find no plateau: the search goes on above them, and when it cannot
    bracket the root it says why, with no number."""
    monkeypatch.setattr(dt, "dmft_margin", _planted(fail_below=2.2))
    out = rmt.dmft_delta_nn(None, None, start=8.0, pilot=1)
    assert out.converged and abs(out.value - (ROOT - OFFSETS[:8].mean() / SLOPE)) < 1e-9
    monkeypatch.setattr(dt, "dmft_margin", _planted(fail_below=3.0))
    bad = rmt.dmft_delta_nn(None, None, start=8.0, pilot=1)
    assert not bad.converged and np.isnan(bad.value) and np.isnan(bad.stderr)
    assert "no plateau within 1200 steps" in bad.message
    assert any(not ev.converged for ev in bad.evaluations.values())


def test_no_sign_change_and_bad_input_are_reported(monkeypatch):
    monkeypatch.setattr(dt, "dmft_margin", _planted())
    out = rmt.dmft_delta_nn(None, None, 3.0, 8.0, pilot=1)
    assert not out.converged and "no sign change" in out.message and np.isnan(out.value)
    with pytest.raises(ValueError, match="hi must exceed lo"):
        rmt.dmft_delta_nn(None, None, 2.0, 1.0)
    with pytest.raises(TypeError, match="rng must be a non-negative int"):
        rmt.dmft_delta_nn(None, None, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="replicas"):
        rmt.dmft_delta_nn(None, None, replicas=1)


def test_theta_margin_vanishes_at_the_bbp_threshold_of_a_population_law():
    """The root in ``delta`` of :func:`rmt.theta_margin` on the population law of phase
    retrieval (softplus/Huber, ``Q = I``) against :func:`rmt.bbp_threshold` (its own scan and
    Brent root): the same BBP point, and a left ``Theta*`` outlier exactly where the margin
    is positive."""
    from scipy.optimize import brentq

    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    law = rmt.SpikeLaw.from_network(model, net, np.eye(2))
    ref = rmt.bbp_threshold(law, "left")
    assert ref.found
    root = brentq(lambda x: rmt.theta_margin(law, x), 0.5 * ref.delta, 2 * ref.delta, xtol=1e-10)
    assert abs(root - ref.delta) <= 1e-6 * ref.delta
    for x, has in ((0.9 * ref.delta, False), (1.1 * ref.delta, True)):
        assert (rmt.theta_margin(law, x) > 0) == has
        theta = [o for o in rmt.outliers(law, x, "left") if o.overlap_theta > 1e-3]
        assert bool(theta) == has


def test_replicas_share_one_plateau_and_report_the_error_of_their_curves():
    """:func:`rmt.dmft_replicas`: each replica is the solve of its own draws (its curves equal
    a lone :func:`rmt.dmft_gd` driven by the same draws), the mean and standard error are
    those of the replicas' curves, and with ``stop_at_plateau`` all stop at the plateau of the
    mean curves."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    reps = rmt.dmft_replicas(model, net, 4.0, 0.5, 400, replicas=3, n_samples=400, n_test=200,
                             rng=5, stop_at_plateau=True)  # fmt: skip
    assert reps.converged and reps.plateau is not None
    steps = {r.steps for r in reps.results}
    assert steps == {reps.plateau + 51 + CURVE_SMOOTHING}
    stack = np.stack([r.train_loss for r in reps.results])
    np.testing.assert_allclose(reps.mean("train_loss"), stack.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(reps.stderr("train_loss"), stack.std(axis=0, ddof=1) / np.sqrt(3))
    # the rule read the moving averages of the mean curves
    smooth = [smoothed_curve(reps.mean(k)) for k in ("train_loss", "grad_norm", "overlap")]
    phases = rmt.segment_phases(*smooth, escape_overlap=0.5)
    assert phases.plateau_step == reps.plateau
    with pytest.raises(ValueError, match="name must be one of"):
        reps.mean("loss")


def test_the_margin_at_a_plateau_has_a_jackknife_error_of_the_replicas_spread():
    """:func:`rmt.dmft_margin` at ``delta = 4`` (far above ``delta_NN``): a negative
    ``Theta*`` outlier in every replica, all at the shared plateau's vertex, a mean margin many
    standard errors above 0, and a jackknife error within a factor 3 of the replicas' plain
    ``std / sqrt(R)`` (they differ by the vertex found again without each replica)."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    ev = rmt.dmft_margin(model, net, 4.0, replicas=4, n_samples=800)
    assert ev.converged, ev.message
    # one step for all: the nearest to the vertex, which lies within the window around t1
    assert all(h.negative for h in ev.hessians) and len({h.t1 for h in ev.hessians}) == 1
    assert abs(ev.hessians[0].t1 - ev.vertex) <= 0.5 and abs(ev.vertex - ev.t1) <= 20
    plain = ev.margins.std(ddof=1) / 2
    assert ev.margin > 5 * ev.margin_se
    assert plain / 3 <= ev.margin_se <= 3 * plain
    # every number of the Hessian comes with its error over the replicas
    edges = np.array([h.edge_lo for h in ev.hessians])
    assert ev.mean("edge_lo") == pytest.approx(edges.mean(), rel=1e-14)
    assert ev.stderr("edge_lo") == pytest.approx(edges.std(ddof=1) / 2, rel=1e-12)
    assert ev.mean("theta_outlier") < ev.mean("edge_lo")  # the outlier lies below the bulk
    with pytest.raises(ValueError, match="name must be one of"):
        ev.mean("t1")


def test_the_first_confirmed_minimum_is_the_plateau_however_shallow():
    """A smoothed mean gradient norm ``e^{-t/20} + A e^{t/40}`` has one minimum, at
    ``t* = (40/3) log(2/A)``, of depth ``3 (A/2)^{2/3} / (1 + A)`` of its peak.  With
    ``A = 0.07`` that depth is 0.30: the default rule of :func:`rmt.dmft_margin` takes the
    minimum (to a step: the moving average of a convex curve moves its minimum by less), while
    the gradient-descent rule's depth 0.2 would pass it by."""
    from types import SimpleNamespace

    A = 0.07
    t = np.arange(200.0)
    g = np.exp(-t / 20) + A * np.exp(t / 40)
    star = 40 / 3 * np.log(2 / A)
    assert 3 * (A / 2) ** (2 / 3) / (1 + A) == pytest.approx(0.30, abs=0.005)
    reps = [SimpleNamespace(train_loss=g, grad_norm=g, overlap=0 * t) for _ in "ab"]
    t1, how = dt._plateau(reps, dt.dmft_plateau_rule())
    assert how == "local_min" and abs(t1 - star) <= 1
    assert dt._plateau(reps, rmt.PlateauRule(window=dt.PLATEAU_WINDOW))[1] != "local_min"
    # the parabola through the 41 steps around it (the curve is not a parabola over so many)
    assert abs(dt._vertex(reps, t1) - star) <= 2


def test_a_continued_norm_that_rises_again_has_a_plateau_only_beyond_its_noise():
    """While a converging phase is continued, a minimum of the smoothed mean norm is a plateau
    only when the norms rise from it beyond the draws' noise (chosen on one half of the
    replicas, tested on the other).  Eight replicas
    of ``0.1 e^{-t/40} + 0.02 + 1e-3 (t - 150)_+ / 10`` (a minimum at step 150, then an
    escape) with independent noise: the minimum, found within the smoothing's shift.  The
    same curves without the escape, flat at the floor: the smoothed mean still has minima
    (its own noise), and none is taken."""
    from types import SimpleNamespace

    t = np.arange(400.0)
    rng = np.random.default_rng(3)
    noise = rng.normal(0.0, 4e-3, (8, t.size))
    floor = 0.1 * np.exp(-t / 40) + 0.02
    rise = floor + 1e-3 * np.clip(t - 150, 0, None) / 10
    escape = [SimpleNamespace(grad_norm=rise + e) for e in noise]
    low = dt._escape_minimum(escape, 60, 300, dt.PLATEAU_WINDOW)
    assert low is not None and abs(low - 150) <= 15
    flat = [SimpleNamespace(grad_norm=floor + e) for e in noise]
    g = smoothed_curve(np.mean([r.grad_norm for r in flat], axis=0))
    lows = [s for s in range(180, 370) if g[s] == g[s - 20 : s + 21].min()]
    assert lows  # the noise makes minima that the look-ahead alone would confirm
    assert dt._escape_minimum(flat, 180, 390, dt.PLATEAU_WINDOW) is None


def _margins_of_a_longer_solve(model, net, delta, steps, times, n_samples, law_draws):
    """The mean learning margin (and its standard error) at ``times`` of the replicas of
    :func:`rmt.dmft_margin`'s defaults (8 replicas, seed 0), solved without stopping for
    ``steps`` steps, with the same seeds of their laws."""
    reps = rmt.dmft_replicas(
        model, net, delta, 0.5, steps, 1e-2, replicas=8, n_samples=n_samples,
        n_test=dt.N_TEST, rng=0,
    )  # fmt: skip
    M = []
    for i, r in enumerate(reps.results):
        gen = np.random.default_rng([0, dt.LAW_STREAM, i])
        laws = resampled_laws(r, model, net, times, law_draws, gen)
        M.append([hessian_at_step(r, net, s, law=laws[s]).learning_margin for s in times])
    M = np.array(M)
    return M.mean(axis=0), M.std(axis=0, ddof=1) / np.sqrt(len(M))


def test_a_first_phase_that_converges_gives_a_margin_only_once_it_has_settled():
    """softplus/Huber at m = 1 has no minimum of the gradient norm: the first phase converges
    slowly and the learning margin drifts along it.  At ``delta = 8`` the solve is continued
    past the rule's plateau until the margin settles: the margin is that of the same replicas
    solved at once to 200 steps beyond, at the step read, and 200 steps later it has moved by
    at most ``SETTLED_FRACTION`` of its error (0.0011 against 0.0022; from ``t1 + 20``, where
    the rule's look-ahead ends, it moves by 0.0043).  At ``delta = 4`` it does not settle
    within 300 steps: the evaluation is refused, and the longer solve shows the margin at the
    last step a read within the budget reaches still moving by more than
    ``SETTLED_FRACTION`` of its error (0.0040 by step 600 against 0.0035).  erf/Huber at
    ``delta = 16`` converges fast: read 20 steps after the loss goes flat."""
    model = rmt.MultiIndexModel("phase_retrieval")
    soft = rmt.TwoLayerNet(1, activation="softplus", loss="huber")
    erf = rmt.TwoLayerNet(1, activation="erf", loss="huber")
    for net, delta in ((soft, 8.0), (erf, 16.0)):
        ev = rmt.dmft_margin(model, net, delta, replicas=8, n_samples=400, law_draws=2000)
        assert ev.converged and ev.message.startswith("loss of the mean curves flat")
        b = int(ev.vertex)
        assert all(h.t1 == b for h in ev.hessians)
        assert (b > ev.t1 + dt.PLATEAU_WINDOW) == (net is soft)  # continued past the plateau
        M, _ = _margins_of_a_longer_solve(model, net, delta, b + 210, [b, b + 200], 400, 2000)
        assert M[0] == pytest.approx(ev.margin, abs=1e-9)
        assert abs(M[1] - ev.margin) <= dt.SETTLED_FRACTION * ev.margin_se
    ev = rmt.dmft_margin(model, soft, 4.0, replicas=8, n_samples=400, law_draws=2000,
                         max_steps=300)  # fmt: skip
    assert not ev.converged and ev.message.startswith("no plateau reached within 300 steps")
    last = 300 - CURVE_SMOOTHING - 1  # the last step a read within the budget can reach
    t = ev.t1 + dt.PLATEAU_WINDOW
    M, se = _margins_of_a_longer_solve(model, soft, 4.0, 610, [t, last, 600], 400, 2000)
    assert abs(M[1] - M[0]) > 2 * se[0]
    assert abs(M[2] - M[1]) > dt.SETTLED_FRACTION * se[1]


def test_the_settling_step_is_where_a_geometric_drift_falls_to_its_goal():
    """A margin ``m + c r^t`` read at ``a`` and ``b`` with the norm ``g = r^t``: the drift
    still to come at ``b`` is ``|c| r^b``, and the predicted step is the first at which
    ``|c| r^t`` is at most the goal, exactly.  A norm whose decay slows
    (``(t + 50)^-2``, the margin ``300`` times it) settles no sooner than predicted from any
    read; a norm that did not fall gives no prediction."""
    c, r, a, b, goal = 0.3, 0.98, 120, 160, 1e-3

    def margin(t):
        return 0.1 + c * r**t

    rho = r ** (b - a)
    to_come = abs(margin(b) - margin(a)) * rho / (1 - rho)
    assert to_come == pytest.approx(c * r**b, rel=1e-12)
    steps = dt._settling_step(b - a, rho, to_come, goal)
    assert c * r ** (b + steps) <= goal < c * r ** (b + steps - 1)
    assert dt._settling_step(b - a, rho, 0.5 * goal, goal) == 0
    for rho_up in (1.0, 1.3):
        assert dt._settling_step(b - a, rho_up, to_come, goal) is None

    def norm(t):
        return (t + 50.0) ** -2

    t = np.arange(4000)
    truth = int(t[300 * norm(t) <= goal][0])  # the margin 0.1 + 300 g(t): its drift 300 g(t)
    assert truth == 498
    for a, b in ((60, 80), (100, 180), (200, 400)):
        rho = norm(b) / norm(a)
        to_come = 300 * abs(norm(b) - norm(a)) * rho / (1 - rho)
        assert b + dt._settling_step(b - a, rho, to_come, goal) <= truth


def test_a_solve_without_plateau_goes_on_only_while_its_gradient_norm_falls():
    """More steps are spent on a solve without a plateau only while its smoothed mean gradient
    norm still falls to new lows (a first phase under way) or sits at the flat bottom of its
    plateau; a norm that oscillates at a high level (a step size gradient descent cannot settle
    at), even in a falling stretch above its earlier lows, or that rises again from its bottom,
    is reported at once, with the numbers."""
    from types import SimpleNamespace

    rule = rmt.PlateauRule(window=25)
    t = np.arange(300)
    falling = [SimpleNamespace(grad_norm=np.exp(-t / 200) * (1 + 0.01 * np.sin(t))) for _ in "ab"]
    assert dt._not_settling(falling, rule, 0.5) == ""
    wobble = [SimpleNamespace(grad_norm=0.5 + 0.2 * np.sin(t / 4.0 + p)) for p in (0.0, 0.3)]
    why = dt._not_settling(wobble, rule, 0.5)
    g = smoothed_curve(np.mean([r.grad_norm for r in wobble], axis=0))
    assert f"{g[-1] / g.max():.2f} of its peak" in why and "does not settle at lr = 0.5" in why
    # a fall to a bottom at 0.15 of the peak, then a slow rise (a local minimum the rule
    # confirms only later), with noise: a plateau in the making, so the solve goes on
    bottom = 0.15 + 0.85 * np.exp(-t / 30.0) + 1e-5 * np.clip(t - 250, 0, None) ** 2
    noise = np.random.default_rng(0).normal(0.0, 1e-4, (2, t.size))
    low = [SimpleNamespace(grad_norm=bottom + e) for e in noise]
    gl = smoothed_curve(np.mean([r.grad_norm for r in low], axis=0))
    assert np.mean(np.diff(gl[-26:]) < 0) < dt.FALLING_FRACTION  # the falling rule alone: no
    assert dt._not_settling(low, rule, 0.5) == ""
    # the same curve rising back to half its peak: gradient descent leaves the plateau upwards
    back = [SimpleNamespace(grad_norm=bottom + 0.35 * np.clip((t - 200) / 100, 0, 1) + e)
            for e in noise]  # fmt: skip
    assert "does not settle" in dt._not_settling(back, rule, 0.5)
    # a norm that wanders at 0.5-0.7 of its peak and ends in a falling stretch (every step of
    # the last window falls) that stays above its earlier low, 0.5: it does not settle
    wander = np.where(t < 20, t / 20.0, 0.6 - 0.1 * np.sin(2 * np.pi * (t - 20) / 140))
    ends = [SimpleNamespace(grad_norm=wander) for _ in "ab"]
    gw = smoothed_curve(wander)
    assert np.all(np.diff(gw[-26:]) < 0) and gw[-1] > gw[20:-26].min()
    why = dt._not_settling(ends, rule, 0.5)
    assert f"above its low of {gw[20:-26].min() / gw.max():.2f} since the peak" in why


def test_failures_of_one_kind_are_reported_once_with_their_deltas():
    def failed(delta, message):
        return _failed(delta, message, 2)

    search = dt._Search(None, 10, None)
    search.evals = {
        4.0: failed(4.0, "the solve failed at step 31: non-finite psi"),
        8.0: failed(8.0, "the solve failed at step 50: non-finite psi"),
        16.0: failed(16.0, "no plateau within 300 steps"),
    }
    assert search.failures() == (
        "delta = 4, 8: the solve failed at step 31: non-finite psi | "
        "delta = 16: no plateau within 300 steps"
    )


def _finite_difference_hessian(net, data, W, eps=1e-6):
    """The Hessian of the mean loss by central differences of its gradient (symmetrised),
    in the order of ``rmt.Hessian``: neuron by neuron."""
    d, m = W.shape
    H = np.empty((d * m, d * m))
    for j in range(d * m):
        E = np.zeros(d * m)
        E[j] = eps
        step = E.reshape(d, m, order="F")
        gp = net.loss_and_grad(data, W + step)[1].ravel(order="F")
        gm = net.loss_and_grad(data, W - step)[1].ravel(order="F")
        H[:, j] = (gp - gm) / (2 * eps)
    return (H + H.T) / 2


@pytest.mark.parametrize("loss", ["square", "huber"])
def test_relu_with_a_convex_loss_has_a_positive_semidefinite_hessian_and_no_delta_nn(loss):
    """ReLU (``sigma'' = 0`` almost everywhere) with a loss convex in the output: at a point
    trained by gradient descent the finite-difference Hessian has no negative eigenvalue beyond
    its rounding, so ``rmt.dmft_delta_nn`` answers "no transition" without a solve; softplus,
    trained the same way, has a negative eigenvalue and is not answered that way."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(3, "relu", loss, a=np.array([1.0, -0.5, 0.8]))
    data = model.sample(150, 20, rng=3)
    W = rmt.gradient_descent(net, data, init_scale=1.0, lr=0.3, steps=300, rng=4).W_final
    H = _finite_difference_hessian(net, data, W)
    vals = np.linalg.eigvalsh(H)
    assert vals[-1] > 0.05  # a Hessian with curvature, not a flat one
    assert vals[0] > -1e-6 * vals[-1]
    dense = rmt.Hessian(net, data, W).to_dense()
    np.testing.assert_allclose(dense, H, atol=1e-6 * vals[-1])
    smooth = rmt.TwoLayerNet(3, "softplus", loss, a=net.a)
    W_smooth = rmt.gradient_descent(smooth, data, init_scale=1.0, lr=0.3, steps=300, rng=4).W_final
    assert np.linalg.eigvalsh(_finite_difference_hessian(smooth, data, W_smooth))[0] < -1e-3
    assert net.hessian_is_psd and not smooth.hessian_is_psd
    res = rmt.dmft_delta_nn(model, net)
    assert res.no_transition and not res.converged and np.isnan(res.value)
    assert "positive semidefinite at every W" in res.message
    assert res.evaluations == {} and res.pilot_evaluations == {}
    with pytest.raises(ValueError, match="weight_decay"):
        rmt.dmft_delta_nn(model, net, weight_decay=-0.1)


def test_the_law_check_flags_a_margin_shift_larger_than_its_error(monkeypatch):
    """Planted law shifts at the Newton evaluation: the result has no value exactly when the
    mean shift ``s`` (standard error ``e`` over the replicas) has ``|s| - z e`` above the
    margin's standard error, ``z`` the two-sided quantile of Student's t with 7 degrees of
    freedom (8 replicas) at ``LAW_CHECK_LEVEL`` = 0.05."""
    spread = np.array([0.002, -0.001, 0.0, 0.001, -0.002, 0.0015, -0.0005, -0.001])  # mean 0
    assert dt.LAW_CHECK_LEVEL == 0.05
    z = 2.3646242515927849  # the 0.975 quantile of t(7) (tables: 2.365)
    se_margin = OFFSETS[:8].std(ddof=1) / np.sqrt(8)  # the jackknife of a mean
    e = spread.std(ddof=1) / np.sqrt(8)
    for mean, flagged in [(se_margin + z * e - 1e-7, False), (se_margin + z * e + 1e-7, True)]:
        fake = _planted(log=True)

        def with_shifts(*args, fake=fake, mean=mean, law_check=False, **kwargs):
            ev = fake(*args, **kwargs)
            shifts = -(mean + spread[: ev.margins.size]) if law_check else None
            return dataclasses.replace(ev, law_shifts=shifts)

        monkeypatch.setattr(dt, "dmft_margin", with_shifts)
        out = rmt.dmft_delta_nn(None, None, n_samples=4000, stderr_rtol=None)
        np.testing.assert_allclose(out.law_shift, -mean, rtol=1e-12)
        np.testing.assert_allclose(out.law_shift_se, e, rtol=1e-10)
        assert out.converged is not flagged
        assert bool(np.isnan(out.value)) is flagged
        assert ("not converged in the law's draws" in out.message) is flagged


def test_a_missed_root_is_law_checked_at_the_pilots_root_before_more_evaluations(monkeypatch):
    """When the pilot missed the root, the law check reads the full evaluation at the pilot's
    root: a shift beyond the margin's error there ends the search with no value and no
    further full evaluation; a shift within it lets the search bracket the root."""
    spread = np.array([0.002, -0.001, 0.0, 0.001, -0.002, 0.0015, -0.0005, -0.001])
    for mean, flagged in [(0.05, True), (0.0, False)]:
        calls = []
        fake = _planted(calls=calls, pilot_shift=0.4)

        def with_shifts(*args, fake=fake, mean=mean, law_check=False, **kwargs):
            ev = fake(*args, **kwargs)
            shifts = -(mean + spread[: ev.margins.size]) if law_check else None
            return dataclasses.replace(ev, law_shifts=shifts)

        monkeypatch.setattr(dt, "dmft_margin", with_shifts)
        out = rmt.dmft_delta_nn(None, None, n_samples=4000, pilot=4)
        full = [x for x, n in calls if n == 4000]
        assert out.converged is not flagged and len(full) == (1 if flagged else 3)
        assert full[0] == pytest.approx(ROOT + 0.4 - OFFSETS[:8].mean() / SLOPE, rel=1e-9)
        np.testing.assert_allclose(out.law_shift, -mean, atol=1e-12)
        if flagged:
            assert np.isnan(out.value) and "not converged in the law's draws" in out.message
            assert f"delta = {full[0]:.4g}" in out.message


def test_a_square_loss_margin_moves_with_the_law_draws_and_a_huber_one_does_not():
    """softplus, m = 2, phase retrieval, at each loss's root: with the square loss the
    learning margin falls when the law's draws go from 5000 to 20 000 (the left edge of the
    law is set by rare draws: large labels with a preactivation near 0), and the law check of
    16 replicas says so (a shift of about 0.03 against the margin's error plus 2.1 times the
    shift's).
    Independently, the left edge of one replica's law from 320 000 draws lies below the mean
    edge of its 16 parts of 20 000 draws by more than 3 standard errors of that mean.  With
    the Huber loss the margin and the edge (80 000 draws against 4 parts) stay within their
    noise."""
    for loss, delta, moves in [("square", 5.7, True), ("huber", 2.63, False)]:
        cfg = rmt.RunConfig(activation="softplus", loss=loss, width=2)
        model, net = cfg.model(), cfg.net()
        ev = rmt.dmft_margin(
            model, net, delta, replicas=16, n_samples=800, law_draws=20_000, law_check=True
        )
        assert ev.converged and ev.law_shifts.shape == (16,)
        assert bool(dt._law_not_converged([ev])) is moves, ev.law_shift
        # the edge of replica 0's law at its plateau step from `most` fresh draws, against the
        # edges of its disjoint parts of 20 000 draws: their mean less the whole's edge, in
        # standard errors of that mean (3: a two-sided 0.3% test)
        h = ev.hessians[0]
        t, solve = h.t1, h.result
        most = 320_000 if moves else 80_000
        law = resampled_laws(solve, model, net, [t], most, np.random.default_rng(3))[t]

        def edge(part):
            sub = rmt.SpikeLaw(law.zhat[part], law.D[part], None, law.theta_dims, kind="empirical")
            return hessian_at_step(solve, net, t, "check", 0.0, law=sub).edge_lo

        parts = np.array([edge(slice(i, i + 20_000)) for i in range(0, most, 20_000)])
        gap = (parts.mean() - edge(slice(None))) / (parts.std(ddof=1) / np.sqrt(parts.size))
        assert (gap > 3) if moves else (abs(gap) < 3), (gap, parts)


@pytest.mark.slow
def test_the_square_loss_threshold_grows_with_the_size_and_the_huber_one_does_not():
    """softplus, m = 2, phase retrieval, ``rmt.dmft_delta_nn(d=...)`` at d = 1000 and 16 000
    (1000 draws a replica, 8 replicas; about two minutes): with the square loss the law of 16
    times the samples reaches rarer, more negative curvature blocks, its left edge lies further
    out, and the threshold is higher by more than 4 standard errors of the difference (4.60
    and 6.66 at the defaults; docs/theory.md 8.10); with the Huber loss (curvature bounded
    below, its edge converged) the two agree within 3."""
    for loss, grows in [("square", True), ("huber", False)]:
        cfg = rmt.RunConfig(activation="softplus", loss=loss, width=2)
        out = [
            rmt.dmft_delta_nn(cfg.model(), cfg.net(), n_samples=1000, stderr_rtol=None, d=d)
            for d in (1000, 16_000)
        ]
        assert all(o.converged for o in out), [o.message for o in out]
        z = (out[1].value - out[0].value) / np.hypot(out[0].stderr, out[1].stderr)
        assert (z > 4) if grows else (abs(z) < 3), (loss, z, [o.value for o in out])
