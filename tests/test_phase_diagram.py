"""The phase diagram (rmt.experiments.phase_diagram): every cell against a direct call of the
asymptotic solver, cells without a number reported with their reason, resumable tables, and the
``rmt phase-diagram`` command (docs/theory.md section 8.10)."""

import json
from dataclasses import replace

import numpy as np
import pytest

import rmt
from rmt.app.cli import main
from rmt.app.plotting import phase_diagram_figures
from rmt.app.report import format_phase_table
from rmt.experiments import phase_diagram as pd
from rmt.experiments.store import read_table
from rmt.thresholds.asymptotic import DMFTEvaluation

#: small DMFT settings: two replicas of 500 draws, searched up to delta = 16
SMALL = rmt.RunConfig(width=1, dmft_samples=500, dmft_replicas=2, max_delta=16.0)


def test_grid_is_read_with_its_types_and_bad_grids_are_refused():
    assert pd.parse_grid("width=1,2;activation=softplus,tanh") == {
        "width": (1, 2),
        "activation": ("softplus", "tanh"),
    }
    assert pd.parse_grid({"lr": [0.1, "0.5"]}) == {"lr": (0.1, 0.5)}
    assert pd.parse_grid("") == pd.DEFAULT_GRID
    for bad, words in [
        ("depth=1,2", "grid axis must be one of"),
        ("width=1;width=2", "given twice"),
        ("width=1,1", "repeats a value"),
        ("width=one", "takes int values"),
        ("width", "name=v1,v2"),
        ("loss=", "has no values"),
    ]:
        with pytest.raises(ValueError, match=words):
            pd.parse_grid(bad)
    with pytest.raises(ValueError, match="activation"):
        pd.grid_cells(SMALL, {"activation": ("softplus", "sigmoid")})


@pytest.mark.slow
@pytest.mark.ci
def test_every_cell_is_the_direct_solve_and_cells_without_a_number_say_why(tmp_path):
    """softplus/Huber at m = 2 (a transition), at m = 1 (a first phase that converges without a
    minimum of the gradient norm, whose learning margin still moves at the step budget of 400)
    and erf/Huber at m = 2 (no transition, since the population point's curvature blocks are
    positive semidefinite): each cell equals ``rmt.dmft_delta_nn`` called on its own
    configuration, ``delta_alg`` is phase retrieval's closed form 1/2 and ``delta_pop`` the
    population threshold."""
    small = replace(SMALL, dmft_steps=100)  # solves of at most 400 steps
    soft = pd.phase_diagram(small, "width=2,1", out=tmp_path / "soft", progress=False)
    erf = pd.phase_diagram(
        replace(SMALL, width=2), "activation=erf", out=tmp_path / "erf", progress=False
    )
    rows = [*soft.rows, *erf.rows]
    assert [(r["width"], r["activation"]) for r in rows] == [
        (2, "softplus"), (1, "softplus"), (2, "erf")
    ]  # fmt: skip
    for row in rows:
        base = small if row["activation"] == "softplus" else SMALL
        cfg = replace(base, width=row["width"], activation=row["activation"])
        direct = rmt.dmft_delta_nn(
            cfg.model(), cfg.net(), pd.MIN_DELTA, 16.0, replicas=2, **cfg.dmft_options()
        )
        assert row["delta_alg"] == pytest.approx(0.5, rel=1e-6)
        pop = rmt.population_threshold(cfg.model(), cfg.net())
        assert row["delta_pop"] == pytest.approx(pop.delta_pop, rel=1e-9)
        if direct.converged:
            assert row["status"] == "found"
            assert row["delta_nn"] == pytest.approx(direct.value, rel=1e-12)
            assert row["stderr"] == pytest.approx(direct.stderr, rel=1e-12)
        else:
            assert row["status"] in ("none", "not determined")
            assert row["delta_nn"] is None and row["stderr"] is None
            assert row["reason"] == direct.message
    two, one, erf = rows
    assert two["status"] == "found" and 2.0 < two["delta_nn"] < 4.0
    assert one["status"] == "not determined" and "no plateau reached" in one["reason"]
    assert erf["status"] == "none" and "no negative Theta* outlier" in erf["reason"]
    assert not np.isfinite(erf["delta_pop"])
    # the table on disk holds the same cells, with no number where there is none
    on_disk = {r["width"]: r for r in read_table(tmp_path / "soft" / "phase_diagram.csv")}
    assert on_disk[2]["delta_nn"] == pytest.approx(two["delta_nn"], rel=1e-12)
    assert on_disk[1]["delta_nn"] is None and on_disk[1]["status"] == "not determined"
    (erf_on_disk,) = read_table(tmp_path / "erf" / "phase_diagram.csv")
    assert erf_on_disk["delta_nn"] is None and erf_on_disk["status"] == "none"


def test_a_rerun_computes_only_the_new_cells(tmp_path, monkeypatch):
    """Cells already in ``phase_diagram.csv`` are read back; a wider grid adds only its new
    cells, and a folder of other shared settings is refused."""
    calls = []

    def planted(config, cell):
        calls.append(cell["activation"])
        row = {name: getattr(config, name) for name in pd.AXES}
        row.update(cell, delta_nn=2.0, stderr=0.01, status="found", reason="", replicas=2)
        row.update(n_samples=500, delta_alg=0.5, delta_pop=0.8, pop_reason="", seconds=0.0)
        return row

    monkeypatch.setattr(pd, "cell_row", planted)
    pd.phase_diagram(SMALL, "activation=softplus,tanh", out=tmp_path, progress=False)
    res = pd.phase_diagram(SMALL, "activation=softplus,tanh,erf", out=tmp_path, progress=False)
    assert calls == ["softplus", "tanh", "erf"]
    assert [r["activation"] for r in res.rows] == ["softplus", "tanh", "erf"]
    assert len(read_table(tmp_path / "phase_diagram.csv")) == 3
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["grid"]["activation"][-1] == "erf"
    other = rmt.RunConfig(width=1, dmft_samples=800, dmft_replicas=2, max_delta=16.0)
    with pytest.raises(ValueError, match="dmft_samples"):
        pd.phase_diagram(other, "activation=softplus", out=tmp_path, progress=False)


def test_a_step_size_where_descent_does_not_settle_is_not_a_number():
    """Quadratic activation, square loss, lr 0.5: gradient descent diverges or does not settle
    in the DMFT (docs/theory.md 8.10), so the cell has no ``delta_NN``, only the reason."""
    cfg = rmt.RunConfig(width=1, dmft_samples=400, dmft_replicas=2, max_delta=8.0)
    row = pd.cell_row(cfg, {"activation": "quadratic", "loss": "square"})
    assert row["status"] == "not determined" and row["delta_nn"] is None
    assert row["stderr"] is None and row["reason"]


def test_command_writes_table_figures_and_json_and_refuses_a_bad_grid(tmp_path, capsys):
    out = tmp_path / "pd"
    args = ["phase-diagram", "--grid", "width=1,2;activation=tanh"]
    args += ["--dmft-samples", "400", "--dmft-replicas", "2", "--max-delta", "4"]
    assert main([*args, "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [c["width"] for c in summary["cells"]] == [1, 2]
    assert all(c["status"] == "none" and c["delta_nn"] is None for c in summary["cells"])
    for name in ("phase_diagram_lines.png", "phase_diagram_heatmap.png"):
        assert (out / name).stat().st_size > 10_000
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["files"]) == {
        "phase_diagram.csv",
        "phase_diagram.json",
        "phase_diagram_lines.png",
        "phase_diagram_heatmap.png",
    }
    bad = tmp_path / "bad"
    assert main(["phase-diagram", "--grid", "depth=1,2", "--out", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grid axis must be one of" in err[0] and not bad.exists()


@pytest.mark.parametrize("loss", ["square", "huber"])
def test_a_relu_cell_has_no_transition_with_the_reason(loss):
    """ReLU with a convex loss: the Hessian is positive semidefinite at every point
    (tests/test_asymptotic.py checks it by finite differences), so the cell is "none" with that
    reason, the reason of the direct call, beside the population thresholds."""
    cfg = replace(SMALL, width=4, activation="relu", loss=loss)
    row = pd.cell_row(SMALL, {"width": 4, "activation": "relu", "loss": loss})
    direct = rmt.dmft_delta_nn(cfg.model(), cfg.net(), pd.MIN_DELTA, 16.0, **cfg.dmft_options())
    assert row["status"] == "none" and row["delta_nn"] is None and row["stderr"] is None
    assert row["reason"] == direct.message and "positive semidefinite" in row["reason"]
    assert row["delta_alg"] == pytest.approx(0.5, rel=1e-6)


def test_the_terminal_table_prints_a_shared_reason_once():
    """Cells without a number point at numbered notes; cells with the same reason share one."""
    base = dict(delta_alg=0.5, delta_pop=None, delta_nn=None, stderr=None)
    rows = [
        dict(base, width=1, status="none", reason="no outlier"),
        dict(base, width=2, status="found", reason="", delta_nn=2.5, stderr=0.02),
        dict(base, width=3, status="not determined", reason="does not settle"),
        dict(base, width=4, status="none", reason="no outlier"),
    ]
    lines = format_phase_table(rows, {"width": (1, 2, 3, 4)}).splitlines()
    assert lines[2].split()[1:3] == ["none", "[1]"] and lines[5].split()[1:3] == ["none", "[1]"]
    assert "2.500 ± 0.020" in lines[3] and "[2]" in lines[4]
    assert lines[6:] == ["[1] no outlier", "[2] does not settle"]


def test_a_root_whose_margin_moves_with_the_law_draws_is_not_determined():
    """A search that found its root with every evaluation converged, but whose margin there
    still moved with the law's draws (``law_shift`` set, no value), is "not determined", not
    "none"; one without that shift and with every evaluation converged found no root: "none"."""
    ok = DMFTEvaluation(
        delta=5.7, t1=60, margins=np.zeros(8), loo_margins=np.zeros(8), margin=0.0,
        margin_se=0.006, hessians=(), converged=True, message="ok",
    )  # fmt: skip
    moving = rmt.DMFTThreshold(
        value=np.nan, stderr=np.nan, lo=0.5, hi=64.0, converged=False,
        message="not converged in the law's draws", evaluations={5.7: ok},
        law_shift=-0.04, law_shift_se=0.005,
    )  # fmt: skip
    assert pd._status_of(moving) == "not determined"
    assert pd._status_of(replace(moving, law_shift=np.nan)) == "none"


def test_a_finite_size_reaches_every_cell_and_names_the_axes(monkeypatch):
    """``dmft_d`` goes to each cell's search as ``d`` (0: the limit, ``d=None``), and the
    figures name the size of their values."""
    seen = []

    def fake(model, net, lo, hi, **kwargs):
        seen.append(kwargs["d"])
        return rmt.DMFTThreshold(value=4.6, stderr=0.09, lo=4.5, hi=4.7, converged=True,
                                 message="ok", replicas=2, n_samples=400)  # fmt: skip

    monkeypatch.setattr(pd, "dmft_delta_nn", fake)
    for d in (4000, 0):
        row = pd.cell_row(replace(SMALL, dmft_d=d), {"loss": "square"})
        assert row["delta_nn"] == 4.6 and row["status"] == "found"
    assert seen == [4000, None]
    figs = phase_diagram_figures([row], {"loss": ["square"]}, "t", "d = 4000")
    assert figs["phase_diagram_lines.png"].axes[0].get_ylabel() == "delta_NN (DMFT, d = 4000)"
    head = format_phase_table([row], {"loss": ["square"]}, "d = 4000").splitlines()[0]
    assert "delta_NN (DMFT, d = 4000)" in head
