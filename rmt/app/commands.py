"""What each ``rmt`` command does: call an experiment, then write its tables, figures and JSON.

Every command takes a validated :class:`rmt.RunConfig` (the only carrier of its options) and an
output folder, and returns a JSON-able summary.  The science is in :mod:`rmt.experiments`;
files are written by :mod:`rmt.experiments.store`, each one complete or not at all (the resumable sweep
table excepted).
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
from dataclasses import replace

import numpy as np

from rmt.app.plotting import (
    grokking_figures,
    learn_figures,
    learning_curve_deltas,
    phase_diagram_figures,
    save_figure_atomic,
    spectra_figure,
    sweep_figure,
    threshold_figure,
    training_figure,
)
from rmt.app.report import (
    format_grokking_table,
    format_phase_table,
    format_sweep_table,
    format_threshold_table,
)
from rmt.dynamics.dmft import dmft_hessian
from rmt.experiments import (
    TABLE_COLUMNS,
    prepare_point,
    run_sweep,
    spectrum_panels,
    sweep_theory,
    threshold_summary,
    threshold_table,
    training_run,
)
from rmt.experiments.config import RunConfig
from rmt.experiments.grokking import (
    RUNS_FILE,
    SUMMARY_FILE,
    delay_curves,
    grokking,
    grokking_config,
)
from rmt.experiments.learning import (
    LEARN_COLUMNS,
    TRAINED_TABLE_COLUMNS,
    learn_sweep,
    reference_thresholds,
    trained_threshold_table,
    trained_thresholds_by_size,
)
from rmt.experiments.phase_diagram import AXES, grid_cells, parse_grid, phase_diagram
from rmt.experiments.store import columns_table, read_table, write_json, write_manifest, write_table
from rmt.thresholds.asymptotic import STDERR_RTOL, dmft_delta_nn

#: most panels of ``rmt spectrum`` (one per delta)
MAX_PANELS = 6


def _say(text: str) -> None:
    """Human-readable output goes to stderr, so that ``--json`` leaves stdout to the JSON."""
    print(text, file=sys.stderr)


def _stage(quiet: bool, text: str) -> None:
    """A line for a stage that takes a while (silenced by ``--quiet``)."""
    if not quiet:
        _say(f"rmt: {text} ...")


def _wrote(command: str, result: str, files, out) -> None:
    """The closing one-line summary of a command: its result and the files it wrote."""
    _say(f"rmt {command}: {result}; wrote {', '.join(sorted(files))} to {out}")


def config_label(config: RunConfig) -> str:
    """A one-line title for the figures of ``config``."""
    return (
        f"{config.target}, {config.activation}/{config.loss}, m = {config.width}, "
        f"{config.point} point, d = {config.d}"
    )


def _prepare_out(out) -> pathlib.Path:
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _panel_summary(p) -> dict:
    return {
        "delta": p["delta"],
        "bottom": [float(v) for v in p["eigenvalues"][:3]],
        "edges": p.get("edges"),
        "outliers": p.get("outliers"),
    }


def cmd_spectrum(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt spectrum``: full spectra at each ``delta`` (first seed) against the theory."""
    if len(config.deltas) > MAX_PANELS:
        raise ValueError(
            f"rmt spectrum draws one panel per delta: give at most {MAX_PANELS}; "
            f"got {len(config.deltas)}"
        )
    t0 = time.perf_counter()
    _stage(quiet, f"full spectra and theory at {len(config.deltas)} delta(s), d = {config.d}")
    panels = spectrum_panels(config)
    elapsed = time.perf_counter() - t0
    out = _prepare_out(out)
    rows = [
        {"delta": p["delta"], "index": i, "eigenvalue": float(v)}
        for p in panels
        for i, v in enumerate(p["eigenvalues"])
    ]
    write_table(out / "spectrum.csv", rows, ["delta", "index", "eigenvalue"])
    _stage(quiet, "drawing the spectra figure")
    save_figure_atomic(spectra_figure(panels, config_label(config)), out / "spectra_vs_delta.png")
    summary = {"config": config.to_dict(), "panels": [_panel_summary(p) for p in panels]}
    write_json(out / "spectrum.json", summary)
    files = ["spectrum.csv", "spectra_vs_delta.png", "spectrum.json"]
    write_manifest(out, "spectrum", config, config.seeds[:1], {"wall_time_s": elapsed}, files)
    _wrote("spectrum", f"{len(panels)} spectra", [*files, "manifest.json"], out)
    return summary


def cmd_threshold(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt threshold``: the thresholds of the configuration;
    with ``config.table`` also over the variants of :data:`rmt.experiments.TABLE_CONFIGS`."""
    if config.point == "trained":
        return cmd_threshold_trained(config, out, progress, quiet)
    t0 = time.perf_counter()
    _stage(quiet, "delta_pop, delta_BBP and delta_alg of the configuration")
    summary, res = threshold_summary(config)
    dmft = None if config.no_dmft else _dmft_threshold(config, None if quiet else _say)
    summary["delta_nn_dmft"] = dmft
    timings = {"wall_time_s": time.perf_counter() - t0}
    summary["wall_time_s"] = timings["wall_time_s"]
    table = None
    if config.table:
        t0 = time.perf_counter()
        _stage(quiet, "the threshold table over activations, losses and widths")
        table = threshold_table(config, progress=progress)
        timings["table_s"] = time.perf_counter() - t0
    out = _prepare_out(out)
    write_json(out / "threshold.json", summary)
    files = ["threshold.json"]
    if dmft is not None:
        _say(format_dmft_threshold(dmft))
    _say(
        f"delta_alg (spectral methods)                  = {format_threshold_value(res.delta_alg)}\n"
        f"delta_pop (BBP at the population point)       = {format_threshold_value(res.delta_pop)}"
        f"   (delta_BBP = {format_threshold_value(res.delta_bbp)})"
        + (f"\n  {res.reason}" if res.reason else "")
    )
    if table is not None:
        write_table(out / "threshold_table.csv", table, TABLE_COLUMNS)
        _stage(quiet, "drawing the threshold figure")
        fig = threshold_figure(table, f"{config.point} point")
        save_figure_atomic(fig, out / "threshold_table.png")
        files += ["threshold_table.csv", "threshold_table.png"]
        _say(format_threshold_table(table))
        summary["table"] = table
    write_manifest(out, "threshold", config, (), timings, files)
    head = (
        f"delta_NN = {dmft['delta']:.3f} ± {dmft['stderr']:.3f}"
        if dmft is not None and dmft["converged"]
        else f"delta_pop = {format_threshold_value(res.delta_pop)}"
    )
    _wrote("threshold", head, [*files, "manifest.json"], out)
    return summary


def cmd_sweep(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt sweep``: theory against simulation on the grid of ``delta`` and seeds (resumable)."""
    out = _prepare_out(out)
    t0 = time.perf_counter()
    _stage(quiet, f"the {config.point} point")
    point = prepare_point(config)
    _stage(quiet, f"{len(config.deltas)} delta x {len(config.seeds)} seed(s) at d = {config.d}")
    grid = {(float(x), int(s)) for x in config.deltas for s in config.seeds}
    have = {(float(r["delta"]), int(r["seed"])) for r in read_table(out / "sweep.csv")} & grid
    if have:
        _stage(
            quiet,
            f"resuming: {len(have)} of {len(grid)} points already in {out / 'sweep.csv'}, "
            f"{len(grid) - len(have)} to run",
        )
    rows = run_sweep(config, out=out, progress=progress, point=point)
    _stage(quiet, "theory curve, thresholds and full spectra")
    theory = sweep_theory(config, point)
    if theory.curve is not None:
        write_table(out / "theory_curve.csv", columns_table(theory.curve), list(theory.curve))
    _stage(quiet, "drawing the figures")
    label = config_label(config)
    fig = sweep_figure(rows, theory.curve, theory.thresholds, label, reason=theory.reason)
    save_figure_atomic(fig, out / "outliers_vs_delta.png")
    if theory.panels:
        fig = spectra_figure(theory.panels, label)
        save_figure_atomic(fig, out / "spectra_vs_delta.png")
    _say(format_sweep_table(rows))
    bottom = [r for r in rows if r["index"] == 0]
    errs = [abs(r["eigenvalue"] - r["theory_bottom"]) for r in bottom]
    _complete_manifest(out, time.perf_counter() - t0)
    files = sorted(p.name for p in out.iterdir())
    _wrote("sweep", f"{len(bottom)} points", files, out)
    return {
        "config": config.to_dict(),
        "points": len(bottom),
        "thresholds": theory.thresholds,
        "max_abs_error_bottom": max(errs) if errs else None,
        "max_abs_plugin_error": max(abs(r["plugin_error"]) for r in bottom) if bottom else None,
        "files": files,
    }


def _complete_manifest(out, wall) -> None:
    """Bring ``out/manifest.json`` (written by the resumable run) up to the whole command:
    every file in ``out`` and the command's wall time (the run's own time kept as
    ``tasks_s``)."""
    path = out / "manifest.json"
    if not path.exists():
        return
    manifest = json.loads(path.read_text())
    timings = manifest.get("timings", {})
    timings["tasks_s"] = timings.get("wall_time_s")
    timings["wall_time_s"] = wall
    manifest["timings"] = timings
    manifest["files"] = _written_files(out)
    write_json(path, manifest)


def _written_files(out) -> list:
    """Every file under ``out`` but the manifest, as sorted paths relative to ``out``."""
    return sorted(
        str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"
    )


def cmd_train(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt train``: gradient descent with its two phases, the Hessian at the plateau ``W1``
    and the predicted escape, at the first ``delta`` and seed."""
    out = _prepare_out(out)
    t0 = time.perf_counter()
    _stage(quiet, f"gradient descent at delta = {config.deltas[0]:g}, d = {config.d}")
    tr = training_run(config, progress=progress)
    elapsed = time.perf_counter() - t0
    run = tr.run
    write_table(out / "training.csv", columns_table(tr.curves), list(tr.curves))
    label = config_label(replace(config, point="trained"))  # trained from a small start
    title = f"gradient descent, {label}, delta = {config.deltas[0]:g}"
    fig = training_figure(tr.curves, tr.predicted_step, run.plateau_step, run.escape_step, title)
    save_figure_atomic(fig, out / "training.png")
    dec = tr.decision
    summary = {
        "config": config.to_dict(),
        "plateau_step": run.plateau_step,
        "plateau_detected": run.phases.detected,
        "plateau_rule": run.phases.rule,
        "escape_step": run.escape_step,
        "escape_time": run.escape_time,
        "final_overlap": float(run.overlap[-1]),
        "final_test_loss": float(run.test_loss[-1]),
        "bottom_eigenvalues_at_W1": None if tr.eigs is None else [float(v) for v in tr.eigs.values],
        "overlaps_at_W1": [float(v) for v in tr.overlaps],
        "has_descent_outlier": None if dec is None else dec.has_outlier,
        "predicted_escape_step": tr.predicted_step,
        "diverged": run.diverged,
    }
    write_json(out / "train.json", summary)
    files = ["training.csv", "training.png", "train.json"]
    write_manifest(out, "train", config, config.seeds[:1], {"wall_time_s": elapsed}, files)
    _wrote(
        "train",
        f"plateau at step {run.plateau_step}, escape at {run.escape_step}, final overlap "
        f"{summary['final_overlap']:.3f}",
        [*files, "manifest.json"],
        out,
    )
    return summary


def cmd_learn(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt learn``: gradient descent across ``delta x seeds`` (and ``config.sizes``), the
    Hessian at each plateau, and the thresholds read off the grid (resumable per ``d``)."""
    out = _prepare_out(out)
    t0 = time.perf_counter()
    _stage(quiet, f"{len(config.deltas)} delta x {len(config.seeds)} seed(s) of gradient descent")
    res = learn_sweep(config, out, progress=progress)
    ref, grid = res.reference, res.grid.as_dict()
    per_d = {d: g.as_dict() for d, g in res.per_d.items()}
    marks = {
        "delta_alg": ref.delta_alg,
        "delta_pop": ref.delta_pop,
        "delta_gd": grid["delta_gd"]["delta"],
        "delta_nn": grid["delta_nn"]["delta"],
    }
    rows_by_d = {d: r.rows for d, r in res.by_d.items()}
    label = config_label(replace(config, point="trained"))
    dmft = _learn_dmft(config, rows_by_d[config.d], quiet) if config.dmft else None
    _stage(quiet, "drawing the figures")
    drawn = {**marks, "delta_gd": grid["delta_gd"], "delta_nn": grid["delta_nn"]}
    curves = res.by_d[config.d].curves
    figs = learn_figures(rows_by_d, curves, drawn, label, dmft=dmft, d=config.d)
    for name, fig in figs.items():
        save_figure_atomic(fig, out / name)
    summary = {
        "config": config.to_dict(),
        "thresholds": marks,
        "delta_gd": grid["delta_gd"],
        "delta_nn": grid["delta_nn"],
        "population_reason": ref.reason,
        "per_d": {str(d): v for d, v in per_d.items()},
        "runs": {str(d): len(r) for d, r in rows_by_d.items()},
    }
    if dmft is not None:
        summary["dmft"] = {f"{x:g}": _dmft_record(h) for x, h in sorted(dmft.items())}
    write_json(out / "learn.json", summary)
    files = _written_files(out)  # the per-size tables of each d included
    write_manifest(
        out, "learn", config, config.seeds, {"wall_time_s": time.perf_counter() - t0}, files
    )
    _say(format_learn_summary(marks, per_d, grid))
    _wrote("learn", f"{sum(summary['runs'].values())} runs", [*files, "manifest.json"], out)
    return summary


def format_learn_summary(marks, per_d, estimates=None) -> str:
    """The thresholds of a learn sweep, one line each, and the finite-size trend per ``d``.

    Parameters
    ----------
    marks : dict
        ``delta_nn``, ``delta_gd``, ``delta_pop``, ``delta_alg`` (a number or ``None``).
    per_d : dict
        ``{d: {"delta_nn": dict, "delta_gd": dict}}``: the estimates of each size, as in
        ``learn.json`` (printed with their intervals).
    estimates : dict, optional
        ``{"delta_nn": dict, "delta_gd": dict}`` as in ``learn.json``: their intervals and
        reasons are printed with the values.

    Returns
    -------
    str
    """
    names = {
        "delta_nn": "delta_NN   (Theta* at the bottom of H(W1), simulated)",
        "delta_gd": "delta_GD   (gradient descent learns, simulated)",
        "delta_pop": "delta_pop  (population point, free probability)",
        "delta_alg": "delta_alg  (spectral methods)",
    }
    estimates = estimates or {}
    lines = []
    for k, name in names.items():
        text = (
            format_estimate(estimates[k])
            if k in estimates
            else format_threshold_value(marks.get(k))
        )
        lines.append(f"{name:<56} {text}")
    for d, v in sorted(per_d.items()):
        nn, gd = (format_estimate(v[k]) for k in ("delta_nn", "delta_gd"))
        lines.append(f"  d = {d}: delta_NN {nn}, delta_GD {gd}")
    return "\n".join(lines)


def format_threshold_value(value) -> str:
    """A threshold for the terminal: a number, or why there is none."""
    if value is None:
        return "not determined"
    return "not determined" if value != value else f"{value:.3g}"


def format_estimate(est) -> str:
    """A simulated threshold (an ``as_dict`` of an estimate) with its interval, or its reason.

    Parameters
    ----------
    est : dict
        ``delta``, ``interval`` (ends may be ``None``: open) and ``reason``.

    Returns
    -------
    str
    """
    if est.get("delta") is None:
        return f"not determined: {est.get('reason') or 'no estimate'}"
    ends = est.get("interval")
    if ends is None:
        return f"{est['delta']:.3g} (no interval: {est.get('interval_reason', '')})"
    lo, hi = ("open" if e is None else f"{e:.3g}" for e in ends)
    return f"{est['delta']:.3g} [{lo}, {hi}]"


#: search range of the trained-point thresholds when ``--delta`` gives a single value
TRAINED_BRACKET = (1.0, 8.0)


def cmd_threshold_trained(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt threshold --point trained``: simulated ``delta_NN`` and ``delta_GD``.

    ``delta_NN`` is where the seed mean of the order parameter at ``W1`` crosses its level and
    ``delta_GD`` where the seed majority learns, both by bisection over ``config.seeds`` at
    ``config.d`` and each of ``config.sizes`` (:func:`rmt.trained_thresholds`, docs/theory.md
    section 7.4), next to ``delta_pop`` and ``delta_alg``.  The range is ``[min, max]`` of
    ``--delta`` when it gives two or more values, else :data:`TRAINED_BRACKET`.

    Parameters
    ----------
    config : RunConfig
        The configuration.
    out : path
        Output folder (``threshold.json``, ``threshold_runs.csv``, manifest).
    progress, quiet : bool
        Progress bars; no progress lines.

    Returns
    -------
    dict
        The summary written to ``threshold.json``: each threshold a number or ``None`` with
        its reason, with its interval and, for ``delta_NN``, the level and the stated error
        rates.
    """
    lo, hi = (min(config.deltas), max(config.deltas)) if len(config.deltas) > 1 else TRAINED_BRACKET
    out = _prepare_out(out)
    t0 = time.perf_counter()
    say = None if quiet else _say
    by_d = trained_thresholds_by_size(config, lo, hi, progress=say)
    per_d = {d: res.as_dict() for d, res in by_d.items()}
    runs = [row for res in by_d.values() for row in res.runs]
    ref = reference_thresholds(config)
    dmft = None if config.no_dmft else _dmft_threshold(config, say)
    summary = {"config": config.to_dict(), **_trained_summary(per_d[config.d])}
    summary.update(
        delta_pop=ref.delta_pop,
        delta_alg=ref.delta_alg,
        population_reason=ref.reason,
        delta_nn_dmft=dmft,
        per_d={str(d): v for d, v in per_d.items()},
        wall_time_s=time.perf_counter() - t0,
    )
    write_json(out / "threshold.json", summary)
    write_table(out / "threshold_runs.csv", runs, LEARN_COLUMNS)
    files = ["threshold.json", "threshold_runs.csv"]
    marks = {k: summary[k] for k in ("delta_nn", "delta_gd", "delta_pop", "delta_alg")}
    _say(format_learn_summary(marks, per_d, per_d[config.d]))
    nn = per_d[config.d]["delta_nn"]
    _say(
        f"  delta_NN: the seed mean of the Theta* overlap of the bottom eigenvector at W1 "
        f"crosses {nn['level']:.3g} (null reaches it with probability <= {nn['fwer']:g}; "
        f"interval at level {nn['alpha']:g})"
    )
    if dmft is not None:
        _say(format_dmft_threshold(dmft, config.d))
    if config.table:
        table = trained_threshold_table(config, lo, hi, progress=say)
        write_table(out / "threshold_table.csv", table, TRAINED_TABLE_COLUMNS)
        files.append("threshold_table.csv")
        summary["table"] = table
        _say(format_trained_table(table))
    write_manifest(
        out, "threshold", config, config.seeds, {"wall_time_s": time.perf_counter() - t0}, files
    )
    _wrote("threshold", f"{len(runs)} runs", [*files, "manifest.json"], out)
    return summary


def _trained_summary(main) -> dict:
    """The simulated thresholds of one ``d`` as the flat keys of ``threshold.json``."""
    nn, gd = main["delta_nn"], main["delta_gd"]
    return {
        "delta_nn": nn["delta"],
        "delta_nn_interval": nn["interval"],
        "delta_nn_reason": nn["reason"] or nn["interval_reason"],
        "delta_nn_level": nn["level"],
        "delta_nn_fwer": nn["fwer"],
        "delta_nn_interval_alpha": nn["alpha"],
        "delta_gd": gd["delta"],
        "delta_gd_interval": gd["interval"],
        "delta_gd_reason": gd["reason"],
    }


def _dmft_record(h) -> dict:
    """A :class:`rmt.DMFTHessian` as plain numbers for the JSON files."""
    return {
        "delta": h.delta,
        "t1": h.t1,
        "theta_outlier": h.theta_outlier,
        "theta_overlap": h.theta_overlap,
        "edge_lo": h.edge_lo,
        "edge_hi": h.edge_hi,
        "bottom": h.bottom,
        "negative": h.negative,
        "converged": h.converged,
        "message": h.message,
    }


def _learn_dmft(config: RunConfig, rows, quiet) -> dict:
    """``{delta: DMFTHessian}`` at the deltas of the learning-curve figure (``rmt learn
    --dmft``): one DMFT solve each, tens of seconds."""
    out = {}
    for x in learning_curve_deltas(rows):
        _stage(quiet, f"DMFT of the first phase at delta = {x:g} ({config.dmft_steps} steps)")
        kwargs = config.dmft_hessian_options()
        out[x] = dmft_hessian(config.model(), config.net(), x, stop_at_plateau=True, **kwargs)
    return out


#: the least delta of the DMFT search of ``rmt threshold``
DMFT_MIN_DELTA = 0.5


def dmft_size(d) -> str:
    """How the DMFT's values name their size: ``"d = 4000"`` at a finite input dimension
    (``--dmft-d``), ``"d -> inf"`` for the limit (``d`` 0 or None)."""
    return f"d = {d}" if d else "d -> inf"


def _dmft_threshold(config: RunConfig, say) -> dict:
    """``delta_NN`` of the DMFT (:func:`rmt.dmft_delta_nn`) in ``[DMFT_MIN_DELTA,
    config.max_delta]``, as a dict."""

    def report(ev):
        if say:
            state = (
                f"plateau at step {ev.t1}, learning margin {ev.margin:+.4f} "
                f"(standard error {ev.margin_se:.4f})"
                if ev.converged
                else ev.message
            )
            say(f"  DMFT at delta = {ev.delta:.4g}: {state}")

    lo, hi = DMFT_MIN_DELTA, config.max_delta
    size = dmft_size(config.dmft_d)
    if say:
        say(
            f"rmt: delta_NN of the DMFT ({size}): the root in delta in [{lo:g}, {hi:g}] of "
            f"the learning margin at the plateau, {config.dmft_replicas} replicas of "
            f"{config.dmft_samples} draws (more at the root until its standard error is at "
            f"most {100 * STDERR_RTOL:g}% of it) ..."
        )
    res = dmft_delta_nn(
        config.model(), config.net(), lo, hi, progress=report,
        replicas=config.dmft_replicas, d=config.dmft_d or None, **config.dmft_options(),
    )  # fmt: skip
    return {
        "d": config.dmft_d or None,
        "delta": res.value if res.converged else None,
        "stderr": res.stderr if res.converged else None,
        "bracket": [res.lo, res.hi],
        "converged": res.converged,
        "no_transition": res.no_transition,
        "message": res.message,
        "law_shift": _finite_or_none(res.law_shift),
        "law_shift_se": _finite_or_none(res.law_shift_se),
        "replicas": res.replicas,
        "n_samples": res.n_samples,
        "evaluations": [_evaluation_record(ev) for ev in res.evaluations.values()],
        "pilot_evaluations": [_evaluation_record(ev) for ev in res.pilot_evaluations.values()],
    }


def _finite_or_none(x):
    """``float(x)``, or None for NaN (a number that was not computed)."""
    return float(x) if np.isfinite(x) else None


def _evaluation_record(ev) -> dict:
    """A :class:`rmt.DMFTEvaluation` as plain numbers for the JSON files (None where it
    failed)."""
    ok = ev.converged
    return {
        "delta": ev.delta,
        "t1": ev.t1,
        "margin": ev.margin if ok else None,
        "margin_se": ev.margin_se if ok else None,
        "margins": [float(g) for g in ev.margins] if ok else None,
        "law_shifts": [_finite_or_none(g) for g in ev.law_shifts]
        if ok and ev.law_shifts is not None
        else None,
        "converged": ok,
        "message": ev.message,
    }


def format_dmft_threshold(dmft: dict, d=None) -> str:
    """One line: the DMFT ``delta_NN`` with its standard error, or why it failed; a limit
    refused by the law check names the flag for the value at a size (at ``d``, the size of
    the simulation beside it, when given)."""
    size = dmft_size(dmft.get("d"))
    if dmft.get("no_transition"):
        return f"delta_NN (DMFT, {size}): none: {dmft['message']}"
    if not dmft["converged"]:
        hint = ""
        if dmft.get("law_shift") is not None and not dmft.get("d"):
            hint = f" (on the command line: --dmft-d {d or 'D'})"
        return f"delta_NN (DMFT, {size}): not determined: {dmft['message']}{hint}"
    return (
        f"delta_NN (DMFT, {size}) = {dmft['delta']:.3f} ± {dmft['stderr']:.3f} "
        f"(Monte Carlo standard error; {dmft['replicas']} replicas of {dmft['n_samples']} draws)"
    )


def format_trained_table(rows) -> str:
    """The trained-point thresholds of a table, with their intervals, for the terminal."""
    head = f"{'configuration':<40} {'delta_NN [interval]':>22} {'delta_GD [interval]':>22} "
    lines = [head + f"{'delta_pop':>9} {'delta_alg':>9}"]
    for r in rows:
        label = f"{r['target']}, {r['activation']}/{r['loss']}, m={r['width']}, d={r['d']}"
        cells = []
        for k in ("delta_nn", "delta_gd"):
            lo, hi = ("open" if r[e] is None else f"{r[e]:.3g}" for e in (k + "_lo", k + "_hi"))
            cells.append(f"{format_threshold_value(r[k])} [{lo}, {hi}]")
        pop = format_threshold_value(r["delta_pop"])
        lines.append(f"{label:<40} {cells[0]:>22} {cells[1]:>22} {pop:>9} {r['delta_alg']:>9.3g}")
    return "\n".join(lines)


def cmd_phase_diagram(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt phase-diagram``: the asymptotic ``delta_NN`` over a grid of settings.

    Parameters
    ----------
    config : RunConfig
        The shared settings; ``config.grid`` the axes (:func:`rmt.experiments.phase_diagram.
        parse_grid`; default widths 1-4, softplus, tanh and relu, Huber and square loss).
    out : path
        Output folder: ``phase_diagram.csv`` (resumable), the figures, ``phase_diagram.json``
        and the manifest.
    progress, quiet : bool
        Progress bar over the cells; no stage lines.

    Returns
    -------
    dict
        The summary written to ``phase_diagram.json``: the grid and every cell.
    """
    grid = parse_grid(config.grid)
    grid_cells(config, grid)  # every cell a valid configuration, before any work
    out = _prepare_out(out)
    t0 = time.perf_counter()
    cells = int(np.prod([len(v) for v in grid.values()]))
    _stage(quiet, f"delta_NN of the DMFT in {cells} cells ({', '.join(grid)}); resumable")
    res = phase_diagram(config, grid, out, progress=progress)
    fixed = ", ".join(f"{a} {getattr(config, a)}" for a in AXES if a not in grid)
    size = dmft_size(config.dmft_d)
    title = f"delta_NN of the DMFT ({size}) at {fixed}"
    figs = phase_diagram_figures(res.rows, grid, title, size)
    for name, fig in figs.items():
        save_figure_atomic(fig, out / name)
    summary = {
        "config": config.to_dict("phase-diagram"),
        "grid": {k: list(v) for k, v in grid.items()},
        "cells": res.rows,
    }
    write_json(out / "phase_diagram.json", summary)
    files = ["phase_diagram.csv", "phase_diagram.json", *figs]
    write_manifest(
        out, "phase-diagram", config, config.seeds[:1],
        {"wall_time_s": time.perf_counter() - t0}, files, grid=summary["grid"],
    )  # fmt: skip
    _say(format_phase_table(res.rows, grid, size if config.dmft_d else ""))
    _wrote("phase-diagram", f"{cells} cells", [*files, "manifest.json"], out)
    return summary


#: the deltas of the delay-curve figure of ``rmt grokking`` (spread over those measured)
CURVE_COUNT = 3


def cmd_grokking(config: RunConfig, out, progress=None, quiet=False) -> dict:
    """``rmt grokking``: the plateau length of gradient descent against the plateau-length law
    (docs/theory.md section 7.7), at ``config.d`` and each of ``config.sizes``.

    Parameters
    ----------
    config : RunConfig
        The settings: ``deltas``, ``seeds``, the dimensions ``d`` and ``sizes``, the step budget
        ``train_steps``, ``stop_after_escape``, the DMFT's ``dmft_steps`` and ``dmft_samples``,
        and ``delta_nn_mark`` (a ``delta_NN`` to mark on the plateau-length figure).
    out : path
        Output folder: ``grokking_runs.csv`` (resumable), ``grokking_summary.csv``,
        ``grokking.json``, ``plateau_length.png``, ``delay_curves.png`` and the manifest.
    progress, quiet : bool
        Progress bar over the runs; no stage lines.

    Returns
    -------
    dict
        The summary written to ``grokking.json``: the configuration, the summary next to the
        prediction per ``(d, delta)``, and the number of runs.
    """
    sizes = (config.d, *config.sizes)
    config = grokking_config(config, config.deltas, config.seeds, sizes, config.stop_after_escape)
    sizes = (config.d, *config.sizes)  # sorted, without repeats
    out = _prepare_out(out)
    t0 = time.perf_counter()
    runs = len(sizes) * len(config.deltas) * len(config.seeds)
    dims = ", ".join(map(str, sizes))
    _stage(quiet, f"{runs} runs of gradient descent at d = {dims}, then the law; resumable")
    res = grokking(
        config, config.deltas, config.seeds, sizes, out,
        stop_after_escape=config.stop_after_escape, progress=progress,
    )  # fmt: skip
    picked = learning_curve_deltas(res.summary, count=CURVE_COUNT)
    shown = ", ".join(f"{x:g}" for x in picked)
    _stage(quiet, f"train and test loss at delta = {shown}, d = {config.d}, seed {config.seeds[0]}")
    curves = delay_curves(config, picked, seed=config.seeds[0])
    title = f"{config.target}, {config.activation}/{config.loss}, m = {config.width}, "
    title += f"lr {config.lr:g}: the plateau of gradient descent"
    budget = float(config.train_steps)
    mark = _delta_nn_mark(config.delta_nn_mark)
    figs = grokking_figures(res.summary, res.predictions, curves, mark, budget, title)
    for name, fig in figs.items():
        save_figure_atomic(fig, out / name)
    summary = {
        "config": config.to_dict("grokking"),
        "summary": res.summary,
        "runs": len(res.runs),
        "censored": sum(bool(r["censored"]) for r in res.runs),
    }
    write_json(out / "grokking.json", summary)
    files = [RUNS_FILE, SUMMARY_FILE, "grokking.json", *figs]
    write_manifest(
        out, "grokking", config, config.seeds, {"wall_time_s": time.perf_counter() - t0}, files,
        status="complete",
    )  # fmt: skip
    _say(format_grokking_table(res.summary))
    _wrote("grokking", f"{len(res.runs)} runs", [*files, "manifest.json"], out)
    return summary


def _delta_nn_mark(mark):
    """The ``delta_NN`` mark of the plateau-length figure: ``None``, a number, or, with its
    standard error, a band of two standard errors."""
    if not mark:
        return None
    if len(mark) == 1 or mark[1] == 0:
        return mark[0]
    value, se = mark
    return {"delta": value, "interval": [value - 2 * se, value + 2 * se]}
