"""The plateau-length law (rmt.dynamics.escape.plateau_length, docs/theory.md section 7.7)
against the linear dynamics it describes, summed direction by direction, and the predicted
plateau of gradient descent from the DMFT Hessian (rmt.experiments.grokking); the measured
plateau of gradient descent, its censored quantiles, its resumable tables and ``rmt grokking``."""

import json
from dataclasses import replace

import numpy as np
import pytest

import rmt
from rmt.app.cli import main
from rmt.dynamics.escape import escape_step, plateau_length
from rmt.experiments import grokking as gk
from rmt.experiments.grokking import plateau_law, prediction_row
from rmt.experiments.learning import run_descent
from rmt.experiments.store import read_table


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


# -- the measured delay: quantiles with censoring, runs, resumable tables, the command -------

#: a tiny measurement: d = 120, a step budget that every run at these deltas escapes within,
#: and a small DMFT for the law
TINY = rmt.RunConfig(train_steps=1500, dmft_steps=100, dmft_samples=300)
TINY_POINTS = {"deltas": [4.0, 7.0], "seeds": [0, 1], "sizes": [120]}


def _one_line_error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("n", [1, 2, 5, 6, 11])
def test_quantiles_of_uncensored_runs_are_numpys(n):
    rng = np.random.default_rng(n)
    values = rng.integers(0, 5000, size=n).astype(float)
    for q in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
        assert gk.censored_quantile(values, q) == pytest.approx(np.quantile(values, q), rel=1e-14)
    runs = [_planted_run(100, 3.0, v) for v in values]
    row = gk.plateau_summary(runs)[0]
    for name, q in (("q25", 0.25), ("median", 0.5), ("q75", 0.75)):
        assert row[name] == pytest.approx(np.quantile(values, q), rel=1e-14)
        assert row[name + "_censored"] is False
    assert row["censored"] == 0 and row["runs"] == n


def test_a_quantile_that_touches_a_censored_run_is_infinite():
    """Censored runs are +inf: with them replaced by a huge finite length, numpy's quantile
    lands above every finite length exactly when the interpolation touches one of them; that
    quantile is ``inf`` (``None`` in the summary, with its flag), the others numpy's."""
    rng = np.random.default_rng(7)
    huge = 1e12
    for trial in range(40):
        n = int(rng.integers(1, 9))
        lengths = rng.integers(1, 1000, size=n).astype(float)
        censored = rng.random(n) < 0.4
        values = np.where(censored, np.inf, lengths)
        runs = [_planted_run(200, 5.0, None if c else v) for c, v in zip(censored, lengths)]
        row = gk.plateau_summary(runs)[0]
        assert row["censored"] == censored.sum()
        for name, q in (("q25", 0.25), ("median", 0.5), ("q75", 0.75)):
            reference = np.quantile(np.where(censored, huge, lengths), q)
            if censored.any() and reference > lengths[~censored].max(initial=0.0):
                assert gk.censored_quantile(values, q) == np.inf, (values, q)
                assert row[name] is None and row[name + "_censored"] is True
            else:
                assert gk.censored_quantile(values, q) == pytest.approx(reference, rel=1e-14)
                assert row[name] == pytest.approx(reference, rel=1e-14)
    with pytest.raises(ValueError, match="non-empty"):
        gk.censored_quantile([], 0.5)
    with pytest.raises(ValueError, match="q must be in"):
        gk.censored_quantile([1.0], 1.5)


def _planted_run(d, delta, length, seed=0):
    """A run record with only what the summary reads."""
    return {
        "d": d,
        "delta": delta,
        "seed": seed,
        "plateau_length": length,
        "censored": length is None,
        "plateau_step": 100,
        "plateau_rule": "local_min",
        "learned": length is not None,
        "seconds": 0.5,
    }


def test_each_plateau_length_is_the_escape_read_off_the_runs_overlap(tmp_path):
    """d = 120, deltas 4 and 7, two seeds: each record's plateau length is the escape step read
    off the overlap curve of the same run (``escape_step`` at overlap 1/2) minus its plateau
    step; the summary's median is numpy's; the prediction is ``plateau_law``'s at the same
    points; the tables on disk hold the same numbers."""
    res = gk.grokking(TINY, **TINY_POINTS, out=tmp_path, stop_after_escape=5, progress=False)
    cfg = replace(TINY, d=120)
    assert [(r["delta"], r["seed"]) for r in res.runs] == [(4.0, 0), (4.0, 1), (7.0, 0), (7.0, 1)]
    for r in res.runs:
        _, run, _ = run_descent(cfg, r["delta"], r["seed"], with_test=False, stop_after_escape=5)
        escape = escape_step(run.overlap, run.plateau_step, 0.5)
        assert escape is not None and r["plateau_step"] == run.plateau_step
        assert r["escape_step"] == escape and r["plateau_length"] == escape - run.plateau_step
        assert r["plateau_time"] == pytest.approx(0.5 * r["plateau_length"], rel=1e-15)
        assert not r["censored"] and r["n"] == round(r["delta"] * 120)
    laws = {law.delta: law for law in plateau_law(replace(TINY, seeds=(0, 1)), [4.0, 7.0], [120])}
    for delta in (4.0, 7.0):
        row = res.at(120, delta)
        lengths = [r["plateau_length"] for r in res.runs if r["delta"] == delta]
        assert row["median"] == pytest.approx(np.median(lengths), rel=1e-15)
        predicted = laws[delta].by_d[120].steps
        assert row["predicted_steps"] == pytest.approx(predicted, rel=1e-12)
        assert row["ratio"] == pytest.approx(row["median"] / predicted, rel=1e-12)
    on_disk = read_table(tmp_path / gk.RUNS_FILE)
    assert [r["plateau_length"] for r in on_disk] == [r["plateau_length"] for r in res.runs]
    summary = read_table(tmp_path / gk.SUMMARY_FILE)
    assert [r["median"] for r in summary] == pytest.approx([r["median"] for r in res.summary])


def test_a_run_that_does_not_escape_within_its_budget_is_censored():
    """A budget of 200 steps at delta = 4 (the escape comes near step 270): the overlap of the
    same run never reaches 1/2 after its plateau, and the record is censored."""
    cfg = replace(TINY, d=120, train_steps=200)
    r = gk.plateau_run(cfg, 4.0, 0)
    _, run, _ = run_descent(cfg, 4.0, 0, with_test=False)
    assert run.plateau_step is not None and escape_step(run.overlap, run.plateau_step, 0.5) is None
    assert r["censored"] and r["plateau_length"] is None and r["escape_step"] is None
    assert r["final_overlap"] == pytest.approx(float(run.overlap[-1]), rel=1e-15)


def test_a_rerun_runs_only_what_is_missing_and_writes_no_duplicate_rows(tmp_path, monkeypatch):
    """An interrupted measurement keeps its finished runs; a rerun adds only the missing ones,
    a wider one only the new delta; no key is written twice, and a folder of another step
    budget is refused."""
    calls, real = [], gk.plateau_run

    def counted(config, delta, seed, stop_after_escape=None):
        if len(calls) == 2 and not counted.let_through:
            raise KeyboardInterrupt
        calls.append((config.d, delta, seed))
        return real(config, delta, seed, stop_after_escape)

    counted.let_through = False
    monkeypatch.setattr(gk, "plateau_run", counted)
    monkeypatch.setattr(gk, "plateau_law", lambda config, deltas, sizes: [])
    points = {"deltas": [4.0], "seeds": [0, 1, 2], "sizes": [120]}
    with pytest.raises(KeyboardInterrupt):
        gk.grokking(TINY, **points, out=tmp_path, progress=False)
    assert len(read_table(tmp_path / gk.RUNS_FILE)) == 2
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "interrupted"
    counted.let_through = True
    gk.grokking(TINY, **points, out=tmp_path, progress=False)
    res = gk.grokking(TINY, **{**points, "deltas": [4.0, 7.0]}, out=tmp_path, progress=False)
    assert calls == [(120, 4.0, 0), (120, 4.0, 1), (120, 4.0, 2), (120, 7.0, 0), (120, 7.0, 1),
                     (120, 7.0, 2)]  # fmt: skip
    rows = read_table(tmp_path / gk.RUNS_FILE)
    keys = [(r["d"], r["delta"], r["seed"]) for r in rows]
    assert len(keys) == 6 and len(set(keys)) == 6 and len(res.runs) == 6
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "complete"
    assert res.at(120, 7.0)["prediction_reason"] == "no prediction"
    with pytest.raises(ValueError, match="train_steps"):
        gk.grokking(replace(TINY, train_steps=900), **points, out=tmp_path, progress=False)


def test_bad_points_are_refused_before_any_run(tmp_path, monkeypatch):
    monkeypatch.setattr(gk, "plateau_run", None)  # any run would fail
    out = tmp_path / "o"
    for bad, words in [
        ({"deltas": []}, "deltas must be a non-empty"),
        ({"deltas": [0.0, 2.0]}, "deltas must be finite and > 0"),
        ({"seeds": []}, "seeds must be a non-empty"),
        ({"seeds": [-1]}, "seed must be >= 0"),
        ({"sizes": [1]}, "sizes must be >= 2"),
        ({"stop_after_escape": -2}, "stop_after_escape must be >= 0"),
    ]:
        with pytest.raises(ValueError, match=words):
            gk.grokking(TINY, **{**TINY_POINTS, **bad}, out=out)
    with pytest.raises(TypeError, match="sequence of seeds"):
        gk.grokking(TINY, **{**TINY_POINTS, "seeds": 3}, out=out)
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--delta", "0,4"], "--delta must be finite and > 0"),
        (["--delta", "-3"], "--delta must be finite and > 0"),
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--sizes", "1"], "--sizes must be >= 2"),
        (["--stop-after-escape", "-1"], "--stop-after-escape must be >= 0"),
        (["--delta-nn", "2.6,0.1,3"], "--delta-nn must be 'value' or 'value,stderr'"),
        (["--steps", "0"], "--steps must be >= 1"),
    ],
)
def test_command_with_bad_input_fails_in_one_line_and_writes_nothing(argv, words, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["grokking", "--d", "120", *argv, "--out", str(out)]) == 2
    assert words in _one_line_error(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_command_writes_tables_manifest_and_figures(tmp_path, capsys):
    """Two sizes, two deltas, two seeds: the summary table is the summary of the runs table
    (medians against numpy), the JSON on stdout says the same, and both figures are drawn."""
    out = tmp_path / "g"
    args = ["grokking", "--d", "120", "--sizes", "100", "--delta", "7,4", "--seeds", "2"]
    args += ["--steps", "1500", "--dmft-steps", "100", "--dmft-samples", "300"]
    args += ["--delta-nn", "2.63,0.02", "--out", str(out), "--json", "--quiet"]
    assert main(args) == 0
    cap = capsys.readouterr()
    printed = json.loads(cap.out)
    runs = read_table(out / gk.RUNS_FILE)
    assert sorted((r["d"], r["delta"], r["seed"]) for r in runs) == [
        (d, x, s) for d in (100, 120) for x in (4.0, 7.0) for s in (0, 1)
    ]
    summary = read_table(out / gk.SUMMARY_FILE)
    assert [(r["d"], r["delta"]) for r in summary] == [
        (100, 4.0),
        (100, 7.0),
        (120, 4.0),
        (120, 7.0),
    ]
    for row, shown in zip(summary, printed["summary"]):
        lengths = [
            r["plateau_length"] for r in runs if (r["d"], r["delta"]) == (row["d"], row["delta"])
        ]
        assert None not in lengths and row["median"] == pytest.approx(np.median(lengths))
        assert row["q75"] == pytest.approx(np.quantile(lengths, 0.75))
        assert shown["median"] == pytest.approx(row["median"]) and row["censored"] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == "grokking" and manifest["config"]["d"] == 100
    assert manifest["config"]["sizes"] == [120] and manifest["config"]["stop_after_escape"] == 5
    for name in (gk.RUNS_FILE, gk.SUMMARY_FILE, "plateau_length.png", "delay_curves.png"):
        assert name in manifest["files"]
    for name in ("plateau_length.png", "delay_curves.png"):
        assert (out / name).stat().st_size > 10_000
    table = cap.err.strip().splitlines()
    assert table[-1].startswith("rmt grokking: 8 runs; wrote ")
    assert sum(line.split()[:2] in (["100", "4"], ["120", "7"]) for line in table) == 2


def test_outlier_growth_is_the_integral_of_the_log_growth_until_the_merge():
    """``G`` by the trapezoid rule against ``scipy.integrate.quad`` of ``log|1 - lr lambda(t)|``
    for an outlier rising linearly to the edge; a merge between two evaluations adds half of
    that interval at the last rate; no outlier at ``t1``: no growth."""
    from scipy.integrate import quad

    from rmt.dynamics.escape import outlier_growth

    lr, t1, t_end = 0.5, 130.0, 330.0

    def lam(t):
        return -0.07 + 0.05 * (t - t1) / (t_end - t1)

    steps = np.linspace(t1, t_end, 401)
    exact = quad(lambda t: np.log(1 - lr * lam(t)), t1, t_end)[0]
    g, merge = outlier_growth(steps, lam(steps), lr)
    assert merge is None and g == pytest.approx(exact, rel=1e-6)
    coarse = np.array([130.0, 150.0, 175.0])
    g, merge = outlier_growth(coarse, [-0.07, -0.06, np.nan], lr)
    half = 12.5 * np.log(1 + lr * 0.06)
    assert merge == 175 and g == pytest.approx(20 * np.log((1.035 * 1.03) ** 0.5) + half)
    assert outlier_growth(coarse, [np.nan, -0.06, -0.05], lr) == (0.0, 130)
    with pytest.raises(ValueError, match="increase"):
        outlier_growth([1.0, 1.0], [-0.1, -0.1], lr)


def test_escape_regime_compares_the_growth_with_half_the_log_of_m_d():
    bar = 0.5 * np.log(2 * 1000)  # 3.80
    assert gk.escape_regime([bar + 0.1, bar + 1.0], 1000, 2) == "before the merge"
    assert gk.escape_regime([bar - 0.1, np.nan], 1000, 2) == "after the merge"
    assert gk.escape_regime([bar - 0.1, bar + 0.1], 1000, 2) == "at the bar"
    assert gk.escape_regime([np.nan], 1000, 2) == "unknown"
    # a larger d raises the bar: the same growth falls after the merge
    assert gk.escape_regime([4.1, 4.2], 1000, 2) == "before the merge"
    assert gk.escape_regime([4.1, 4.2], 4000, 2) == "after the merge"


@pytest.mark.slow
@pytest.mark.ci
def test_outlier_lifetime_reads_the_hessian_law_along_the_dmft_trajectory():
    """A small solve (phase retrieval, softplus/Huber, m = 2, ``delta = 3.2``): the plateau, the
    outlier at each evaluated step and the merge are those of direct
    ``rmt.dynamics.dmft.hessian_at_step`` calls on the same replica, and ``G`` their sum."""
    from rmt.dynamics.dmft import dmft_replicas, hessian_at_step
    from rmt.dynamics.escape import outlier_growth

    cfg = replace(rmt.RunConfig(), dmft_samples=800)
    life = rmt.outlier_lifetime(cfg, 3.2, steps=400, every=50, replicas=2)
    assert life.reasons == () and life.t1[0] is not None
    rep = dmft_replicas(cfg.model(), cfg.net(), 3.2, cfg.lr, 400, cfg.init_scale,
                        replicas=2, n_samples=800, rng=cfg.seeds[0])  # fmt: skip
    t1 = life.t1[0]
    at = [t1, *range(50 * (t1 // 50 + 1), 400, 50)]
    lam = [hessian_at_step(rep.results[0], cfg.net(), t).theta_outlier for t in at]
    first_gone = next((i for i, v in enumerate(lam) if not np.isfinite(v)), len(lam))
    g, merge = outlier_growth(at[: first_gone + 1], lam[: first_gone + 1], cfg.lr)
    assert np.isfinite(lam[0]) and lam[0] < 0  # an outlier at the plateau
    assert life.merge[0] == merge and life.growth[0] == pytest.approx(g, rel=1e-12)
    assert life.growth[0] > 0


def test_the_summary_carries_the_outlier_growth_and_the_regime_at_each_d(tmp_path, monkeypatch):
    """With ``lifetime_steps`` the summary gives, at each ``(d, delta)``, the mean growth ``G``
    of the lifetime's replicas and the side of ``(1/2) log(m d)`` it falls on (here m = 2:
    3.40 at d = 450, 3.80 at d = 1000), and the terminal table shows them."""
    from rmt.app.report import format_grokking_table

    planted = {4.0: (3.3, 3.5), 7.0: (4.0, 4.2)}
    asked = []

    def lifetime(config, delta, steps, replicas):
        asked.append((delta, steps, replicas))
        g = planted[delta]
        return gk.OutlierLifetime(delta, steps, (130, 131), (None, None), g)

    monkeypatch.setattr(gk, "outlier_lifetime", lifetime)
    cfg = replace(TINY, lifetime_steps=300)
    points = dict(TINY_POINTS, sizes=[450, 1000])
    res = gk.grokking(cfg, **points, out=tmp_path, progress=False)
    assert asked == [(4.0, 300, gk.LIFETIME_REPLICAS), (7.0, 300, gk.LIFETIME_REPLICAS)]
    assert 0.5 * np.log(2 * 450) == pytest.approx(3.401, abs=1e-3)
    expect = {
        (450, 4.0): "at the bar", (1000, 4.0): "after the merge",
        (450, 7.0): "before the merge", (1000, 7.0): "before the merge",
    }  # fmt: skip
    for (d, delta), regime in expect.items():
        row = res.at(d, delta)
        assert row["regime"] == regime
        assert row["growth"] == pytest.approx(np.mean(planted[delta]), rel=1e-15)
    text = format_grokking_table(res.summary)
    assert "escape" in text.splitlines()[0] and "after the merge" in text
    on_disk = {(r["d"], r["delta"]): r for r in read_table(tmp_path / gk.SUMMARY_FILE)}
    assert on_disk[(1000, 4.0)]["regime"] == "after the merge"


def test_the_summary_carries_the_theta_row_prediction_at_each_d(tmp_path, monkeypatch):
    """With ``row_steps`` each ``(d, delta)`` gets the replicas' mean plateau length at the
    quartiles over runs of the ``Theta*`` row (docs/theory.md 7.8), a quantile beyond the
    horizon gets its reason, and the terminal table shows both."""
    from rmt.app.report import format_grokking_table

    asked = []

    def row(config, delta, sizes, steps, replicas):
        asked.append((delta, tuple(sizes), steps, replicas))
        late = None if delta == 4.0 else 400
        esc = {d: [200 + d // 10, 260 + d // 10, late] for d in sizes}
        return gk.RowEscape(delta, steps, (100, 120), (esc, esc))

    monkeypatch.setattr(gk, "row_escape", row)
    cfg = replace(TINY, row_steps=500)
    res = gk.grokking(cfg, **dict(TINY_POINTS, sizes=[450, 1000]), out=tmp_path, progress=False)
    assert asked == [(x, (450, 1000), 500, gk.LIFETIME_REPLICAS) for x in (4.0, 7.0)]
    r = res.at(450, 7.0)
    assert (r["row_q25"], r["row_median"], r["row_q75"]) == (135.0, 195.0, 290.0)
    assert r["row_reason"] == ""
    late = res.at(1000, 4.0)
    assert late["row_median"] == 360.0 - 110 and late["row_q75"] is None
    assert "later than step 500" in late["row_reason"]
    text = format_grokking_table(res.summary)
    assert "Theta* row" in text.splitlines()[0] and "later than step 500" in text
    on_disk = {(r["d"], r["delta"]): r for r in read_table(tmp_path / gk.SUMMARY_FILE)}
    assert float(on_disk[(450, 7.0)]["row_median"]) == 195.0


def test_the_theta_row_needs_an_even_target_with_one_index():
    assert gk._row_law(replace(TINY, target="z1z2"), 4.0, [100]).startswith("the Theta* row")
    row = gk.row_columns("the Theta* row needs an even target with k = 1", 100)
    assert row["row_median"] is None and row["row_reason"].startswith("the Theta* row")
