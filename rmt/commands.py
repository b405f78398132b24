"""What each ``rmt`` command does: call the API, then write tidy files and figures to ``out``.

Every function takes a validated :class:`rmt.config.RunConfig` and an output folder, and returns
a JSON-able summary.  Files other than the resumable sweep table are written only once their
content is complete (temporary name, then rename).
"""

from __future__ import annotations

import os
import pathlib
import time
from dataclasses import replace

import numpy as np

from .config import RunConfig
from .tables import ResumableCSV, write_json

DENSE_LIMIT = 4000  # largest m*d whose full spectrum we compute by dense eigh


def _atomic_png(fig, path):
    from .plotting import save_figure

    tmp = path.with_name(path.stem + ".tmp.png")
    save_figure(fig, tmp)
    os.replace(tmp, path)


def _write_rows(path, rows, columns):
    """Write a complete table atomically (for non-resumable outputs)."""
    tmp = path.with_name(path.name + ".part")
    if tmp.exists():
        tmp.unlink()
    ResumableCSV(tmp, columns, key=(columns[0],)).append(rows)
    os.replace(tmp, path)


def population_law(config: RunConfig, spec=None):
    """The Gaussian law of ``(zhat, D)`` at the configured data-independent point."""
    from .experiments import prepare_point
    from .freeprob import SpikeLaw

    model, net = config.model(), config.net()
    if config.point == "zero":
        Q, M = np.zeros((net.width, net.width)), np.zeros((net.width, model.k))
    else:
        spec = spec if spec is not None else prepare_point(config)
        Q, M = spec.Q, spec.M
    return SpikeLaw.from_network(model, net, Q, M)


def theory_curve(law, deltas) -> dict:
    """Edges, bottom outlier and its ``Theta*`` overlap on a grid of ``delta`` (nan if none)."""
    from .experiments import theory_at

    cols = {k: [] for k in ("delta", "edge_lo", "edge_hi", "outlier", "overlap_theta")}
    for x in deltas:
        try:
            th = theory_at(law, float(x), 1)
        except Exception:  # a failed solve leaves a gap in the curve, never a made-up value
            th = {"edge_lo": np.nan, "edge_hi": np.nan, "outliers": [], "overlaps": []}
        cols["delta"].append(float(x))
        cols["edge_lo"].append(th["edge_lo"])
        cols["edge_hi"].append(th["edge_hi"])
        cols["outlier"].append(th["outliers"][0] if th["outliers"] else np.nan)
        cols["overlap_theta"].append(th["overlaps"][0] if th["overlaps"] else np.nan)
    return {k: np.asarray(v) for k, v in cols.items()}


#: grid points of the predicted density in a spectrum panel
DENSITY_POINTS = 400


def spectrum_panel(config: RunConfig, delta: float, seed: int, spec=None, law=None):
    """Full empirical spectrum at one ``delta`` with the predicted density, edges and outliers."""
    from scipy.linalg import eigh

    from .experiments import point_weights, theory_at
    from .freeprob import bulk_density
    from .hessian import Hessian

    rng = config.rng_for(delta, seed)
    data = config.model().sample(config.n_of(delta), config.d, rng=rng)
    W = point_weights(config, data, spec, rng)
    H = Hessian(config.net(), data, W, weight_decay=config.weight_decay)
    if H.shape[0] > DENSE_LIMIT:
        raise ValueError(
            f"m*d = {H.shape[0]} is too large for a full spectrum (limit {DENSE_LIMIT}); lower --d"
        )
    evals = eigh(H.to_dense(), eigvals_only=True)
    panel = {"delta": delta, "eigenvalues": evals}
    if law is not None:
        th = theory_at(law, delta, 3)
        x = np.linspace(evals[0], evals[-1], DENSITY_POINTS)
        # the density at the plot's resolution: Cauchy-smoothed over two grid steps.  A
        # quadrature law is a sum of atoms of D; where the bulk comes from nearly singular D
        # (next to the atom at 0 when delta is small) its density at eta -> 0 is a comb of
        # narrow bumps, one per node, instead of the smooth density of the continuous law.
        eta = 2.0 * (x[1] - x[0])
        panel.update(
            density=(x, bulk_density(law, delta, x, eta=eta).density),
            eta=eta,
            edges=(th["edge_lo"], th["edge_hi"]),
            outliers=th["outliers"],
        )
    return panel


def spectra_figure(panels, path, title=""):
    from .plotting import new_figure, plot_spectrum

    fig, axes = new_figure(1, len(panels), width=3.6, height=3.0)
    for ax, p in zip(axes[0], panels):
        plot_spectrum(
            ax,
            p["eigenvalues"],
            density=p.get("density"),
            edges=p.get("edges"),
            outliers=p.get("outliers"),
            sim_outliers=p["eigenvalues"][:2],
            title=rf"$\delta$ = {p['delta']:g}",
            density_label="predicted density (η = 2 grid steps)",
        )
    axes[0][-1].legend(fontsize=6, loc="upper right")  # the last panel: no atom note there
    if title:
        fig.suptitle(title, fontsize=10)
    _atomic_png(fig, path)


def config_label(config: RunConfig) -> str:
    return (
        f"{config.target}, {config.activation}/{config.loss}, m = {config.width}, "
        f"{config.point} point, d = {config.d}"
    )


def _prepare_out(out) -> pathlib.Path:
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def cmd_spectrum(config: RunConfig, out, args=None) -> dict:
    """``rmt spectrum``: full spectra at each ``delta`` (first seed) against the theory."""
    from .experiments import prepare_point

    if len(config.deltas) > 6:
        raise ValueError(
            f"rmt spectrum draws one panel per delta: give at most 6; got {len(config.deltas)}"
        )
    if config.width * config.d > DENSE_LIMIT:
        raise ValueError(
            f"m*d = {config.width * config.d} exceeds the dense limit {DENSE_LIMIT}; lower --d"
        )
    spec = prepare_point(config)
    law = population_law(config, spec) if config.point != "trained" else None
    panels = [spectrum_panel(config, x, config.seeds[0], spec, law) for x in config.deltas]
    out = _prepare_out(out)
    rows = [
        {"delta": p["delta"], "index": i, "eigenvalue": float(v)}
        for p in panels
        for i, v in enumerate(p["eigenvalues"])
    ]
    _write_rows(out / "spectrum.csv", rows, ["delta", "index", "eigenvalue"])
    spectra_figure(panels, out / "spectra_vs_delta.png", config_label(config))
    summary = {
        "config": config.to_dict(),
        "panels": [
            {
                "delta": p["delta"],
                "bottom": [float(v) for v in p["eigenvalues"][:3]],
                "edges": p.get("edges"),
                "outliers": p.get("outliers"),
            }
            for p in panels
        ],
    }
    write_json(out / "spectrum.json", summary)
    return summary


def cmd_threshold(config: RunConfig, out, args=None) -> dict:
    """``rmt threshold``: ``delta_NN``, ``delta_BBP`` and ``delta_alg`` of the configuration."""
    from .thresholds import delta_nn

    if config.point == "trained":
        raise ValueError("rmt threshold needs a data-independent point: population or zero")
    max_delta = getattr(args, "max_delta", 64.0)
    t0 = time.perf_counter()
    res = delta_nn(config.model(), config.net(), point=config.point, delta_range=(0.05, max_delta))
    summary = {
        "config": config.to_dict(),
        **res.as_dict(),
        "bracket": list(res.bracket),
        "notes": res.notes,
        "wall_time_s": time.perf_counter() - t0,
    }
    table = threshold_table(config) if getattr(args, "table", False) else None
    out = _prepare_out(out)
    write_json(out / "threshold.json", summary)
    print(
        f"delta_NN = {res.delta_nn:.4g}   delta_BBP = {res.delta_bbp:.4g}   "
        f"delta_alg = {res.delta_alg:.4g}" + (f"   ({res.reason})" if res.reason else "")
    )
    if table is not None:
        _write_rows(out / "threshold_table.csv", table, TABLE_COLUMNS)
        threshold_figure(table, out / "threshold_table.png", f"{config.point} point")
        print(format_threshold_table(table))
        summary["table"] = table
    return summary


def sweep_figures(config: RunConfig, rows, out: pathlib.Path, spec=None, n_spectra=4) -> dict:
    """Outlier and overlap curves against ``delta``, and spectra for a row of ``delta``."""
    from .plotting import new_figure, plot_outlier_location, plot_overlap
    from .thresholds import delta_nn

    law = population_law(config, spec) if config.point != "trained" else None
    lo, hi = min(config.deltas), max(config.deltas)
    curve = theory_curve(law, np.geomspace(lo, hi, 40)) if law is not None else None
    thr = {}
    if config.point != "trained":
        res = delta_nn(config.model(), config.net(), point=spec if spec else config.point)
        thr = {"delta_alg": res.delta_alg, "delta_bbp": res.delta_bbp, "delta_nn": res.delta_nn}
    if curve is not None:
        _write_rows(
            out / "theory_curve.csv",
            [dict(zip(curve, vals)) for vals in zip(*curve.values())],
            list(curve),
        )
    fig, axes = new_figure(1, 2, width=5.0, height=3.6)
    plot_outlier_location(axes[0][0], rows, curve, thr)
    plot_overlap(axes[0][1], rows, curve, thr)
    fig.suptitle(config_label(config), fontsize=10)
    _atomic_png(fig, out / "outliers_vs_delta.png")
    if config.width * config.d <= DENSE_LIMIT:
        idx = np.unique(np.linspace(0, len(config.deltas) - 1, n_spectra).round().astype(int))
        panels = [spectrum_panel(config, config.deltas[i], config.seeds[0], spec, law) for i in idx]
        spectra_figure(panels, out / "spectra_vs_delta.png", config_label(config))
    return {k: float(v) for k, v in thr.items()}


def cmd_sweep(config: RunConfig, out, args=None) -> dict:
    """``rmt sweep``: theory against simulation on the grid of ``delta`` and seeds."""
    from .experiments import prepare_point, run_sweep

    out = _prepare_out(out)
    spec = prepare_point(config)
    rows = run_sweep(config, out=out, scheduler=getattr(args, "scheduler", None), spec=spec)
    thresholds = sweep_figures(config, rows, out, spec)
    print(format_sweep_table(rows))
    bottom = [r for r in rows if r["index"] == 0]
    errs = [abs(r["eigenvalue"] - r["theory_bottom"]) for r in bottom]
    summary = {
        "config": config.to_dict(),
        "points": len(bottom),
        "thresholds": thresholds,
        "max_abs_error_bottom": max(errs) if errs else None,
        "max_abs_plugin_error": max(abs(r["plugin_error"]) for r in bottom) if bottom else None,
        "files": sorted(p.name for p in out.iterdir()),
    }
    return summary


def cmd_train(config: RunConfig, out, args=None) -> dict:
    """``rmt train``: the first phase of gradient descent, then the escape from the plateau."""
    from .eigen import extreme_eigs
    from .experiments import train_point
    from .hessian import Hessian
    from .plotting import new_figure, plot_training
    from .points import predicted_escape_time

    delta, seed = config.deltas[0], config.seeds[0]
    rng = config.rng_for(delta, seed)
    data = config.model().sample(config.n_of(delta), config.d, rng=rng)
    net = config.net()
    res = train_point(config, data, rng, getattr(args, "continue_steps", 0), progress=True)
    H = Hessian(net, data, res.W, weight_decay=config.weight_decay)
    lam = float(extreme_eigs(H, k=1, which="smallest", rng=rng).values[0])
    pred = predicted_escape_time(lam, data.d, res.lr) if lam < 0 else None
    pred_step = (
        None if pred is None or res.phase_end_step is None else (res.phase_end_step + pred.steps)
    )
    out = _prepare_out(out)
    curves = {
        "step": np.arange(len(res.loss)),
        "loss": res.loss,
        "grad_norm": res.grad_norm,
        "overlap": res.overlap,
    }
    _write_rows(
        out / "training.csv", [dict(zip(curves, v)) for v in zip(*curves.values())], list(curves)
    )
    fig, axes = new_figure(1, 2, width=5.0, height=3.4)
    plot_training(axes[0][0], axes[0][1], curves, pred_step, res.phase_end_step)
    label = config_label(replace(config, point="trained"))  # trained from a small start
    fig.suptitle(f"gradient descent, {label}, delta = {delta:g}", fontsize=9)
    _atomic_png(fig, out / "training.png")
    summary = {
        "config": config.to_dict(),
        "phase_end_step": res.phase_end_step,
        "phase_detected": res.phase_detected,
        "lambda_min_at_phase_end": lam,
        "escaped": res.escaped,
        "escape_step": res.escape_step,
        "escape_time": res.escape_time,
        "predicted_escape_time": None if pred is None else pred.time,
    }
    write_json(out / "train.json", summary)
    return summary


TABLE_CONFIGS = [
    dict(activation="softplus", loss="huber", width=2),
    dict(activation="softplus", loss="huber", width=1),
    dict(activation="softplus", loss="huber", width=3),
    dict(activation="softplus", loss="huber", width=2, noise=0.3),
    dict(target="abs", activation="softplus", loss="huber", width=2),
    dict(target="sign_z1z2", activation="softplus", loss="logistic", width=2),
    dict(activation="erf", loss="huber", width=2),
    dict(activation="tanh", loss="huber", width=2),
    dict(activation="softplus", loss="square", width=2),
    dict(activation="tanh", loss="square", width=2),
]


def threshold_table(base: RunConfig, variants=TABLE_CONFIGS, progress=True) -> list[dict]:
    """``delta_NN``, ``delta_BBP`` and ``delta_alg`` over activations, losses and widths."""
    from tqdm.auto import tqdm

    from .thresholds import delta_nn

    rows = []
    for v in tqdm(variants, desc="delta_NN table", disable=not progress):
        cfg = replace(base, **v)
        t0 = time.perf_counter()
        row = {
            "target": cfg.target,
            "noise": cfg.noise,
            "activation": cfg.activation,
            "loss": cfg.loss,
            "width": cfg.width,
            "point": cfg.point,
        }
        try:
            res = delta_nn(cfg.model(), cfg.net(), point=cfg.point)
        except RuntimeError as exc:  # one failed configuration is reported, not fatal
            row.update(
                delta_nn=np.nan,
                delta_bbp=np.nan,
                delta_alg=np.nan,
                ratio=None,
                reason=f"solver failure: {exc}",
                converged=False,
            )
        else:
            row.update(
                delta_nn=float(res.delta_nn),
                delta_bbp=float(res.delta_bbp),
                delta_alg=float(res.delta_alg),
                ratio=float(res.delta_nn / res.delta_alg) if res.delta_alg else None,
                reason=res.reason,
                converged=bool(res.converged),
            )
        rows.append({**row, "seconds": time.perf_counter() - t0})
    return rows


TABLE_COLUMNS = [
    "target",
    "noise",
    "activation",
    "loss",
    "width",
    "point",
    "delta_nn",
    "delta_bbp",
    "delta_alg",
    "ratio",
    "reason",
    "converged",
    "seconds",
]


def _table_label(r) -> str:
    noise = f"+{r['noise']:g}N" if r["noise"] else ""
    return f"{r['target']}{noise}, {r['activation']}/{r['loss']}, m={r['width']}"


def format_threshold_table(rows) -> str:
    """A plain-text table for the terminal; the reasons for infinite values are footnotes."""
    width = max(len(_table_label(r)) for r in rows)
    head = (
        f"{'configuration':<{width}} {'delta_NN':>9} {'delta_BBP':>9} {'delta_alg':>9} "
        f"{'NN/alg':>7}"
    )
    lines, notes = [head, "-" * len(head)], []
    for r in rows:
        ratio = f"{r['ratio']:.3g}" if r["ratio"] is not None else "-"
        mark = ""
        if r["reason"]:
            notes.append(r["reason"])
            mark = f" [{len(notes)}]"
        lines.append(
            f"{_table_label(r):<{width}} {r['delta_nn']:>9.4g} {r['delta_bbp']:>9.4g} "
            f"{r['delta_alg']:>9.4g} {ratio:>7}{mark}"
        )
    lines += [f"[{i}] {text}" for i, text in enumerate(notes, 1)]
    return "\n".join(lines)


def threshold_figure(rows, path, title=""):
    from .plotting import new_figure, plot_threshold_chart

    entries = [
        {
            "label": _table_label(r),
            "delta_nn": r["delta_nn"],
            "delta_alg": r["delta_alg"],
            "reason": r["reason"],
        }
        for r in rows
    ]
    fig, axes = new_figure(1, 1, width=6.5, height=0.45 * len(rows) + 1.2)
    plot_threshold_chart(axes[0][0], entries)
    if title:
        axes[0][0].set_title(title, fontsize=10)
    _atomic_png(fig, path)


def format_sweep_table(rows) -> str:
    """Bottom eigenvalue and overlap per ``delta`` (mean over seeds) next to the predictions."""
    from .plotting import summarize_by_delta

    dl, ev, ev_sd = summarize_by_delta(rows, "eigenvalue")
    _, ov, ov_sd = summarize_by_delta(rows, "overlap_theta")
    _, th, _ = summarize_by_delta(rows, "theory_bottom")
    _, edge, _ = summarize_by_delta(rows, "theory_edge_lo")
    pred_ov = {}
    for r in rows:
        if r["index"] == 0:
            v = r["theory_overlap_theta"]
            pred_ov[r["delta"]] = np.nan if v is None or r["theory_outlier"] is None else v
    head = (
        f"{'delta':>7} {'bottom (sim)':>17} {'predicted':>10} {'edge':>9} "
        f"{'overlap (sim)':>15} {'predicted':>9}"
    )
    lines = [head, "-" * len(head)]
    for i, x in enumerate(dl):
        lines.append(
            f"{x:>7.3g} {ev[i]:>9.4f} ± {ev_sd[i]:.4f} {th[i]:>10.4f} {edge[i]:>9.4f} "
            f"{ov[i]:>7.3f} ± {ov_sd[i]:.3f} {pred_ov.get(x, np.nan):>9.3f}"
        )
    return "\n".join(lines)
