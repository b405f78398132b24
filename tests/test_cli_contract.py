"""The command line (``rmt.app.cli``) keeps its promises: JSON-only stdout, one-line failures that
leave nothing half-written, Ctrl-C that keeps the resumable rows, progress only on a terminal,
discoverable options, sweeps that grow, sorted and documented tables, sparse eigen input."""

import csv
import io
import json
import os

import numpy as np
import pytest
import scipy.sparse
from scipy.linalg import eigh

import rmt
from rmt import experiments
from rmt.app import commands
from rmt.app.cli import main
from rmt.experiments import learning, sweep
from rmt.experiments.config import parse_deltas
from rmt.experiments.store import read_table

SMALL = ["--d", "40", "--n-eigs", "2", "--method", "dense"]


def _one_line_error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- ranges and --help ------------------------------------------------------------------------


def test_range_with_zero_values_says_num_must_be_at_least_one(capsys, tmp_path):
    with pytest.raises(ValueError, match="num must be >= 1"):
        parse_deltas("1:5:0")
    assert parse_deltas("1:5:1") == (1.0,)  # one value: the start, as numpy.linspace
    assert parse_deltas("1:2:3") == tuple(np.linspace(1, 2, 3))
    assert main(["sweep", "--delta", "1:5:0", "--out", str(tmp_path / "o")]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "--delta" in line and "num must be >= 1" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["spectrum", "sweep", "threshold", "train", "learn"])
def test_help_lists_the_registries_and_the_range_grammar(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in [*rmt.TARGETS, *rmt.ACTIVATIONS, *rmt.LOSSES]:
        assert name in text, name
    if command != "spectrum":  # spectrum computes every eigenvalue densely: no --method
        for name in rmt.eigen.METHODS:
            assert name in text, name
    assert "start:stop:num" in text and "--quiet" in text


# -- --out checked before any work -------------------------------------------------------------


@pytest.mark.parametrize("command", ["spectrum", "train", "sweep", "threshold", "learn"])
def test_out_that_is_a_file_fails_in_one_line_before_computing(command, tmp_path, capsys, mp):
    def never(*args, **kwargs):
        raise AssertionError("computed before checking --out")

    for name in (
        "spectrum_panels",
        "training_run",
        "prepare_point",
        "threshold_summary",
        "learn_sweep",
    ):
        mp.setattr(commands, name, never)  # the names each command calls
    target = tmp_path / "taken"
    target.write_text("precious")
    for out in (target, target / "sub"):
        assert main([command, *_tiny(command), "--out", str(out)]) == 2
        line = _one_line_error(capsys.readouterr().err)
        assert str(target) in line
    assert target.read_text() == "precious" and sorted(os.listdir(tmp_path)) == ["taken"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_out_in_an_unwritable_folder_fails_in_one_line(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main(["spectrum", "--d", "20", "--out", str(locked / "o")]) == 2
        assert "not writable" in _one_line_error(capsys.readouterr().err)
    finally:
        locked.chmod(0o700)


def test_out_where_no_folder_can_be_made_fails_in_one_line_before_computing(capsys, mp):
    """``/proc`` passes the permission bits for root, yet no folder can be made in it."""

    def never(*args, **kwargs):
        raise AssertionError("computed before checking --out")

    mp.setattr(commands, "spectrum_panels", never)
    assert main(["spectrum", "--d", "20", "--out", "/proc/rmt-out"]) == 2
    assert "cannot create a folder in /proc" in _one_line_error(capsys.readouterr().err)


@pytest.fixture
def mp(monkeypatch):
    return monkeypatch


def _tiny(command):
    return {
        "spectrum": ["--d", "30", "--delta", "2"],
        "sweep": [*SMALL, "--delta", "2", "--seeds", "1"],
        "threshold": ["--point", "zero", "--width", "1", "--activation", "quadratic", "--no-dmft"],
        "train": ["--d", "30", "--delta", "6", "--steps", "40", "--continue-steps", "0"],
        "learn": ["--d", "30", "--delta", "4,8", "--seeds", "1", "--steps", "300"],
    }[command]


# -- --json, progress, summaries, manifests ---------------------------------------------------


#: the commands whose tiny run still takes 15-30 s here (theory, figures, compilation)
_SLOW = pytest.mark.slow, pytest.mark.ci


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("spectrum", marks=_SLOW),
        pytest.param("sweep", marks=_SLOW),
        "threshold",
        "train",
        pytest.param("learn", marks=_SLOW),
    ],
)
def test_json_alone_on_stdout_and_a_closing_summary_on_stderr(command, tmp_path, capsys):
    out = tmp_path / "o"
    assert main([command, *_tiny(command), "--json", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)  # the whole of stdout is one JSON document
    assert summary["config"]["d"] in (20, 30, 40, 1000)
    last = cap.err.strip().splitlines()[-1]
    assert last.startswith(f"rmt {command}: ") and "wrote " in last and str(out) in last
    # no progress bar: stderr is not a terminal here
    assert "%|" not in cap.err and "it/s" not in cap.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == command and manifest["versions"]["rmt"] == rmt.__version__
    for name in manifest["files"]:
        assert (out / name).exists(), name
    # the manifest lists every file the command wrote
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert set(manifest["files"]) == {f for f in written if not f.endswith("manifest.json")}
    assert "manifest.json" in last
    if command == "sweep":  # the command's wall time, the tasks' own beside it
        assert manifest["timings"]["wall_time_s"] >= manifest["timings"]["tasks_s"] > 0


def test_threshold_table_prints_only_json_on_stdout(tmp_path, capsys, mp):
    real = experiments.threshold_table
    mp.setattr(
        commands,
        "threshold_table",
        lambda cfg, progress=True: real(cfg, experiments.TABLE_CONFIGS[:2], progress=progress),
    )
    args = ["threshold", "--table", "--no-dmft", "--json", "--out", str(tmp_path)]
    assert main(args) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert len(summary["table"]) == 2 and "configuration" in cap.err  # the table on stderr
    assert cap.err.strip().splitlines()[-1].startswith("rmt threshold: ")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _no_theory(mp):
    """The sweep's predicted curve and full spectra are not what these tests check: skip them."""
    mp.setattr(commands, "sweep_theory", lambda config, point: sweep.SweepTheory(None))


def test_bars_only_on_a_terminal_and_quiet_silences_them(tmp_path, mp, capsys):
    _no_theory(mp)
    args = ["sweep", *SMALL, "--delta", "2,3", "--seeds", "1"]
    fake = _Terminal()
    mp.setattr("sys.stderr", fake)
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    shown = fake.getvalue()
    assert "tasks" in shown and "2/2" in shown  # the bar of the points
    assert "rmt: drawing the figures ..." in shown  # a line for each long stage
    fake = _Terminal()
    mp.setattr("sys.stderr", fake)
    assert main([*args, "--quiet", "--out", str(tmp_path / "b")]) == 0
    quiet = fake.getvalue()
    assert "tasks" not in quiet and " ...\n" not in quiet
    assert quiet.strip().splitlines()[-1].startswith("rmt sweep: 2 points; wrote ")


# -- Ctrl-C keeps the resumable rows; a bad scheduler leaves no manifest ----------------------


def test_ctrl_c_during_a_sweep_keeps_rows_says_how_to_resume_exits_130(tmp_path, capsys, mp):
    _no_theory(mp)
    real, calls = sweep.run_point, []

    def interrupted(config, delta, seed, point=None):
        calls.append((delta, seed))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(config, delta, seed, point)

    mp.setattr(sweep, "run_point", interrupted)
    args = ["sweep", *SMALL, "--delta", "2,3", "--seeds", "1", "--quiet", "--out", str(tmp_path)]
    assert main(args) == 130
    line = _one_line_error(capsys.readouterr().err)
    assert "rerun the same command to resume" in line and str(tmp_path) in line
    assert len(read_table(tmp_path / "sweep.csv")) == 2  # one point of two eigenvalues
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "interrupted"
    mp.setattr(sweep, "run_point", real)
    assert main(args) == 0
    rows = read_table(tmp_path / "sweep.csv")
    keys = [(r["delta"], r["seed"], r["index"]) for r in rows]
    assert keys == [(2.0, 0, 0), (2.0, 0, 1), (3.0, 0, 0), (3.0, 0, 1)]  # sorted when finished


def test_ctrl_c_message_is_the_only_line(tmp_path, capsys, mp):
    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    mp.setattr(learning, "learn_point", stop)
    args = ["learn", *_tiny("learn"), "--quiet", "--out", str(tmp_path / "o")]
    assert main(args) == 130
    line = _one_line_error(capsys.readouterr().err)
    assert line.startswith("rmt: interrupted") and "resume" in line
    assert not (tmp_path / "o" / "d30" / "manifest.json").exists()  # nothing ran


def test_ctrl_c_during_learn_keeps_the_finished_runs(tmp_path, capsys, mp):
    done = []

    def one_then_stop(config, delta, seed):
        if done:
            raise KeyboardInterrupt
        done.append((delta, seed))
        row = {c: None for c in learning.LEARN_COLUMNS}
        row.update(delta=float(delta), seed=int(seed), n=1, d=config.d, learned=False)
        return {"row": row, "eigs": [], "curves": []}

    mp.setattr(learning, "learn_point", one_then_stop)
    args = ["learn", "--d", "30", "--delta", "2,6", "--seeds", "1", "--quiet"]
    assert main([*args, "--out", str(tmp_path)]) == 130
    assert "rerun the same command" in _one_line_error(capsys.readouterr().err)
    rows = read_table(tmp_path / "d30" / "learn.csv")
    assert [(r["delta"], r["seed"]) for r in rows] == done
    assert json.loads((tmp_path / "d30" / "manifest.json").read_text())["status"] == "interrupted"


def test_bad_scheduler_address_one_line_and_no_manifest(tmp_path, capsys):
    pytest.importorskip("distributed")
    out = tmp_path / "o"
    args = ["sweep", *SMALL, "--delta", "2", "--scheduler", "nope", "--quiet", "--out", str(out)]
    assert main(args) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "cannot reach the Dask scheduler at 'nope'" in line
    assert not (out / "manifest.json").exists() and not (out / "sweep.csv").exists()
    assert not (out / "columns.json").exists()


def test_a_resumed_sweep_says_so(tmp_path, capsys):
    """A second run into the same folder names the points it finds and those left to run."""
    out = tmp_path / "o"
    assert main(["sweep", *SMALL, "--delta", "2", "--seeds", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["sweep", *SMALL, "--delta", "2,3", "--seeds", "1", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "resuming: 1 of 2 points already in" in err and "1 to run" in err


# -- sweeps grow; sorted, documented tables ---------------------------------------------------


def test_sweep_grows_with_more_seeds_and_deltas(tmp_path):
    base = dict(d=40, n_eigs=2, method="dense")
    first = rmt.RunConfig(**base, deltas=(2.0,), seeds=(0,))
    grown = rmt.RunConfig(**base, deltas=(3.0, 2.0), seeds=(0, 1))
    rmt.run_sweep(first, out=tmp_path, progress=False)
    rows = rmt.run_sweep(grown, out=tmp_path, progress=False)
    fresh = rmt.run_sweep(grown, out=tmp_path / "fresh", progress=False)  # independent run
    keys = ["delta", "seed", "index", "eigenvalue", "overlap_theta"]
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in fresh]
    on_disk = read_table(tmp_path / "sweep.csv")
    assert [[r[k] for k in keys] for r in on_disk] == [[r[k] for k in keys] for r in fresh]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["points_done"] == 4
    # the eigenvalues of an added point against dense eigh of its Hessian
    sim = experiments.simulate_point(grown, experiments.prepare_point(grown), 3.0, 1)
    ref = eigh(sim.hessian.to_dense(), eigvals_only=True)[:2]
    got = [r["eigenvalue"] for r in on_disk if (r["delta"], r["seed"]) == (3.0, 1)]
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_conflicting_sweep_is_refused_naming_the_fields(tmp_path):
    cfg = rmt.RunConfig(d=40, n_eigs=2, method="dense")
    rmt.run_sweep(cfg, out=tmp_path, progress=False)
    other = rmt.RunConfig(d=40, n_eigs=3, method="dense", width=3, seeds=(0, 1))
    with pytest.raises(ValueError, match=r"differs in: n_eigs, width\)"):
        rmt.run_sweep(other, out=tmp_path, progress=False)


def test_sweep_columns_are_documented_and_no_outlier_is_an_empty_cell(tmp_path):
    cfg = rmt.RunConfig(d=40, n_eigs=3, method="dense", deltas=(3.0,))
    rmt.run_sweep(cfg, out=tmp_path, progress=False)
    columns = json.loads((tmp_path / "columns.json").read_text())
    assert list(columns) == sweep.SWEEP_COLUMNS and all(columns.values())
    with (tmp_path / "sweep.csv").open(newline="") as fh:
        raw = list(csv.DictReader(fh))
    assert raw[0]["theory_outlier"] != ""  # an outlier at delta = 3 (delta_pop ~ 0.84)
    assert [r["theory_outlier"] for r in raw[1:]] == ["", ""]  # one outlier, not three
    assert all("nan" not in v for r in raw for v in r.values())


# -- eigen: sparse input and an honest failure message ----------------------------------------


def _sparse_symmetric(N=300, seed=1):
    B = scipy.sparse.random(N, N, density=0.02, random_state=seed)
    return (B + B.T).tocsr()


@pytest.mark.parametrize("method", ["lanczos", "block_lanczos", "arpack", "lobpcg", "dense"])
@pytest.mark.parametrize("which", ["smallest", "largest"])
def test_sparse_input_matches_dense_eigh(method, which):
    A = _sparse_symmetric()
    ref = eigh(A.toarray(), eigvals_only=True)
    res = rmt.extreme_eigs(A, k=4, which=which, method=method, tol=1e-10, rng=0)
    expect = ref[:4] if which == "smallest" else ref[-4:]
    eps = np.finfo(float).eps
    np.testing.assert_allclose(res.values, expect, atol=1e3 * eps * np.max(np.abs(ref)))
    dense = A.toarray()
    np.testing.assert_allclose(
        dense @ res.vectors, res.vectors * res.values, atol=1e-8 * np.max(np.abs(ref))
    )


def test_sparse_input_is_checked_for_symmetry():
    A = scipy.sparse.triu(_sparse_symmetric(50), k=1).tocsr() + scipy.sparse.eye(50)
    with pytest.raises(ValueError, match="symmetric"):
        rmt.extreme_eigs(A, k=2)
    with pytest.raises(ValueError, match="square"):
        rmt.extreme_eigs(scipy.sparse.random(3, 4, density=0.5), k=1)


def test_no_convergence_message_never_says_nan():
    A = _sparse_symmetric()
    with pytest.raises(rmt.NoConvergenceError) as info:
        rmt.extreme_eigs(A, k=4, method="lanczos", tol=1e-8, rng=0, max_restarts=0, ncv=10)
    message = str(info.value)
    assert info.value.result.k == 0
    assert "nan" not in message and "no candidate pairs" in message
