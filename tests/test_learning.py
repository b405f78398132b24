"""What gradient descent does across delta: runs, tables and thresholds, against dense eigh."""

import json

import numpy as np
import pytest

import rmt
from rmt.app import commands
from rmt.experiments.learning import (
    learn_point,
    order_parameter_from_grid,
    run_descent,
    threshold_from_grid,
    trained_thresholds,
)
from rmt.experiments.store import read_table

CFG = rmt.RunConfig(d=120, deltas=(6.0,), seeds=(0,), train_steps=1200, lr=0.5, point="trained")


def test_threshold_from_grid_reads_the_seed_majority():
    rows = [
        {"delta": x, "seed": s, "learned": x >= 3 or (x == 2 and s == 0)}
        for x in (1, 2, 3, 4)
        for s in range(3)
    ]
    res = threshold_from_grid(rows, "learned")
    assert res.found and res.delta == pytest.approx(np.sqrt(2 * 3)) and res.bracket == (2.0, 3.0)
    assert res.evaluations[1] == (2.0, 1, 3)
    none = threshold_from_grid([{"delta": 1, "seed": 0, "learned": True}], "learned")
    assert not none.found and none.as_dict()["delta"] is None and "already" in none.reason


@pytest.mark.parametrize("delta, learns", [(6.0, True), (1.2, False)])
def test_learn_point_against_dense_eigh_at_the_plateau(delta, learns):
    out = learn_point(CFG, delta, 0)
    row = out["row"]
    assert row["learned"] is learns
    assert row["learned"] == (row["final_overlap"] >= 0.5)
    # replay the same run and check the bottom of the spectrum at W1 with dense eigh
    data, run, _ = run_descent(CFG, delta, 0)
    assert run.plateau_step == row["plateau_step"]
    H = rmt.Hessian(CFG.net(), data, run.W1)
    vals, vecs = np.linalg.eigh(H.to_dense())
    got = [e["eigenvalue"] for e in out["eigs"]]
    np.testing.assert_allclose(got, vals[: len(got)], atol=1e-7)
    ov = rmt.overlaps(vecs[:, :1], data.theta, CFG.width)[0]
    assert row["bottom_overlap"] == pytest.approx(ov, abs=1e-5)
    assert row["has_descent_outlier"] is learns
    steps = [c["step"] for c in out["curves"]]
    assert steps[0] == 0 and np.all(np.diff(steps) == 5)


def test_learn_command_writes_tables_figures_and_grows(tmp_path):
    cfg = rmt.RunConfig(d=60, deltas=(1.0, 6.0), seeds=(0,), train_steps=500, point="trained")
    summary = commands.cmd_learn(cfg, tmp_path, progress=False)
    rows = read_table(tmp_path / "d60" / "learn.csv")
    assert [(r["delta"], r["seed"]) for r in rows] == [(1.0, 0), (6.0, 0)]  # sorted when done
    for name in ("learning_transition.png", "learning_curves.png", "hessian_at_plateau.png"):
        assert (tmp_path / name).stat().st_size > 10_000
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["command"] == "learn" and summary["runs"] == {"60": 2}
    # a rerun with one more delta adds only that run; another lr is refused, naming the field
    more = rmt.RunConfig(d=60, deltas=(1.0, 3.0, 6.0), seeds=(0,), train_steps=500, point="trained")
    commands.cmd_learn(more, tmp_path, progress=False)
    assert len(read_table(tmp_path / "d60" / "learn.csv")) == 3
    with pytest.raises(ValueError, match="differs in: lr"):
        commands.cmd_learn(rmt.RunConfig(d=60, deltas=(1.0,), lr=0.3), tmp_path, progress=False)


def test_plateau_point_is_the_plateau_of_the_learning_run():
    """The cheap run that stops at the plateau has the same W1 spectrum as :func:`learn_point`."""
    from rmt.experiments.learning import plateau_point

    row = learn_point(CFG, 6.0, 0)["row"]
    cheap = plateau_point(CFG, 6.0, 0)
    assert cheap["plateau_step"] == row["plateau_step"]
    assert cheap["bottom_eigenvalue"] == pytest.approx(row["bottom_eigenvalue"], abs=1e-9)
    assert cheap["bottom_overlap"] == pytest.approx(row["bottom_overlap"], abs=1e-7)
    assert cheap["order_parameter"] == pytest.approx(row["bottom_overlap"], abs=1e-7)
    assert cheap["has_descent_outlier"] is row["has_descent_outlier"] is True


def test_order_parameter_from_grid_reads_the_crossing_of_the_seed_mean():
    """Bottom overlaps 0.01 below delta = 3 and 0.30-0.32 (mean 0.31) from 3 on (d = 1000,
    m = 2): the crossing of 0.05 lies at ``2 * 1.5^(0.04/0.30)`` (interpolation in log delta)."""
    rows = [
        {"delta": x, "seed": s, "d": 1000, "bottom_eigenvalue": -0.05,
         "bottom_overlap": 0.01 if x < 3 else 0.3 + 0.01 * s}
        for x in (1.0, 2.0, 3.0, 4.0)
        for s in range(3)
    ]  # fmt: skip
    res = order_parameter_from_grid(rows, rmt.RunConfig(width=2))
    assert res.level == 0.05 and tuple(res.bracket) == (2.0, 3.0)
    assert res.delta == pytest.approx(2.0 * 1.5 ** (0.04 / 0.30), rel=1e-12)
    assert tuple(res.interval) == (2.0, 3.0)


@pytest.mark.slow
@pytest.mark.ci
def test_trained_delta_nn_agrees_with_the_learning_transition():
    """The Hessian transition at W1 and the learning transition of GD, on the same runs."""
    cfg = rmt.RunConfig(d=150, seeds=(0, 1, 2), train_steps=1500, lr=0.5, point="trained")
    res = trained_thresholds(cfg, 1.2, 8.0, rtol=0.25, max_evals=6)
    nn, gd = res.delta_nn, res.delta_gd
    assert nn.found and gd.found
    # both well above the population-point value (0.84) and delta_alg = 1/2
    assert nn.delta > 1.2 and gd.delta > 1.2
    # the intervals overlap: the network learns Theta* where the Hessian at W1 has the outlier
    ends = nn.interval or (None, None)
    lo = 1.2 if ends[0] is None else ends[0]  # an open end reaches the search limit
    hi = 8.0 if ends[1] is None else ends[1]
    assert lo <= gd.interval[1] and gd.interval[0] <= hi


@pytest.mark.slow
def test_simulated_delta_nn_of_phase_retrieval_at_d_1000():
    """Phase retrieval, softplus/Huber, m = 2, d = 1000, 4 seeds: the order parameter crosses
    its level inside [2, 3.25], near the asymptotic value 2.60 +- 0.03 of the DMFT (README), with
    a two-sided interval narrower than [2, 4] that holds the estimate."""
    cfg = rmt.RunConfig(d=1000, seeds=(0, 1, 2, 3))
    res = trained_thresholds(cfg, 1.5, 4.0, gd=False)
    nn = res.delta_nn
    assert nn.found and 2.0 <= nn.delta <= 3.25 and abs(nn.delta - 2.6) < 0.4
    lo, hi = nn.interval
    assert lo is not None and hi is not None and lo <= nn.delta <= hi and hi - lo < 2.0
    assert nn.level == 0.05 and nn.null_level < 0.015  # the null quantile over 48 spectra
    assert res.delta_gd is None and len(res.runs) == 4 * len(nn.evaluations)
    # below the interval every seed's bottom eigenvector carries less than the level
    assert all(max(e["values"]) < nn.level for e in nn.evaluations if e["delta"] < lo * 0.9)


def test_trained_threshold_table_rows_carry_every_threshold(tmp_path):
    from rmt.experiments.learning import trained_threshold_table

    base = rmt.RunConfig(d=60, seeds=(0,), train_steps=400, point="trained")
    rows = trained_threshold_table(base, 1.0, 8.0, variants=[dict(width=1)])
    (row,) = rows
    assert row["width"] == 1 and row["d"] == 60 and row["seeds"] == 1
    # whatever the bisection found, a number comes with an interval that contains it
    for key in ("delta_nn", "delta_gd"):
        if row[key] is not None:
            lo, hi = row[f"{key}_lo"], row[f"{key}_hi"]
            assert (lo is None or lo <= row[key]) and (hi is None or row[key] <= hi)
    json.dumps(row, allow_nan=False)
    # the reference columns belong to the variant's width (m = 1), not the base's (m = 2)
    net1 = rmt.TwoLayerNet(1, activation="softplus", loss="huber")
    ref = rmt.population_threshold(rmt.MultiIndexModel("phase_retrieval"), net1)
    assert row["delta_pop"] == pytest.approx(ref.delta_pop, rel=1e-9)
    assert row["delta_alg"] == pytest.approx(0.5, abs=1e-9)


def test_trained_threshold_command_writes_values_intervals_and_error_rates(tmp_path):
    """``rmt threshold --point trained``: strict JSON; delta_NN carries its level (the null
    quantile over 2 seeds x (8 + 4) evaluations at d = 60, m = 2), the stated family-wise rate
    and the interval level; a threshold without a number is ``None`` with its reason."""
    from rmt.thresholds.statistics import order_level

    cfg = rmt.RunConfig(
        d=60, deltas=(1.0, 8.0), seeds=(0, 1), train_steps=400, point="trained", no_dmft=True
    )
    summary = commands.cmd_threshold_trained(cfg, tmp_path, quiet=True)
    text = (tmp_path / "threshold.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data["delta_nn_fwer"] == 0.01 and data["delta_nn_interval_alpha"] == 0.1
    assert data["delta_nn_level"] == pytest.approx(order_level(60, 1, 2, 24), rel=1e-12)
    assert data["delta_nn_level"] == pytest.approx(1 - (0.01 / 24) ** (1 / 59), rel=1e-9)
    for key in ("delta_nn", "delta_gd"):
        assert data[key] is not None or data[f"{key}_reason"]
    assert summary["per_d"]["60"]["delta_nn"]["evaluations"][0]["n"] == 2
