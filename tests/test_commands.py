"""CLI commands end to end on tiny configurations, checked against independent references."""

import json

import numpy as np
import pytest
from scipy.linalg import eigh

from rmt.app import commands
from rmt.experiments.config import RunConfig
from rmt.experiments.store import read_table
from tests.test_population import _scalar_bbp_reference


def test_spectrum_files_match_dense_eigh(tmp_path):
    cfg = RunConfig(d=50, deltas=(2.0, 4.0), seeds=(0,), point="zero")
    summary = commands.cmd_spectrum(cfg, tmp_path)
    rows = read_table(tmp_path / "spectrum.csv")
    for delta in (2.0, 4.0):
        rng = cfg.rng_for(delta, 0)
        data = cfg.model().sample(cfg.n_of(delta), 50, rng=rng)
        net = cfg.net()
        s, ds, d2s = net.sigma(np.zeros((data.n, 2)))
        _, dl, d2l = net.loss_derivatives(data.y, s @ net.a)
        # W = 0: D_i = l'' a a^T s'(0)^2 + diag(l' a s''(0)), built without the toolkit's kernels
        D = d2l[:, None, None] * np.outer(net.a * ds[0], net.a * ds[0])
        D += np.einsum("i,j,jk->ijk", dl, net.a * d2s[0], np.eye(2))
        H = np.einsum("ijk,is,it->jskt", D, data.X, data.X).reshape(100, 100) / data.n
        got = [r["eigenvalue"] for r in rows if r["delta"] == delta]
        np.testing.assert_allclose(got, eigh(H, eigvals_only=True), atol=1e-12)
    assert (tmp_path / "spectra_vs_delta.png").stat().st_size > 10_000
    assert len(summary["panels"]) == 2
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["command"] == "spectrum" and manifest["seeds"] == [0]
    assert sorted(manifest["files"]) == sorted(
        p.name for p in tmp_path.iterdir() if p.name != "manifest.json"
    )


def test_threshold_command_matches_scalar_reference(tmp_path):
    cfg = RunConfig(width=1, activation="quadratic", loss="huber", point="zero", no_dmft=True)
    commands.cmd_threshold(cfg, tmp_path)
    out = json.loads((tmp_path / "threshold.json").read_text())
    ref = _scalar_bbp_reference(lambda z: 2 * min(z * z, 1.0), 2.0, [-1.0, 0.0, 1.0])
    assert out["delta_pop"] == pytest.approx(ref, rel=1e-6)


def test_train_command_writes_curves_consistent_with_the_loss(tmp_path):
    cfg = RunConfig(d=30, deltas=(6.0,), seeds=(0,), train_steps=60, lr=0.2, continue_steps=0)
    summary = commands.cmd_train(cfg, tmp_path)
    curves = read_table(tmp_path / "training.csv")
    loss = np.array([r["train_loss"] for r in curves])
    test_loss = np.array([r["test_loss"] for r in curves])
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0]
    # the first losses are those at the initial point, drawn from the same stream after the
    # training set and the held-out test set
    rng = cfg.rng_for(6.0, 0)
    data = cfg.model().sample(180, 30, rng=rng)
    test = cfg.model().sample(180, 30, rng=rng, theta=data.theta)
    W0 = 1e-2 * rng.standard_normal((30, 2)) / np.sqrt(30)
    assert loss[0] == pytest.approx(cfg.net().loss_and_grad(data, W0)[0], rel=1e-10)
    assert test_loss[0] == pytest.approx(cfg.net().loss_and_grad(test, W0)[0], rel=1e-10)
    assert (tmp_path / "training.png").exists() and (tmp_path / "train.json").exists()
    assert summary["final_overlap"] == pytest.approx(curves[-1]["overlap"])


def test_panel_density_next_to_the_atom_matches_a_monte_carlo_law():
    # delta = 1/3 at the softplus/Huber population point: 2/3 of the spectrum is the atom at 0,
    # and the bulk next to it comes from nearly singular D.  The quadrature law resolves it only
    # at the plot's resolution (eta of two grid steps); a 200 000-draw Monte-Carlo law of the
    # same point is the independent reference (at eta -> 0 the two differ by up to 0.23 here).
    from rmt.experiments import point_law, prepare_point, spectrum_panel
    from rmt.freeprob import SpikeLaw, bulk_density

    cfg = RunConfig(d=300, deltas=(1 / 3,), seeds=(0,))
    point = prepare_point(cfg)
    spec = point.spec
    panel = spectrum_panel(cfg, point, 1 / 3, 0, point_law(cfg, point))
    (x, rho), eta = panel["density"], panel["eta"]
    assert eta == pytest.approx(2 * (x[1] - x[0]))
    near = (np.abs(x) > 2 * eta) & (np.abs(x) < 0.06)
    assert near.sum() >= 10
    mc = SpikeLaw.from_network(
        cfg.model(), cfg.net(), spec.Q, spec.M, nodes="monte_carlo", n_mc=200_000, rng=1
    )
    ref = bulk_density(mc, 1 / 3, x[near], eta=eta).density
    np.testing.assert_allclose(rho[near], ref, atol=0.04)


def test_learn_summary_prints_every_threshold_with_its_interval():
    """Each simulated threshold, at the main size and per size, is printed with the interval
    of its estimate; one without a value prints its reason, never ``nan``."""
    nn = {"delta": 3.46, "interval": [2.0, 4.0], "reason": ""}
    gd = {"delta": None, "interval": None, "reason": "no seed learned at any delta"}
    marks = {"delta_nn": 3.46, "delta_gd": None, "delta_pop": 0.84, "delta_alg": 0.5}
    text = commands.format_learn_summary(
        marks, {200: {"delta_nn": nn, "delta_gd": gd}}, {"delta_nn": nn, "delta_gd": gd}
    )
    lines = text.splitlines()
    assert "3.46 [2, 4]" in lines[0] and "not determined: no seed learned" in lines[1]
    assert lines[-1] == (
        "  d = 200: delta_NN 3.46 [2, 4], delta_GD not determined: no seed learned at any delta"
    )
    assert "nan" not in text.lower()
