"""What gradient descent does across delta: runs, tables and thresholds, against dense eigh."""

import json

import numpy as np
import pytest

import rmt
from rmt import commands
from rmt.experiments.learning import (
    learn_point,
    run_descent,
    threshold_from_grid,
    trained_thresholds,
)
from rmt.tables import read_table

CFG = rmt.RunConfig(d=120, deltas=(6.0,), seeds=(0,), train_steps=1200, lr=0.5, point="trained")


def test_threshold_from_grid_reads_the_seed_majority():
    rows = [
        {"delta": x, "seed": s, "learned": x >= 3 or (x == 2 and s == 0)}
        for x in (1, 2, 3, 4)
        for s in range(3)
    ]
    res = threshold_from_grid(rows, "learned")
    assert res["delta"] == pytest.approx(np.sqrt(2 * 3))
    assert res["evaluations"][1] == [2.0, 1, 3]
    none = threshold_from_grid([{"delta": 1, "seed": 0, "learned": True}], "learned")
    assert np.isnan(none["delta"])


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


@pytest.mark.slow
@pytest.mark.ci
def test_trained_delta_nn_agrees_with_the_learning_transition():
    """The Hessian transition at W1 and the learning transition of GD, on the same runs."""
    cfg = rmt.RunConfig(d=150, seeds=(0, 1, 2), train_steps=1500, lr=0.5, point="trained")
    res = trained_thresholds(cfg, 1.2, 8.0, rtol=0.25, max_evals=6)
    nn, gd = res["delta_nn"], res["delta_gd"]
    assert nn.found and gd.found
    # both well above the population-point value (0.84) and delta_alg = 1/2
    assert nn.delta > 1.2 and gd.delta > 1.2
    # the intervals overlap: the network learns Theta* where the Hessian at W1 has the outlier
    assert nn.interval[0] <= gd.interval[1] and gd.interval[0] <= nn.interval[1]


def test_trained_threshold_table_rows_carry_every_threshold(tmp_path):
    from rmt.experiments.learning import trained_threshold_table

    base = rmt.RunConfig(d=60, seeds=(0,), train_steps=400, point="trained")
    rows = trained_threshold_table(base, 1.0, 8.0, variants=[dict(width=1)])
    (row,) = rows
    assert row["width"] == 1 and row["d"] == 60 and row["seeds"] == 1
    # whatever the bisection found, a number comes with an interval that contains it
    for key in ("delta_nn", "delta_gd"):
        if np.isfinite(row[key]):
            assert row[f"{key}_lo"] <= row[key] <= row[f"{key}_hi"]
    # the reference columns belong to the variant's width (m = 1), not the base's (m = 2)
    net1 = rmt.TwoLayerNet(1, activation="softplus", loss="huber")
    ref = rmt.population_threshold(rmt.MultiIndexModel("phase_retrieval"), net1)
    assert row["delta_pop"] == pytest.approx(ref.delta_pop, rel=1e-9)
    assert row["delta_alg"] == pytest.approx(0.5, abs=1e-9)
