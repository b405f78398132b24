"""Figures. Each ``plot_*`` function takes a matplotlib Axes (or a row of them) and returns it;
each ``*_figure`` function builds a whole figure of the command line from the data an
experiment returned, and returns the figure (save it with :func:`save_figure` or
:func:`rmt.output.save_figure_atomic`).

Matplotlib is imported lazily, inside :func:`new_figure`, which builds figures without pyplot;
the drawing functions only call methods of the Axes they are given.
"""

from __future__ import annotations

import math

import numpy as np

THEORY_COLOR = "#c0392b"
SIM_COLOR = "#2c3e50"
MARKS = {
    "delta_alg": ("#27ae60", ":"),
    "delta_bbp": ("#8e44ad", "--"),
    "delta_pop": ("#d35400", "-."),
    "delta_nn": ("#2980b9", "-"),
    "delta_gd": ("#7f8c8d", (0, (5, 2, 1, 2))),
}
#: legend names of the threshold marks
MARK_LABELS = {
    "delta_alg": r"$\delta_{alg}$ (spectral methods)",
    "delta_bbp": r"$\delta_{BBP}$ (population point)",
    "delta_pop": r"$\delta_{pop}$ (population point)",
    "delta_nn": r"$\delta_{NN}$ (Hessian at $W_1$, simulated)",
    "delta_gd": r"$\delta_{GD}$ (GD learns, simulated)",
}


def new_figure(nrows=1, ncols=1, width=5.0, height=3.6, **kwargs):
    """A figure with a grid of Axes, built without pyplot (no backend is switched, so this is
    safe inside notebooks); save it with :func:`save_figure`."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def save_figure(fig, path) -> None:
    """Save as PNG at a readable resolution."""
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def plot_spectrum(
    ax,
    eigenvalues,
    density=None,
    edges=None,
    outliers=None,
    sim_outliers=None,
    title=None,
    atom_tol=1e-9,
    density_label="predicted density",
):
    """Histogram of ``eigenvalues`` with the predicted density, edges and outliers on top.

    ``density`` is ``(x, rho)`` for the continuous part, drawn with the legend label
    ``density_label``; ``edges`` is ``(lo, hi)``;
    ``outliers`` are predicted values (red triangles) and ``sim_outliers`` empirical extreme
    eigenvalues (dark crosses).  Eigenvalues within ``atom_tol * max|lambda|`` of 0 form the
    atom: they are left out of the histogram (which keeps the normalisation of the whole
    spectrum, like ``rho``) and their fraction is written on the plot.
    """
    ev = np.asarray(eigenvalues, dtype=float)
    at_zero = np.abs(ev) <= atom_tol * np.max(np.abs(ev))
    rest = ev[~at_zero]
    bins = np.histogram_bin_edges(rest, bins=max(20, int(math.sqrt(rest.size))))
    ax.hist(
        rest,
        bins=bins,
        weights=np.full(rest.size, 1.0 / (ev.size * np.diff(bins)[0])),
        color="0.75",
        edgecolor="none",
        label="empirical",
    )
    if at_zero.any():
        ax.text(
            0.02,
            0.95,
            f"atom at 0: {at_zero.mean():.1%} of eigenvalues",
            transform=ax.transAxes,
            fontsize=7,
            va="top",
        )
    if density is not None:
        ax.plot(density[0], density[1], color=THEORY_COLOR, lw=1.4, label=density_label)
    for e in edges if edges is not None else ():
        if np.isfinite(e):
            ax.axvline(e, color=THEORY_COLOR, lw=0.8, ls="--")
    ymax = ax.get_ylim()[1]
    if outliers is not None and len(outliers):
        ax.plot(
            outliers,
            np.full(len(outliers), 0.08 * ymax),
            "v",
            color=THEORY_COLOR,
            ms=8,
            label="predicted outlier",
        )
    if sim_outliers is not None and len(sim_outliers):
        ax.plot(
            sim_outliers,
            np.full(len(sim_outliers), 0.03 * ymax),
            "x",
            color=SIM_COLOR,
            ms=7,
            label="empirical extremes",
        )
    ax.set_xlabel("eigenvalue")
    ax.set_ylabel("density")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def mark_thresholds(ax, thresholds: dict):
    """Vertical lines at ``delta_alg``, ``delta_bbp`` and ``delta_pop`` (those that are finite)."""
    for name, value in thresholds.items():
        if value is None or not np.isfinite(value) or name not in MARKS:
            continue
        color, style = MARKS[name]
        label = f"{MARK_LABELS.get(name, name)} = {value:.3g}"
        ax.axvline(value, color=color, ls=style, lw=1.2, label=label)
    return ax


def summarize_by_delta(rows, column, index=0):
    """Mean and standard deviation across seeds of ``column`` at eigen-index ``index``."""
    table = {}
    for r in rows:
        if r.get("index", 0) == index and r.get(column) is not None:
            table.setdefault(r["delta"], []).append(float(r[column]))
    deltas = np.array(sorted(table))
    mean = np.array([np.mean(table[x]) for x in deltas])
    std = np.array([np.std(table[x]) if len(table[x]) > 1 else 0.0 for x in deltas])
    return deltas, mean, std


def plot_outlier_location(ax, rows, theory_curve=None, thresholds=None):
    """Bottom eigenvalue against ``delta``: simulation (mean +- sd over seeds), theory, edge."""
    dl, mean, std = summarize_by_delta(rows, "eigenvalue")
    ax.errorbar(
        dl,
        mean,
        yerr=std,
        fmt="o",
        color=SIM_COLOR,
        ms=4,
        capsize=3,
        label="simulation: bottom eigenvalue",
    )
    if theory_curve is not None:
        x = theory_curve["delta"]
        ax.plot(x, theory_curve["edge_lo"], color="0.4", lw=1.2, label="predicted bulk edge")
        ax.plot(x, theory_curve["outlier"], color=THEORY_COLOR, lw=1.6, label="predicted outlier")
    ax.axhline(0.0, color="0.8", lw=0.8)
    mark_thresholds(ax, thresholds or {})
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel("smallest eigenvalue")
    ax.legend(fontsize=7)
    return ax


def plot_overlap(ax, rows, theory_curve=None, thresholds=None):
    """Squared overlap of the bottom eigenvector with ``Theta*`` against ``delta``."""
    dl, mean, std = summarize_by_delta(rows, "overlap_theta")
    ax.errorbar(dl, mean, yerr=std, fmt="o", color=SIM_COLOR, ms=4, capsize=3, label="simulation")
    if theory_curve is not None:
        ax.plot(
            theory_curve["delta"],
            theory_curve["overlap_theta"],
            color=THEORY_COLOR,
            lw=1.6,
            label="prediction",
        )
    mark_thresholds(ax, thresholds or {})
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel(r"squared overlap with $\Theta^*$")
    ax.legend(fontsize=7)
    return ax


def plot_threshold_chart(ax, entries):
    """Bars of ``delta_pop / delta_alg`` per configuration; infinite ones are labelled as such.

    ``entries`` is a list of dicts with ``label``, ``delta_pop``, ``delta_alg`` and ``reason``.
    """
    labels = [e["label"] for e in entries]
    ratios = [e["delta_pop"] / e["delta_alg"] for e in entries]
    finite = [r for r in ratios if np.isfinite(r)]
    cap = 1.15 * max(finite) if finite else 2.0
    heights = [r if np.isfinite(r) else cap for r in ratios]
    colors = [SIM_COLOR if np.isfinite(r) else "0.8" for r in ratios]
    y = np.arange(len(entries))
    ax.barh(y, heights, color=colors)
    for yi, r, e in zip(y, ratios, entries):
        text = f"{r:.2f}" if np.isfinite(r) else f"no transition: {_short_reason(e['reason'])}"
        ax.text(
            0.02 * cap,
            yi,
            text,
            va="center",
            fontsize=7,
            color="white" if np.isfinite(r) else "black",
        )
    ax.axvline(1.0, color=MARKS["delta_alg"][0], ls=":", lw=1.2)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel(r"$\delta_{pop} / \delta_{alg}$ (population point)")
    ax.invert_yaxis()  # first entry on top
    return ax


def _short_reason(reason: str) -> str:
    """A few words for a chart label, from a ``delta_pop`` reason."""
    for key, short in (
        ("unbounded", "curvature unbounded below"),
        ("positive semidefinite", "no negative curvature"),
        ("no label information", "curvature carries no label information"),
        ("failed", "solver failure"),
    ):
        if key in reason:
            return short
    return "none in the searched range"


def plot_training(axes, curves, predicted_escape=None, plateau=None, escape=None):
    """Train and test loss, gradient norm and ``Theta*`` overlap against steps, on three axes,
    with the plateau (end of the first phase), the escape and the predicted escape marked."""
    ax_loss, ax_grad, ax_overlap = axes
    steps = np.asarray(curves["step"])
    ax_loss.semilogy(steps, curves["train_loss"], color=SIM_COLOR, lw=1.2, label="train")
    if np.any(np.isfinite(curves["test_loss"])):
        ax_loss.semilogy(steps, curves["test_loss"], color="#e67e22", lw=1.2, label="test")
    ax_loss.set_ylabel("loss")
    ax_grad.semilogy(steps, curves["grad_norm"], color=SIM_COLOR, lw=1.2)
    ax_grad.set_ylabel("gradient norm")
    ax_overlap.plot(steps, curves["overlap"], color=SIM_COLOR, lw=1.2)
    ax_overlap.set_ylabel(r"overlap with $\Theta^*$")
    ax_overlap.set_ylim(-0.02, 1.02)
    marks = [
        (plateau, "0.45", "--", "plateau (end of first phase)"),
        (escape, "#27ae60", ":", "escape (overlap 0.5)"),
        (predicted_escape, THEORY_COLOR, "-.", "predicted escape"),
    ]
    for ax in axes:
        ax.set_xlabel("step")
        for value, color, style, label in marks:
            if value is not None and np.isfinite(value):
                ax.axvline(value, color=color, ls=style, lw=1.2, label=label)
    ax_loss.legend(fontsize=7, loc="best")
    handles = [h for h in ax_overlap.get_lines()[1:]]
    if handles:
        ax_overlap.legend(handles=handles, fontsize=7, loc="center right")
    return axes


# ---------------------------------------------------------------------------------------------
# whole figures of the command line
# ---------------------------------------------------------------------------------------------
def spectra_figure(panels, title=""):
    """One histogram per spectrum panel (:func:`rmt.experiments.spectrum_panel`), in a row."""
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
    return fig


def sweep_figure(rows, curve=None, thresholds=None, title=""):
    """Bottom eigenvalue and overlap against ``delta``: sweep rows next to the prediction."""
    fig, axes = new_figure(1, 2, width=5.0, height=3.6)
    plot_outlier_location(axes[0][0], rows, curve, thresholds)
    plot_overlap(axes[0][1], rows, curve, thresholds)
    fig.suptitle(title, fontsize=10)
    return fig


def threshold_figure(rows, title=""):
    """The chart of ``delta_pop / delta_alg`` for the rows of a threshold table."""
    from .output import variant_label

    entries = [
        {
            "label": variant_label(r),
            "delta_pop": r["delta_pop"],
            "delta_alg": r["delta_alg"],
            "reason": r["reason"],
        }
        for r in rows
    ]
    fig, axes = new_figure(1, 1, width=6.5, height=0.45 * len(rows) + 1.2)
    plot_threshold_chart(axes[0][0], entries)
    if title:
        axes[0][0].set_title(title, fontsize=10)
    return fig


def training_figure(curves, predicted_escape=None, plateau=None, escape=None, title=""):
    """Loss, gradient norm and overlap against steps (:func:`plot_training`) side by side."""
    fig, axes = new_figure(1, 3, width=4.0, height=3.2)
    plot_training(axes[0], curves, predicted_escape, plateau, escape)
    fig.suptitle(title, fontsize=9)
    return fig


def _log_delta_axis(ax):
    """A log-scaled ``delta`` axis with plain numbers as tick labels."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    lo, hi = ax.get_xlim()
    ax.set_xticks([t for t in (0.25, 0.5, 1, 2, 3, 4, 6, 8, 12, 16, 32) if lo <= t <= hi])
    return ax


def _by_delta(rows, column):
    """``(deltas, mean, std)`` of a per-run ``column`` across seeds (runs with a value)."""
    table = {}
    for r in rows:
        if r.get(column) is not None:
            table.setdefault(float(r["delta"]), []).append(float(r[column]))
    x = np.array(sorted(table))
    return x, np.array([np.mean(table[v]) for v in x]), np.array([np.std(table[v]) for v in x])


def plot_learning_transition(ax, rows_by_d, thresholds):
    """Final overlap with ``Theta*`` against ``delta``, one curve per ``d``, thresholds marked."""
    shades = np.linspace(0.75, 0.15, max(len(rows_by_d), 1))
    for shade, (d, rows) in zip(shades, sorted(rows_by_d.items())):
        x, mean, std = _by_delta(rows, "final_overlap")
        ax.errorbar(
            x,
            mean,
            yerr=std,
            marker="o",
            ms=3,
            lw=1.2,
            capsize=2,
            color=str(shade),
            label=f"GD, d = {d}",
        )
    mark_thresholds(ax, thresholds)
    _log_delta_axis(ax)
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel(r"final overlap with $\Theta^*$")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=6, loc="upper left")
    return ax


def plot_learning_curves(ax_loss, ax_overlap, curves, deltas, seed=0):
    """Test loss and overlap against steps for a few ``delta`` (one seed): the plateau and its
    growth as ``delta`` comes down towards the threshold."""
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    for i, x in enumerate(deltas):
        c = [r for r in curves if r["delta"] == x and r["seed"] == seed]
        if not c:
            continue
        steps = [r["step"] for r in c]
        color = cmap(i / max(len(deltas) - 1, 1))
        ax_loss.semilogy(steps, [r["test_loss"] for r in c], color=color, lw=1.1)
        ax_overlap.plot(
            steps, [r["overlap"] for r in c], color=color, lw=1.1, label=rf"$\delta$ = {x:g}"
        )
    ax_loss.set_ylabel("test loss")
    ax_overlap.set_ylabel(r"overlap with $\Theta^*$")
    for ax in (ax_loss, ax_overlap):
        ax.set_xlabel("step")
    ax_overlap.set_ylim(-0.02, 1.02)
    ax_overlap.legend(fontsize=6, loc="lower right")
    return ax_loss, ax_overlap


def plot_hessian_at_plateau(ax_value, ax_overlap, rows, thresholds):
    """Bottom eigenvalue of the Hessian at ``W1`` and its ``Theta*`` overlap against ``delta``,
    with the cavity-corrected plug-in prediction beside them."""
    x, mean, std = _by_delta(rows, "bottom_eigenvalue")
    ax_value.errorbar(
        x,
        mean,
        yerr=std,
        marker="o",
        ms=3,
        lw=0,
        elinewidth=1,
        color=SIM_COLOR,
        label="measured (Lanczos)",
    )
    xp, bp, _ = _by_delta(rows, "plugin_bottom")
    ax_value.plot(xp, bp, "s", ms=4, mfc="none", color=THEORY_COLOR, label="plug-in prediction")
    xe, ee, _ = _by_delta(rows, "plugin_edge_lo")
    ax_value.plot(xe, ee, "-", lw=1, color=THEORY_COLOR, alpha=0.6, label="plug-in bulk edge")
    ax_value.axhline(0.0, color="0.7", lw=0.8)
    x2, ov, ov_sd = _by_delta(rows, "bottom_overlap")
    ax_overlap.errorbar(
        x2, ov, yerr=ov_sd, marker="o", ms=3, lw=0, elinewidth=1, color=SIM_COLOR, label="measured"
    )
    xq, oq, _ = _by_delta(rows, "plugin_overlap")
    ax_overlap.plot(xq, oq, "s", ms=4, mfc="none", color=THEORY_COLOR, label="plug-in outlier")
    for ax in (ax_value, ax_overlap):
        mark_thresholds(ax, {k: v for k, v in thresholds.items() if k in ("delta_nn",)})
        _log_delta_axis(ax)
        ax.set_xlabel(r"$\delta$")
    ax_value.set_ylabel(r"bottom eigenvalue of $H(W_1)$")
    ax_overlap.set_ylabel(r"its overlap with $\Theta^*$")
    ax_value.legend(fontsize=6, loc="best")
    ax_overlap.legend(fontsize=6, loc="upper left")
    return ax_value, ax_overlap


def plot_escape_times(ax, rows):
    """Measured steps from the plateau to the escape against the linearised prediction."""
    pts = [
        (r["predicted_escape_steps"], r["escape_steps"], r["delta"])
        for r in rows
        if r.get("predicted_escape_steps") is not None and r.get("escape_steps") is not None
    ]
    if pts:
        p, m, x = (np.array(v, dtype=float) for v in zip(*pts))
        sc = ax.scatter(p, m, c=np.log(x), cmap="viridis", s=14)
        top = max(p.max(), m.max()) * 1.1
        ax.plot([0, top], [0, top], color="0.6", lw=1, label="measured = predicted")
        ax.figure.colorbar(sc, ax=ax, label=r"$\log \delta$")
        ax.legend(fontsize=6, loc="upper left")
    else:
        ax.text(
            0.5,
            0.5,
            "no run with both an escape\nand a prediction",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=8,
        )
    ax.set_xlabel("predicted escape (steps after plateau)")
    ax.set_ylabel("measured escape (steps after plateau)")
    return ax


def learn_figures(rows_by_d, curves, thresholds, title=""):
    """The figures of ``rmt learn``: transition, learning curves, Hessian at W1, escape times."""
    d0 = sorted(rows_by_d)[0]
    rows = rows_by_d[d0]
    fig1, ax = new_figure(1, 1, width=5.5, height=3.8)
    plot_learning_transition(ax[0][0], rows_by_d, thresholds)
    fig1.suptitle(title, fontsize=9)
    deltas = sorted({float(r["delta"]) for r in rows})
    pick = [deltas[i] for i in np.unique(np.linspace(0, len(deltas) - 1, 5).round().astype(int))]
    fig2, ax2 = new_figure(1, 2, width=4.5, height=3.4)
    plot_learning_curves(ax2[0][0], ax2[0][1], curves, pick)
    fig2.suptitle(f"learning curves, d = {d0}, seed 0 — {title}", fontsize=9)
    fig3, ax3 = new_figure(1, 3, width=4.0, height=3.4)
    plot_hessian_at_plateau(ax3[0][0], ax3[0][1], rows, thresholds)
    plot_escape_times(ax3[0][2], rows)
    fig3.suptitle(f"Hessian at the plateau W1, d = {d0} — {title}", fontsize=9)
    return {
        "learning_transition.png": fig1,
        "learning_curves.png": fig2,
        "hessian_at_plateau.png": fig3,
    }
