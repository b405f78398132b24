"""What each ``rmt`` command does: call an experiment, then write its tables, figures and JSON.

Every command takes a validated :class:`rmt.RunConfig` (the only carrier of its options) and an
output folder, and returns a JSON-able summary.  The science is in :mod:`rmt.experiments`;
files are written by :mod:`rmt.output`, each one complete or not at all (the resumable sweep
table excepted).
"""

from __future__ import annotations

import pathlib
import time
from dataclasses import replace

from .config import RunConfig
from .output import (
    columns_table,
    format_sweep_table,
    format_threshold_table,
    save_figure_atomic,
    write_json,
    write_manifest,
    write_table,
)

#: most panels of ``rmt spectrum`` (one per delta)
MAX_PANELS = 6


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


def cmd_spectrum(config: RunConfig, out, progress=True) -> dict:
    """``rmt spectrum``: full spectra at each ``delta`` (first seed) against the theory."""
    from .experiments import spectrum_panels
    from .plotting import spectra_figure

    if len(config.deltas) > MAX_PANELS:
        raise ValueError(
            f"rmt spectrum draws one panel per delta: give at most {MAX_PANELS}; "
            f"got {len(config.deltas)}"
        )
    t0 = time.perf_counter()
    panels = spectrum_panels(config)
    elapsed = time.perf_counter() - t0
    out = _prepare_out(out)
    rows = [
        {"delta": p["delta"], "index": i, "eigenvalue": float(v)}
        for p in panels
        for i, v in enumerate(p["eigenvalues"])
    ]
    write_table(out / "spectrum.csv", rows, ["delta", "index", "eigenvalue"])
    save_figure_atomic(spectra_figure(panels, config_label(config)), out / "spectra_vs_delta.png")
    summary = {"config": config.to_dict(), "panels": [_panel_summary(p) for p in panels]}
    write_json(out / "spectrum.json", summary)
    files = ["spectrum.csv", "spectra_vs_delta.png", "spectrum.json"]
    write_manifest(out, "spectrum", config, config.seeds[:1], {"wall_time_s": elapsed}, files)
    return summary


def cmd_threshold(config: RunConfig, out, progress=True) -> dict:
    """``rmt threshold``: ``delta_NN``, ``delta_BBP`` and ``delta_alg`` of the configuration;
    with ``config.table`` also over the variants of :data:`rmt.experiments.TABLE_CONFIGS`."""
    from .experiments import TABLE_COLUMNS, threshold_summary, threshold_table
    from .plotting import threshold_figure

    summary, res = threshold_summary(config)
    timings = {"wall_time_s": summary["wall_time_s"]}
    table = None
    if config.table:
        t0 = time.perf_counter()
        table = threshold_table(config, progress=progress)
        timings["table_s"] = time.perf_counter() - t0
    out = _prepare_out(out)
    write_json(out / "threshold.json", summary)
    files = ["threshold.json"]
    print(
        f"delta_NN = {res.delta_nn:.4g}   delta_BBP = {res.delta_bbp:.4g}   "
        f"delta_alg = {res.delta_alg:.4g}" + (f"   ({res.reason})" if res.reason else "")
    )
    if table is not None:
        write_table(out / "threshold_table.csv", table, TABLE_COLUMNS)
        fig = threshold_figure(table, f"{config.point} point")
        save_figure_atomic(fig, out / "threshold_table.png")
        files += ["threshold_table.csv", "threshold_table.png"]
        print(format_threshold_table(table))
        summary["table"] = table
    write_manifest(out, "threshold", config, (), timings, files)
    return summary


def cmd_sweep(config: RunConfig, out, progress=True) -> dict:
    """``rmt sweep``: theory against simulation on the grid of ``delta`` and seeds (resumable)."""
    from .experiments import prepare_point, run_sweep, sweep_theory
    from .plotting import spectra_figure, sweep_figure

    out = _prepare_out(out)
    point = prepare_point(config)
    rows = run_sweep(config, out=out, progress=progress, point=point)
    theory = sweep_theory(config, point)
    if theory.curve is not None:
        write_table(out / "theory_curve.csv", columns_table(theory.curve), list(theory.curve))
    fig = sweep_figure(rows, theory.curve, theory.thresholds, config_label(config))
    save_figure_atomic(fig, out / "outliers_vs_delta.png")
    if theory.panels:
        fig = spectra_figure(theory.panels, config_label(config))
        save_figure_atomic(fig, out / "spectra_vs_delta.png")
    print(format_sweep_table(rows))
    bottom = [r for r in rows if r["index"] == 0]
    errs = [abs(r["eigenvalue"] - r["theory_bottom"]) for r in bottom]
    return {
        "config": config.to_dict(),
        "points": len(bottom),
        "thresholds": theory.thresholds,
        "max_abs_error_bottom": max(errs) if errs else None,
        "max_abs_plugin_error": max(abs(r["plugin_error"]) for r in bottom) if bottom else None,
        "files": sorted(p.name for p in out.iterdir()),
    }


def cmd_train(config: RunConfig, out, progress=True) -> dict:
    """``rmt train``: the first phase of gradient descent, then the escape from the plateau."""
    from .experiments import training_run
    from .plotting import training_figure

    t0 = time.perf_counter()
    run = training_run(config, progress=progress)
    elapsed = time.perf_counter() - t0
    res = run.result
    out = _prepare_out(out)
    write_table(out / "training.csv", columns_table(run.curves), list(run.curves))
    label = config_label(replace(config, point="trained"))  # trained from a small start
    title = f"gradient descent, {label}, delta = {config.deltas[0]:g}"
    fig = training_figure(run.curves, run.predicted_step, res.phase_end_step, title)
    save_figure_atomic(fig, out / "training.png")
    summary = {
        "config": config.to_dict(),
        "phase_end_step": res.phase_end_step,
        "phase_detected": res.phase_detected,
        "lambda_min_at_phase_end": run.lambda_min,
        "escaped": res.escaped,
        "escape_step": res.escape_step,
        "escape_time": res.escape_time,
        "predicted_escape_time": None if run.predicted is None else run.predicted.time,
    }
    write_json(out / "train.json", summary)
    files = ["training.csv", "training.png", "train.json"]
    write_manifest(out, "train", config, config.seeds[:1], {"wall_time_s": elapsed}, files)
    return summary
