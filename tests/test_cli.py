"""The command line: option grammar and one-line errors that leave no files behind."""

import dataclasses
import json
import subprocess
import sys
from dataclasses import fields

import numpy as np
import pytest

import rmt
from rmt.app.cli import build_parser, config_from_args, flag_of, main
from rmt.app.commands import format_dmft_threshold
from rmt.experiments.config import RunConfig


def _run(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "rmt.app.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_common_options_build_a_config():
    args = build_parser().parse_args(
        [
            "threshold",
            "--target",
            "norm2",
            "--k",
            "3",
            "--noise",
            "0.1",
            "--width",
            "3",
            "--activation",
            "erf",
            "--loss",
            "square",
            "--point",
            "zero",
            "--d",
            "50",
            "--delta",
            "1:2:3",
            "--seeds",
            "2",
            "--out",
            "x",
        ]
    )
    cfg = config_from_args(args)
    assert cfg.k == 3 and cfg.width == 3 and cfg.deltas == (1.0, 1.5, 2.0)
    assert cfg.seeds == (0, 1) and cfg.point == "zero"


@pytest.mark.parametrize("command", ["spectrum", "sweep", "threshold", "train"])
def test_flags_not_given_leave_the_dataclass_defaults(command):
    assert config_from_args(build_parser().parse_args([command])) == RunConfig()


def test_every_field_has_a_flag_of_the_commands_that_use_it():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for f in fields(RunConfig):
        for command in f.metadata["commands"]:
            flags = {o for a in sub[command]._actions for o in a.option_strings}
            assert flag_of(f) in flags, (f.name, command)
    args = parser.parse_args(
        ["sweep", "--method", "dense", "--n-eigs", "2", "--weight-decay", "0.1", "--steps", "7"]
    )
    cfg = config_from_args(args)
    assert (cfg.method, cfg.n_eigs, cfg.weight_decay, cfg.train_steps) == ("dense", 2, 0.1, 7)
    args = parser.parse_args(["threshold", "--table", "--max-delta", "8"])
    assert config_from_args(args).table and config_from_args(args).max_delta == 8.0


def test_version_and_bench_options(tmp_path):
    proc = _run("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"rmt {rmt.__version__}"
    proc = _run("bench", "--out", "x", cwd=tmp_path)
    assert proc.returncode == 2 and "unrecognized arguments: --out" in proc.stderr
    proc = _run("bench", "--which", "nope", cwd=tmp_path)
    assert proc.returncode == 2 and "no benchmark 'nope'; known: " in proc.stderr


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["sweep", "--delta", "1:2"], "--delta must be"),
        (["sweep", "--target", "nope"], "unknown target 'nope'"),
        (["threshold", "--activation", "gelu"], "unknown activation"),
        (["train", "--seeds", "0"], "--seeds must be >= 1"),
        (["sweep", "--method", "qr"], "unknown method 'qr'"),
        (["train", "--point", "given"], "unknown point 'given'"),
        (["learn", "--sizes", "1,x"], "--sizes must be a list of integers"),
        (["spectrum", "--width", "0"], "width must be >= 1"),
        (["sweep", "--d", "ten"], "invalid int value"),
        (["frobnicate"], "invalid choice"),
        (["threshold", "--dmft"], "ambiguous option: --dmft"),
        (["threshold", "--dmft-replicas", "1"], "--dmft-replicas must be >= 2"),
        (["threshold", "--dmft-steps", "1"], "--dmft-steps must be >= 2"),
    ],
)
def test_bad_options_one_line_error_no_files(argv, fragment, tmp_path):
    out = tmp_path / "out"
    proc = _run(*argv, "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_main_returns_error_code_in_process(capsys, tmp_path):
    assert main(["sweep", "--noise", "-1", "--out", str(tmp_path / "o")]) == 2
    assert "noise" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_threshold_leads_with_the_asymptotic_delta_nn_and_its_error(tmp_path, capsys, monkeypatch):
    """``rmt threshold`` with no flag: the DMFT ``delta_NN`` with its standard error, then
    ``delta_alg`` and ``delta_pop``; in ``threshold.json`` as numbers or, when the search
    fails, as ``None`` with the reason.  The search is planted (its own tests are in
    ``tests/test_asymptotic.py``); ``delta_alg = 1/2`` is phase retrieval's closed form."""
    import rmt.app.commands as dt  # the command calls the asymptotic solver through this name

    planted = rmt.DMFTThreshold(
        value=2.6012,
        stderr=0.0313,
        lo=2.55,
        hi=2.66,
        converged=True,
        message="ok",
        evaluations={},
        replicas=8,
        n_samples=2500,
        law_shift=-0.0004,
        law_shift_se=0.0005,
    )
    calls = []

    def fake(model, net, lo, hi, **kwargs):
        calls.append(kwargs)
        return planted

    monkeypatch.setattr(dt, "dmft_delta_nn", fake)
    assert main(["threshold", "--out", str(tmp_path), "--json"]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert summary["delta_nn_dmft"]["delta"] == 2.6012
    assert summary["delta_nn_dmft"]["stderr"] == 0.0313
    assert summary["delta_nn_dmft"]["law_shift"] == -0.0004
    assert summary["delta_nn_dmft"]["law_shift_se"] == 0.0005
    assert summary["delta_alg"] == pytest.approx(0.5, rel=1e-6)
    assert "delta_NN (DMFT, d -> inf) = 2.601 ± 0.031" in cap.err
    assert calls[0]["replicas"] == 8 and calls[0]["n_samples"] == 2500
    assert calls[0]["d"] is None and summary["delta_nn_dmft"]["d"] is None
    # at a finite size: the dimension reaches the solver and names the value
    assert main(["threshold", "--out", str(tmp_path / "d"), "--json", "--dmft-d", "4000"]) == 0
    cap = capsys.readouterr()
    assert calls[1]["d"] == 4000 and json.loads(cap.out)["delta_nn_dmft"]["d"] == 4000
    assert "delta_NN (DMFT, d = 4000) = 2.601 ± 0.031" in cap.err
    assert main(["threshold", "--out", str(tmp_path / "e"), "--dmft-d", "1"]) != 0
    assert "--dmft-d must be >= 2; got 1" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()  # refused before anything is written
    failed = rmt.DMFTThreshold(
        value=np.nan,
        stderr=np.nan,
        lo=0.5,
        hi=64,
        converged=False,
        message="no plateau",
        evaluations={},
        replicas=8,
        n_samples=2500,
    )
    monkeypatch.setattr(dt, "dmft_delta_nn", lambda *a, **k: failed)
    assert main(["threshold", "--out", str(tmp_path / "b"), "--json"]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert summary["delta_nn_dmft"]["delta"] is None and "NaN" not in cap.out
    assert summary["delta_nn_dmft"]["law_shift"] is None  # not computed: None, not NaN
    assert "not determined: no plateau" in cap.err and "--dmft-d" not in cap.err
    # refused by the law check: the line says how to ask for the value at a size
    moving = dataclasses.replace(
        failed, message="not converged in the law's draws", law_shift=-0.04
    )
    monkeypatch.setattr(dt, "dmft_delta_nn", lambda *a, **k: moving)
    assert main(["threshold", "--out", str(tmp_path / "c")]) == 0
    assert "not converged in the law's draws (on the command line: --dmft-d D)" in (
        capsys.readouterr().err
    )
    # beside a simulation at d, the flag for the DMFT at that same d
    line = format_dmft_threshold(
        {"converged": False, "message": "not converged", "law_shift": -0.04}, 1000
    )
    assert line.endswith("not converged (on the command line: --dmft-d 1000)")


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_sweep_with_tanh_at_its_zero_population_point_runs_at_every_delta(tmp_path, capsys):
    """tanh's population point is ``W = 0``, where every ``D_i`` is a multiple of one ``a a^T``:
    the Hessian has an atom at 0 of mass 1/2 at every ``delta``, which is the bottom of its
    spectrum.  The sweep predicts it (0) and simulation finds it (dense reference inside the
    sweep), with no warning, and the table says "no outlier" rather than ``nan``."""
    args = ["sweep", "--activation", "tanh", "--d", "80", "--delta", "1,4", "--out", str(tmp_path)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "nan" not in err and "no outlier" in err
    rows = [r for r in json.loads((tmp_path / "manifest.json").read_text())["files"]]
    assert "sweep.csv" in rows
    table = (tmp_path / "sweep.csv").read_text().splitlines()
    head = table[0].split(",")
    bottom = [dict(zip(head, line.split(","))) for line in table[1:]]
    bottom = [r for r in bottom if r["index"] == "0"]
    assert bottom and all(abs(float(r["eigenvalue"])) < 1e-8 for r in bottom)
    assert all(float(r["theory_bottom"]) == 0.0 for r in bottom)


#: every first command, small enough to run for each activation of the registry
FIRST_COMMANDS = {
    "spectrum": ["spectrum", "--d", "200", "--delta", "2"],
    "sweep": ["sweep", "--d", "200", "--delta", "1,4", "--seeds", "1"],
    "train": ["train", "--d", "200", "--delta", "3", "--steps", "400", "--continue-steps", "100"],
    "learn": ["learn", "--d", "200", "--delta", "2,4", "--seeds", "1"],
    "threshold": ["threshold", "--d", "200", "--no-dmft"],
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("activation", rmt.ACTIVATIONS)
@pytest.mark.parametrize("command", list(FIRST_COMMANDS))
def test_first_commands_run_with_every_activation(command, activation, tmp_path, capsys):
    """Each first command at ``d = 200`` with each registry activation: exit status 0, no
    warning (any warning fails the test), a manifest that lists the files in the folder, and
    no ``nan`` in what it prints."""
    out = tmp_path / "out"
    args = [*FIRST_COMMANDS[command], "--activation", activation, "--out", str(out)]
    assert main(args) == 0
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and "nan" not in (cap.out + cap.err).lower()
    listed = set(json.loads((out / "manifest.json").read_text())["files"])
    written = {
        str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"
    }
    assert written <= listed
