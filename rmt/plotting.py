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
    "delta_nn": ("#d35400", "-."),
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
    """Vertical lines at ``delta_alg``, ``delta_bbp`` and ``delta_nn`` (those that are finite)."""
    for name, value in thresholds.items():
        if value is None or not np.isfinite(value) or name not in MARKS:
            continue
        color, style = MARKS[name]
        ax.axvline(value, color=color, ls=style, lw=1.2, label=f"{name} = {value:.3g}")
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
    """Bars of ``delta_NN / delta_alg`` per configuration; infinite ones are labelled as such.

    ``entries`` is a list of dicts with ``label``, ``delta_nn``, ``delta_alg`` and ``reason``.
    """
    labels = [e["label"] for e in entries]
    ratios = [e["delta_nn"] / e["delta_alg"] for e in entries]
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
    ax.set_xlabel(r"$\delta_{NN} / \delta_{alg}$")
    ax.invert_yaxis()  # first entry on top
    return ax


def _short_reason(reason: str) -> str:
    """A few words for a chart label, from a ``delta_nn`` reason."""
    for key, short in (
        ("unbounded", "curvature unbounded below"),
        ("positive semidefinite", "no negative curvature"),
        ("no label information", "curvature carries no label information"),
        ("failed", "solver failure"),
    ):
        if key in reason:
            return short
    return "none in the searched range"


def plot_training(ax_loss, ax_overlap, curves, predicted_escape=None, phase_end=None):
    """Loss and overlap with ``Theta*`` against steps, with the phase end and escape marked."""
    steps = np.arange(len(curves["loss"]))
    ax_loss.semilogy(steps, curves["loss"], color=SIM_COLOR, lw=1.2)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("training loss")
    ax_overlap.plot(steps, curves["overlap"], color=SIM_COLOR, lw=1.2, label="measured")
    ax_overlap.set_xlabel("step")
    ax_overlap.set_ylabel(r"squared overlap with $\Theta^*$")
    for ax in (ax_loss, ax_overlap):
        if phase_end is not None:
            ax.axvline(phase_end, color="0.5", ls="--", lw=1, label="end of first phase")
        if predicted_escape is not None and np.isfinite(predicted_escape):
            ax.axvline(
                predicted_escape, color=THEORY_COLOR, ls="-.", lw=1.2, label="predicted escape"
            )
    ax_overlap.legend(fontsize=7)
    return ax_loss, ax_overlap


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
    """The chart of ``delta_NN / delta_alg`` for the rows of a threshold table."""
    from .output import variant_label

    entries = [
        {
            "label": variant_label(r),
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
    return fig


def training_figure(curves, predicted_escape=None, phase_end=None, title=""):
    """Loss and overlap against steps (:func:`plot_training`) side by side."""
    fig, axes = new_figure(1, 2, width=5.0, height=3.4)
    plot_training(axes[0][0], axes[0][1], curves, predicted_escape, phase_end)
    fig.suptitle(title, fontsize=9)
    return fig
