"""Sweeps: rows against dense eigh, exact resumption after an interruption, tidy files."""

import json
from dataclasses import replace

import numpy as np
import pytest
from scipy.linalg import eigh

import rmt
from rmt import experiments
from rmt.experiments import sweep
from rmt.experiments.store import read_table

SMALL = dict(d=60, deltas=(2.0, 4.0), seeds=(0, 1), n_eigs=2, method="dense")


def test_rows_match_a_dense_rebuild():
    cfg = rmt.RunConfig(**SMALL)
    point = experiments.prepare_point(cfg)
    rows = experiments.run_point(cfg, 4.0, 1, point)
    rng = cfg.rng_for(4.0, 1)
    data = cfg.model().sample(240, 60, rng=rng)
    W = point.spec.draw(60, data.theta, rng)
    evals, evecs = eigh(rmt.Hessian(cfg.net(), data, W).to_dense())
    assert [r["index"] for r in rows] == [0, 1]
    np.testing.assert_allclose([r["eigenvalue"] for r in rows], evals[:2], rtol=1e-10)
    ov = np.sum((evecs[:, :2].T.reshape(2, 2, 60) @ data.theta) ** 2, axis=(1, 2))
    np.testing.assert_allclose([r["overlap_theta"] for r in rows], ov, atol=1e-8)
    for r in rows:
        assert r["theory_edge_lo"] < r["theory_edge_hi"]
        assert r["plugin_error"] == pytest.approx(rows[0]["eigenvalue"] - r["plugin_bottom"])


def test_interrupted_sweep_resumes_without_recomputing(tmp_path, monkeypatch):
    cfg = rmt.RunConfig(**SMALL)
    reference = rmt.run_sweep(cfg, progress=False)
    calls = []
    real = sweep.run_point

    def flaky(config, delta, seed, point=None):
        calls.append((delta, seed))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(config, delta, seed, point)

    monkeypatch.setattr(sweep, "run_point", flaky)
    with pytest.raises(KeyboardInterrupt):
        rmt.run_sweep(cfg, out=tmp_path, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["points_done"] == 2
    assert len(read_table(tmp_path / "sweep.csv")) == 2 * cfg.n_eigs
    calls.clear()
    rows = rmt.run_sweep(cfg, out=tmp_path, progress=False)
    assert len(calls) == 2  # only the two unfinished points ran
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "complete"
    keys = ["delta", "seed", "index", "eigenvalue", "overlap_theta", "theory_bottom"]
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in reference]
    on_disk = sorted(
        read_table(tmp_path / "sweep.csv"), key=lambda r: (r["delta"], r["seed"], r["index"])
    )
    assert [[r[k] for k in keys] for r in on_disk] == [[r[k] for k in keys] for r in reference]


def test_sweep_hands_out_the_largest_points_first(monkeypatch):
    cfg = rmt.RunConfig(**{**SMALL, "deltas": (1.0, 4.0, 2.0), "seeds": (0, 1)})
    seen = []

    def record(func, tasks, **kwargs):
        seen.extend((t[1], t[2]) for t in tasks)
        return []

    monkeypatch.setattr("rmt.operators.distributed.run_tasks", record)
    rmt.run_sweep(cfg, progress=False)
    assert seen == [(4.0, 0), (4.0, 1), (2.0, 0), (2.0, 1), (1.0, 0), (1.0, 1)]
    assert [cfg.n_of(x) for x, _ in seen] == sorted((cfg.n_of(x) for x, _ in seen), reverse=True)


def test_output_folder_of_another_configuration_is_refused(tmp_path):
    cfg = rmt.RunConfig(**{**SMALL, "deltas": (2.0,), "seeds": (0,)})
    rmt.run_sweep(cfg, out=tmp_path, progress=False)
    other = rmt.RunConfig(**{**SMALL, "deltas": (2.0,), "seeds": (0,), "width": 3})
    with pytest.raises(ValueError, match="another configuration"):
        rmt.run_sweep(other, out=tmp_path, progress=False)
    # options that cannot change a sweep's rows (threshold search, scheduler) do not block it
    same = replace(cfg, max_delta=10.0, table=True, continue_steps=5, scheduler=None)
    assert len(rmt.run_sweep(same, out=tmp_path, progress=False)) == cfg.n_eigs


def test_simulation_is_the_sample_the_weights_and_the_hessian():
    cfg = rmt.RunConfig(**{**SMALL, "point": "zero"})
    sim = experiments.simulate_point(cfg, rmt.make_point(cfg), 2.0, 1)
    data = cfg.model().sample(120, 60, rng=cfg.rng_for(2.0, 1))
    np.testing.assert_array_equal(sim.data.X, data.X)
    np.testing.assert_array_equal(sim.W, np.zeros((60, 2)))
    assert sim.record is None and sim.hessian.shape == (120, 120)


def test_sweep_on_a_local_cluster_equals_the_serial_sweep(tmp_path):
    """Each point is one Dask task; results are identical, seed for seed."""
    distributed = pytest.importorskip("distributed")
    cfg = rmt.RunConfig(**{**SMALL, "deltas": (2.0, 3.0)})
    serial = rmt.run_sweep(cfg, progress=False)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        parallel = rmt.run_sweep(cfg, out=tmp_path, scheduler=client, progress=False)
    keys = [c for c in experiments.SWEEP_COLUMNS if not c.startswith("time_")]
    assert [[r[k] for k in keys] for r in parallel] == [[r[k] for k in keys] for r in serial]
    assert len(read_table(tmp_path / "sweep.csv")) == len(serial)
