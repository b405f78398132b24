"""Figures. Each ``plot_*`` function takes a matplotlib Axes (or a row of them) and returns it;
each ``*_figure`` function builds a whole figure of the command line from the data an
experiment returned, and returns the figure (save it with :func:`save_figure` or
:func:`rmt.app.plotting.save_figure_atomic`).

Matplotlib is imported lazily, inside :func:`new_figure`, which builds figures without pyplot;
the drawing functions only call methods of the Axes they are given.

Layout: a figure's legend sits in one place, outside every Axes (below them), so that it covers
no data; the ``plot_*`` functions put theirs outside their Axes too, or leave it to the figure
(``legend=False``).  Titles are wrapped to the width of the figure, so they are never clipped.
"""

from __future__ import annotations

import math
import os
import pathlib
import textwrap

import numpy as np

from rmt.app.report import summarize_by_delta, variant_label

THEORY_COLOR = "#c0392b"
SIM_COLOR = "#2c3e50"
MARKS = {
    "delta_alg": ("#27ae60", ":"),
    "delta_bbp": ("#8e44ad", "--"),
    "delta_pop": ("#d35400", "-."),
    "delta_nn": ("#2980b9", "-"),
    "delta_nn_dmft": ("#2980b9", "--"),
    "delta_gd": ("#7f8c8d", (0, (5, 2, 1, 2))),
}
#: symbols and notes of the threshold marks; their legend names are ``symbol (note)``
MARK_SYMBOLS = {
    "delta_alg": r"$\delta_{alg}$",
    "delta_bbp": r"$\delta_{BBP}$",
    "delta_pop": r"$\delta_{pop}$",
    "delta_nn": r"$\delta_{NN}$",
    "delta_nn_dmft": r"$\delta_{NN}$",
    "delta_gd": r"$\delta_{GD}$",
}
MARK_NOTES = {
    "delta_alg": "spectral methods",
    "delta_bbp": "population point",
    "delta_pop": "population point",
    "delta_nn": r"Hessian at $W_1$, simulated",
    "delta_nn_dmft": r"DMFT, $d \to \infty$",
    "delta_gd": "GD learns, simulated",
}
#: legend names of the threshold marks
MARK_LABELS = {k: f"{MARK_SYMBOLS[k]} ({MARK_NOTES[k]})" for k in MARK_SYMBOLS}
#: marks whose values agree to this relative tolerance are drawn as one line
COINCIDE_RTOL = 1e-9


def new_figure(nrows=1, ncols=1, width=5.0, height=3.6, **kwargs):
    """A figure with a grid of Axes, built without pyplot (no backend is switched, so this is
    safe inside notebooks); save it with :func:`save_figure`."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def save_figure(fig, path) -> None:
    """Save as PNG at a readable resolution (a figure without a layout engine is tightened)."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=130)


def save_figure_atomic(fig, path) -> None:
    """Save ``fig`` as a PNG (:func:`rmt.app.plotting.save_figure`) under a temporary name, then
    move it to ``path``."""
    path = pathlib.Path(path)
    tmp = path.with_name(path.stem + ".tmp.png")
    save_figure(fig, tmp)
    os.replace(tmp, path)


def set_title(fig, title, fontsize=10) -> None:
    """The figure's title, wrapped at spaces to the width of the figure (never clipped)."""
    if not title:
        return
    width_pt = 72.0 * fig.get_figwidth()
    chars = max(20, int(0.92 * width_pt / (0.62 * fontsize)))  # a generous average glyph width
    fig.suptitle(textwrap.fill(str(title), chars, break_on_hyphens=False), fontsize=fontsize)


def figure_legend(fig, axes, fontsize=7, ncols=None):
    """One legend for the whole figure, below all its Axes (constrained layout keeps room for
    it), with each label once, in the order of first appearance; returns it (None if empty)."""
    handles, labels = [], []
    for ax in np.ravel(axes):
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if not handles:
        return None
    if ncols is None:
        per_col = max(1, int(fig.get_figwidth() / 2.6))  # about 2.6 inches a column
        ncols = min(len(handles), per_col)
    return fig.legend(
        handles, labels, loc="outside lower center", ncols=ncols, fontsize=fontsize, frameon=False
    )


def _axes_legend(ax, fontsize=7):
    """A legend of one Axes, outside it on the right (it covers none of the Axes' data)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)


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
    legend=True,
):
    """Histogram of ``eigenvalues`` with the predicted density, edges and outliers on top.

    ``density`` is ``(x, rho)`` for the continuous part, drawn with the legend label
    ``density_label`` and only inside the predicted support ``edges = (lo, hi)`` (a smoothed
    density has tails past the edges that the law has not); ``outliers`` are predicted values
    (red triangles above the axis) and ``sim_outliers`` empirical extreme eigenvalues, drawn as
    a rug of dark ticks in a strip below the histogram's baseline, where no bar hides them.
    Eigenvalues within ``atom_tol * max|lambda|`` of 0 form the atom: they are left out of the
    histogram (which keeps the normalisation of the whole spectrum, like ``rho``) and their
    fraction is written on the plot.  With ``legend`` the legend is drawn outside the Axes;
    figures pass False and draw one for all panels.
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
    lo, hi = (-np.inf, np.inf) if edges is None else (float(edges[0]), float(edges[1]))
    lo, hi = (lo if np.isfinite(lo) else -np.inf), (hi if np.isfinite(hi) else np.inf)
    if density is not None:
        x, rho = (np.asarray(v, dtype=float) for v in density)
        inside = (x >= lo) & (x <= hi)
        ax.plot(x[inside], rho[inside], color=THEORY_COLOR, lw=1.4, label=density_label)
    for i, e in enumerate(e for e in (lo, hi) if np.isfinite(e)):
        label = "predicted bulk edges" if i == 0 else None
        ax.axvline(e, color=THEORY_COLOR, lw=0.8, ls="--", label=label)
    ymax = ax.get_ylim()[1]
    if outliers is not None and len(outliers):
        ax.plot(
            outliers,
            np.full(len(outliers), 0.1 * ymax),
            "v",
            color=THEORY_COLOR,
            ms=8,
            label="predicted outlier",
        )
    if sim_outliers is not None and len(sim_outliers):
        ax.plot(
            sim_outliers,
            np.full(len(sim_outliers), -RUG_DEPTH / 2 * ymax),
            "|",
            color=SIM_COLOR,
            ms=9,
            mew=1.6,
            label="empirical extremes",
        )
        ax.axhline(0.0, color="0.55", lw=0.6)  # the baseline above the rug
        ax.set_ylim(-RUG_DEPTH * ymax, ymax)
        ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= ymax])  # no negative density
    ax.set_xlabel("eigenvalue")
    ax.set_ylabel("density")
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        _axes_legend(ax)
    return ax


#: depth of the rug of empirical extremes below a histogram, a fraction of its height
RUG_DEPTH = 0.1


def _mark_value(entry):
    """``(value, (lo, hi) or None)`` of a threshold mark: a number, or an estimate's dict
    (``delta``, ``interval`` with ``None`` for an open end, as ``as_dict`` of the estimates)."""
    if isinstance(entry, dict):
        value, ends = entry.get("delta"), entry.get("interval")
    else:
        value, ends = entry, None
    value = None if value is None else float(value)
    return value, (None if ends is None else tuple(ends))


def mark_thresholds(ax, thresholds: dict):
    """Vertical lines at the finite thresholds of ``thresholds`` (``delta_alg``, ``delta_bbp``,
    ``delta_pop``, ``delta_nn``, ``delta_gd``); an estimate given with its interval (a dict,
    see :func:`_mark_value`) is drawn as a shaded band over the interval with the line at its
    value, and its legend entry carries the interval.  Marks at the same value (within
    :data:`COINCIDE_RTOL`, with the same interval) are one line with one legend entry that
    names them all.  On axes that already show data the ``x`` limits stay those of the data:
    a mark outside them says so in its legend entry, and an open end of an interval runs to
    the edge of the axes."""
    had_data = ax.has_data()
    limits = ax.get_xlim()
    for names, value, ends in _mark_groups(thresholds):
        color, style = MARKS[names[0]]
        label = f"{_group_label(names)} = {value:.3g}"
        if ends is not None:
            lo, hi = ends
            label += f" [{'open' if lo is None else f'{lo:.3g}'}, "
            label += f"{'open' if hi is None else f'{hi:.3g}'}]"
            x0, x1 = limits
            ax.axvspan(
                x0 if lo is None else lo, x1 if hi is None else hi, color=color, alpha=0.12, lw=0
            )
        ax.axvline(value, color=color, ls=style, lw=1.2, label=label)
    if had_data:
        ax.set_xlim(limits)
        _note_marks_off_axis(ax)
    return ax


def _coincide(a: float, b: float, rtol: float = COINCIDE_RTOL) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def _mark_groups(thresholds: dict) -> list:
    """``[names, value, ends]`` of the finite known marks, one group per distinct value (and
    interval), in the order of first appearance."""
    groups = []
    for name, entry in thresholds.items():
        value, ends = _mark_value(entry)
        if value is None or not np.isfinite(value) or name not in MARKS:
            continue
        for group in groups:
            if group[2] == ends and _coincide(group[1], value):
                group[0].append(name)
                break
        else:
            groups.append([[name], value, ends])
    return groups


def _group_label(names) -> str:
    """The legend name of marks at one value: ``symbol = symbol (note; note)``."""
    notes = list(dict.fromkeys(MARK_NOTES.get(n, "") for n in names))
    symbols = " = ".join(MARK_SYMBOLS.get(n, n) for n in names)
    notes = "; ".join(n for n in notes if n)
    return f"{symbols} ({notes})" if notes else symbols


def _finite(values) -> np.ndarray:
    """``values`` as floats (``None`` as NaN) and the mask of the finite ones."""
    v = np.array([np.nan if x is None else x for x in np.ravel(values)], dtype=float)
    return v, np.isfinite(v)


def panel_note(ax, text, y=0.95, fontsize=8, width=48):
    """A message written in the Axes (top centre, over a light box): what a panel without its
    curve says instead, so that it never looks empty by mistake."""
    lines = [textwrap.fill(part, width, break_on_hyphens=False) for part in text.split("\n")]
    return ax.text(
        0.5,
        y,
        "\n".join(lines),
        transform=ax.transAxes,
        ha="center",
        va="top",
        fontsize=fontsize,
        style="italic",
        bbox=dict(fc="white", ec="0.8", alpha=0.9, pad=3),
    )


def no_transition_text(what, reason=None, deltas=None) -> str:
    """The text "no transition: ..." with the range of ``delta`` and the reason."""
    text = f"no transition: {what}"
    if deltas is not None and len(deltas):
        text += rf" for $\delta$ in [{np.min(deltas):.3g}, {np.max(deltas):.3g}]"
    reason = " ".join(str(reason or "").split())
    if reason:
        text += "\n" + (reason if len(reason) <= 160 else reason[:157] + "...")
    return text


def _simulated_points(ax, rows, column, label):
    """The seed mean +- sd of ``column`` at each ``delta`` (:func:`summarize_by_delta`)."""
    dl, mean, std = summarize_by_delta(rows, column)
    ax.errorbar(dl, mean, yerr=std, fmt="o", color=SIM_COLOR, ms=4, capsize=3, label=label)


def plot_outlier_location(ax, rows, theory_curve=None, thresholds=None, legend=True, reason=None):
    """Bottom eigenvalue against ``delta``: simulation (mean +- sd over seeds), theory, edge.

    Only the predicted curves that have a finite value are drawn (and listed in the legend);
    where the theory predicts no outlier over the whole range, the panel says "no transition",
    with ``reason`` (why there is none, e.g. ``ThresholdResult.reason``) when it is given."""
    _simulated_points(ax, rows, "eigenvalue", "simulation: bottom eigenvalue")
    if theory_curve is not None:
        x = np.asarray(theory_curve["delta"], dtype=float)
        edge, has_edge = _finite(theory_curve["edge_lo"])
        outlier, has_outlier = _finite(theory_curve["outlier"])
        if has_edge.any():
            ax.plot(x, edge, color="0.4", lw=1.2, label="predicted bulk edge")
        if has_outlier.any():
            ax.plot(x, outlier, color=THEORY_COLOR, lw=1.6, label="predicted outlier")
        else:
            panel_note(ax, no_transition_text("no outlier predicted below the bulk edge", reason))
    ax.axhline(0.0, color="0.8", lw=0.8)
    mark_thresholds(ax, thresholds or {})
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel("smallest eigenvalue")
    if legend:
        _axes_legend(ax)
    return ax


def plot_overlap(ax, rows, theory_curve=None, thresholds=None, legend=True, reason=None):
    """Squared overlap of the bottom eigenvector with ``Theta*`` against ``delta``; without a
    predicted outlier anywhere in the range the panel says "no transition" (with ``reason``)
    instead of drawing an empty prediction."""
    _simulated_points(ax, rows, "overlap_theta", "simulation: overlap of the bottom eigenvector")
    if theory_curve is not None:
        x = np.asarray(theory_curve["delta"], dtype=float)
        overlap, has_overlap = _finite(theory_curve["overlap_theta"])
        if has_overlap.any():
            ax.plot(x, overlap, color=THEORY_COLOR, lw=1.6, label="predicted overlap")
        else:
            what = r"no outlier, so no predicted overlap with $\Theta^*$"
            panel_note(ax, no_transition_text(what, reason, x), y=0.7)
    mark_thresholds(ax, thresholds or {})
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel(r"squared overlap with $\Theta^*$")
    if legend:
        _axes_legend(ax)
    return ax


#: how a row of a threshold table ended: a transition, none, or a failure of the solver
THRESHOLD_STATUSES = ("found", "none", "failed")
FAILED_COLOR = "#c0392b"


def threshold_status(row) -> str:
    """The ``status`` of a threshold-table row; rows without one (older tables) get it from
    their values: a finite ``delta_pop`` is "found", NaN or an unconverged row "failed" and an
    infinite one "none"."""
    status = row.get("status")
    if status is not None:
        if status not in THRESHOLD_STATUSES:
            raise ValueError(f"status must be one of {THRESHOLD_STATUSES}; got {status!r}")
        return status
    value = _as_float(row.get("delta_pop"))
    if np.isfinite(value):
        return "found"
    if np.isnan(value) or row.get("converged") is False:
        return "failed"
    return "none"


def _as_float(value) -> float:
    """A table cell as a float: NaN for an empty cell (``None`` or ``""``)."""
    return np.nan if value is None or value == "" else float(value)


def plot_threshold_chart(ax, entries, legend=True):
    """Bars of ``delta_pop / delta_alg`` for the configurations with a transition; the others
    are written as text in their row, not drawn as bars: "no transition" (with its reason) in
    black, "solver failed" in red.  The line at 1 (``delta_pop = delta_alg``) is in the legend.

    ``entries`` is a list of dicts with ``label``, ``delta_pop``, ``delta_alg``, ``reason`` and
    optionally ``status`` (:func:`threshold_status` derives a missing one).
    """
    y = np.arange(len(entries))
    status = [threshold_status(e) for e in entries]
    ratios = [
        _as_float(e["delta_pop"]) / _as_float(e["delta_alg"]) if st == "found" else np.nan
        for e, st in zip(entries, status)
    ]
    finite = [r for r in ratios if np.isfinite(r)]
    xmax = 1.25 * max(finite + [1.0])
    ax.set_xlim(0.0, xmax)
    bars = [(yi, r) for yi, r in zip(y, ratios) if np.isfinite(r)]
    if bars:
        ax.barh(
            [b[0] for b in bars],
            [b[1] for b in bars],
            color=SIM_COLOR,
            height=0.6,
            label=r"$\delta_{pop} / \delta_{alg}$ (a transition was found)",
        )
    ax.axvline(
        1.0,
        color=MARKS["delta_alg"][0],
        ls=":",
        lw=1.2,
        label=r"ratio 1: $\delta_{pop} = \delta_{alg}$ (as good as spectral methods)",
    )
    for yi, r, e, st in zip(y, ratios, entries, status):
        if np.isfinite(r):
            ax.text(r + 0.01 * xmax, yi, f"{r:.2f}", va="center", fontsize=7)
            continue
        if st == "failed":
            text, color, weight = "solver failed: no result", FAILED_COLOR, "bold"
        elif st == "none":
            text, color, weight = f"no transition: {_short_reason(e['reason'])}", "black", "normal"
        else:  # found, but the ratio is not a number (delta_alg infinite or 0)
            text, color, weight = f"delta_pop = {e['delta_pop']:.3g}, no ratio", "black", "normal"
        ax.text(
            0.01 * xmax,
            yi,
            text,
            va="center",
            fontsize=7,
            color=color,
            weight=weight,
            style="italic",
            bbox=dict(fc="white", ec="none", pad=0.3),
        )
    ax.set_yticks(y)
    ax.set_yticklabels([e["label"] for e in entries], fontsize=7)
    ax.set_ylim(len(entries) - 0.5, -0.5)  # first entry on top
    ax.set_xlabel(r"$\delta_{pop} / \delta_{alg}$ (population point)")
    if legend:
        _axes_legend(ax)
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


#: the gradient-norm panel shows at most this many decades below the largest value
GRAD_NORM_DECADES = 8


def step_axis(ax, last_step):
    """A logarithmic step axis from step 1 to ``last_step``, with plain numbers as tick labels:
    a plateau after tens of steps and an escape after thousands both show (step 0, the
    start, is off a log axis)."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    ax.set_xlim(1.0, max(float(last_step), 10.0))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("step (log scale)")
    return ax


def clip_small_values(ax, values, decades=GRAD_NORM_DECADES):
    """Set the lower ``y`` limit of a log axis ``decades`` below the largest positive value
    when the values reach further down (round-off after convergence would fill the panel);
    the panel's title says so.  Returns the limit, or None when nothing was clipped."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return None
    floor = v.max() * 10.0**-decades
    if v.min() >= floor:
        return None
    ax.set_ylim(bottom=floor, top=v.max() * 2.0)
    note = f"values below {floor:.1e} (1e-{decades} of the largest) not shown"
    ax.set_title(note, fontsize=7, style="italic")  # above the panel: it hides no data
    return floor


def plot_training(axes, curves, predicted_escape=None, plateau=None, escape=None, legend=True):
    """Train and test loss, gradient norm and ``Theta*`` overlap against steps, on three axes,
    with the plateau (end of the first phase), the escape and the predicted escape marked.

    The step axis is logarithmic from step 1 (:func:`step_axis`), so that the first phase
    and the escape both show; the gradient norm is clipped :data:`GRAD_NORM_DECADES` below its largest value
    (:func:`clip_small_values`, which says so in the panel)."""
    ax_loss, ax_grad, ax_overlap = axes
    steps = np.asarray(curves["step"])
    ax_loss.semilogy(steps, curves["train_loss"], color=SIM_COLOR, lw=1.2, label="train")
    if np.any(np.isfinite(curves["test_loss"])):
        ax_loss.semilogy(steps, curves["test_loss"], color="#e67e22", lw=1.2, label="test")
    ax_loss.set_ylabel("loss")
    ax_grad.semilogy(steps, curves["grad_norm"], color=SIM_COLOR, lw=1.2)
    clip_small_values(ax_grad, curves["grad_norm"])
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
        step_axis(ax, steps.max() if steps.size else 1)
        for value, color, style, label in marks:
            if value is not None and np.isfinite(value):
                ax.axvline(value, color=color, ls=style, lw=1.2, label=label)
    if legend:
        _axes_legend(ax_loss)
        _axes_legend(ax_overlap)
    return axes


# ---------------------------------------------------------------------------------------------
# whole figures of the command line
# ---------------------------------------------------------------------------------------------
#: most spectrum panels in a row of :func:`spectra_figure`
PANELS_PER_ROW = 3


def spectra_figure(panels, title=""):
    """One histogram per spectrum panel (:func:`rmt.experiments.spectrum_panel`), on a grid of
    at most :data:`PANELS_PER_ROW` panels a row, the rows filled evenly (four panels: 2 x 2)."""
    nrows = max(1, math.ceil(len(panels) / PANELS_PER_ROW))
    ncols = max(1, math.ceil(len(panels) / nrows))
    fig, axes = new_figure(nrows, ncols, width=4.0 if ncols > 1 else 5.0, height=3.2)
    for ax in axes.flat[len(panels) :]:
        ax.remove()  # an incomplete last row
    for ax, p in zip(axes.flat, panels):
        plot_spectrum(
            ax,
            p["eigenvalues"],
            density=p.get("density"),
            edges=p.get("edges"),
            outliers=p.get("outliers"),
            sim_outliers=p["eigenvalues"][:2],
            title=rf"$\delta$ = {p['delta']:.3g}",
            density_label="predicted density (smoothed to the plot's resolution)",
            legend=False,
        )
    figure_legend(fig, axes.flat[: len(panels)])
    set_title(fig, title, fontsize=10)
    return fig


def sweep_figure(rows, curve=None, thresholds=None, title="", reason=None):
    """Bottom eigenvalue and overlap against ``delta``: sweep rows next to the prediction;
    ``reason`` says why the theory has no transition (written where no outlier is predicted)."""
    fig, axes = new_figure(1, 2, width=5.0, height=3.6)
    plot_outlier_location(axes[0][0], rows, curve, thresholds, legend=False)
    plot_overlap(axes[0][1], rows, curve, thresholds, legend=False, reason=reason)  # once
    figure_legend(fig, axes)
    set_title(fig, title, fontsize=10)
    return fig


def threshold_figure(rows, title=""):
    """The chart of ``delta_pop / delta_alg`` for the rows of a threshold table
    (:func:`plot_threshold_chart`), with the legend and a caption below it."""

    entries = [
        {
            "label": variant_label(r),
            "delta_pop": r["delta_pop"],
            "delta_alg": r["delta_alg"],
            "reason": r["reason"],
            "status": threshold_status(r),
        }
        for r in rows
    ]
    fig, axes = new_figure(1, 1, width=6.5, height=0.45 * len(rows) + 1.9)
    plot_threshold_chart(axes[0][0], entries, legend=False)
    figure_legend(fig, axes, ncols=1)
    if title:
        axes[0][0].set_title(title, fontsize=10)
    return fig


def training_figure(curves, predicted_escape=None, plateau=None, escape=None, title=""):
    """Loss, gradient norm and overlap against steps (:func:`plot_training`) side by side."""
    fig, axes = new_figure(1, 3, width=4.0, height=3.2)
    plot_training(axes[0], curves, predicted_escape, plateau, escape, legend=False)
    figure_legend(fig, axes)
    set_title(fig, title, fontsize=9)
    return fig


def _log_delta_axis(ax):
    """A log-scaled ``delta`` axis with plain numbers as tick labels."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    x0, x1 = ax.dataLim.intervalx
    if not (np.isfinite(x0) and np.isfinite(x1) and x0 > 0):
        return ax  # nothing plotted yet (e.g. no run reached a plateau): keep a linear axis
    if x1 / x0 < 1.5:
        ax.set_xlim(x0 / 1.25, x1 * 1.25)  # one delta: give the log axis some room
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    lo, hi = ax.get_xlim()
    ax.set_xticks([t for t in (0.25, 0.5, 1, 2, 3, 4, 6, 8, 12, 16, 32) if lo <= t <= hi])
    _note_marks_off_axis(ax)
    return ax


def _note_marks_off_axis(ax):
    """Say in its legend entry where a vertical threshold mark lies outside the ``x`` limits
    (it is not drawn there)."""
    lo, hi = sorted(ax.get_xlim())
    for line in ax.lines:
        x = np.asarray(line.get_xdata(), dtype=float)
        label = line.get_label()
        if x.size != 2 or x[0] != x[1] or label.startswith("_") or "axis)" in label:
            continue
        if x[0] < lo or x[0] > hi:
            line.set_label(f"{label} ({'left' if x[0] < lo else 'right'} of the axis)")


def _by_delta(rows, column):
    """``(deltas, mean, std)`` of a per-run ``column`` across seeds (runs with a value)."""
    table = {}
    for r in rows:
        if r.get(column) is not None:
            table.setdefault(float(r["delta"]), []).append(float(r[column]))
    x = np.array(sorted(table))
    return x, np.array([np.mean(table[v]) for v in x]), np.array([np.std(table[v]) for v in x])


def plot_learning_transition(ax, rows_by_d, thresholds, legend=True):
    """Final overlap with ``Theta*`` against ``delta``, one curve per ``d``, thresholds marked."""
    shades = np.linspace(0.75, 0.15, len(rows_by_d)) if len(rows_by_d) > 1 else [0.15]
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
    if legend:
        _axes_legend(ax)
    return ax


def _present(value) -> bool:
    """Whether a table cell holds a finite number (``None``, ``""`` and NaN do not)."""
    if value is None or value == "":
        return False
    try:
        return bool(np.isfinite(float(value)))
    except (TypeError, ValueError):
        return False


def plateau_steps(rows) -> dict:
    """``{(delta, seed): plateau_step}`` of the runs of ``rows`` that reached a plateau."""
    return {
        (float(r["delta"]), int(r["seed"])): float(r["plateau_step"])
        for r in rows
        if _present(r.get("plateau_step"))
    }


PLATEAU_LABEL = "plateau of each run (end of the first phase)"


def plot_learning_curves(
    ax_loss, ax_overlap, curves, deltas, seed=None, legend=True, dmft=None, plateaus=None
):
    """Test loss and overlap against steps for a few ``delta``, every seed a thin line of its
    delta's colour (``seed`` keeps one): the plateau and its growth as ``delta`` comes down
    towards the threshold.  ``plateaus`` (``{(delta, seed): step}``, :func:`plateau_steps`)
    marks each run's plateau on its curves (open black circles).  ``dmft`` (``{delta:
    DMFTHessian}``, from ``rmt learn --dmft``) adds the DMFT curves (dashed, ``d -> inf``) and
    their plateau ``t1`` (a diamond)."""
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    marks = ([], [], [])  # steps, test losses, overlaps at the plateaus
    for i, x in enumerate(deltas):
        color = cmap(i / max(len(deltas) - 1, 1))
        runs = sorted({int(r["seed"]) for r in curves if r["delta"] == x})
        runs = [s for s in runs if seed is None or s == seed]
        for j, s in enumerate(runs):
            c = sorted((r for r in curves if r["delta"] == x and int(r["seed"]) == s),
                       key=lambda r: r["step"])  # fmt: skip
            steps = np.array([r["step"] for r in c], dtype=float)
            loss = np.array([r["test_loss"] for r in c], dtype=float)
            overlap = np.array([r["overlap"] for r in c], dtype=float)
            label = rf"$\delta$ = {x:g}" if j == 0 else None
            ax_loss.semilogy(steps, loss, color=color, lw=0.9, alpha=0.85)
            ax_overlap.plot(steps, overlap, color=color, lw=0.9, alpha=0.85, label=label)
            t = (plateaus or {}).get((float(x), s))
            if t is not None and steps.size and steps[0] <= t <= steps[-1]:
                marks[0].append(t)
                marks[1].append(np.interp(t, steps, loss))
                marks[2].append(np.interp(t, steps, overlap))
        h = (dmft or {}).get(x)
        if h is not None and h.result is not None:
            res = h.result
            ax_loss.semilogy(np.arange(res.steps), res.test_loss, "--", color=color, lw=1.0)
            ax_overlap.plot(np.arange(res.steps), res.overlap, "--", color=color, lw=1.0)
            if h.t1 is not None:
                ax_loss.plot([h.t1], [res.test_loss[h.t1]], "D", ms=4, color=color)
    if marks[0]:
        style = dict(ls="none", marker="o", ms=4.5, mfc="none", mec="black", mew=1.0, zorder=4)
        ax_loss.plot(marks[0], marks[1], label=PLATEAU_LABEL, **style)
        ax_overlap.plot(marks[0], marks[2], label=PLATEAU_LABEL, **style)
    if dmft:
        ax_loss.plot([], [], "--", color="0.4", lw=1.0, label=r"DMFT ($d \to \infty$)")
        ax_loss.plot([], [], "D", ms=4, color="0.4", lw=0, label=r"DMFT plateau $t_1$")
    ax_loss.set_ylabel("test loss")
    ax_overlap.set_ylabel(r"overlap with $\Theta^*$")
    for ax in (ax_loss, ax_overlap):
        ax.set_xlabel("step")
    ax_overlap.set_ylim(-0.02, 1.02)
    if legend:
        _axes_legend(ax_overlap)
    return ax_loss, ax_overlap


def _measured_points(ax, x, mean, std):
    """Per-delta means across seeds with their standard deviations, as unconnected points."""
    ax.errorbar(
        x, mean, yerr=std, marker="o", ms=3, lw=0, elinewidth=1, color=SIM_COLOR,
        label="measured (Lanczos)",
    )  # fmt: skip


def plot_hessian_at_plateau(ax_value, ax_overlap, rows, thresholds, legend=True, dmft=None):
    """Bottom eigenvalue of the Hessian at ``W1`` and its ``Theta*`` overlap against ``delta``,
    with the cavity-corrected plug-in prediction beside them; ``dmft`` (``{delta:
    DMFTHessian}``) adds the DMFT prediction at ``t1`` (bottom, left edge and overlap)."""
    x, mean, std = _by_delta(rows, "bottom_eigenvalue")
    _measured_points(ax_value, x, mean, std)
    xp, bp, _ = _by_delta(rows, "plugin_bottom")
    ax_value.plot(xp, bp, "s", ms=4, mfc="none", color=THEORY_COLOR, label="plug-in prediction")
    xe, ee, _ = _by_delta(rows, "plugin_edge_lo")
    ax_value.plot(xe, ee, "-", lw=1, color=THEORY_COLOR, alpha=0.6, label="plug-in bulk edge")
    ax_value.axhline(0.0, color="0.7", lw=0.8)
    x2, ov, ov_sd = _by_delta(rows, "bottom_overlap")
    _measured_points(ax_overlap, x2, ov, ov_sd)
    xq, oq, _ = _by_delta(rows, "plugin_overlap")
    ax_overlap.plot(xq, oq, "s", ms=4, mfc="none", color=THEORY_COLOR, label="plug-in prediction")
    done = sorted((x, h) for x, h in (dmft or {}).items() if h.converged)
    if done:
        xd = [x for x, _ in done]
        ax_value.plot(xd, [h.bottom for _, h in done], "D", ms=4, color="C3", label="DMFT at $t_1$")
        ax_value.plot(xd, [h.edge_lo for _, h in done], ":", lw=1, color="C3", label="DMFT edge")
        ov = np.nan_to_num([h.theta_overlap for _, h in done])  # no Theta* outlier: 0
        ax_overlap.plot(xd, ov, "D", ms=4, color="C3", label="DMFT at $t_1$")
    for ax in (ax_value, ax_overlap):
        mark_thresholds(ax, {k: v for k, v in thresholds.items() if k in ("delta_nn",)})
        _log_delta_axis(ax)
        ax.set_xlabel(r"$\delta$")
    ax_value.set_ylabel(r"bottom eigenvalue of $H(W_1)$")
    ax_overlap.set_ylabel(r"its overlap with $\Theta^*$")
    if legend:
        _axes_legend(ax_value)
        _axes_legend(ax_overlap)
    return ax_value, ax_overlap


#: fewest escape points (and values of delta) drawn with a colour bar; fewer get a legend
COLORBAR_MIN_POINTS = 3


def plot_escape_times(ax, rows, legend=True):
    """Measured steps from the plateau to the escape against the linearised prediction,
    coloured by ``delta``: a colour bar for :data:`COLORBAR_MIN_POINTS` points or more over
    several ``delta``, otherwise one legend entry per ``delta``.  Without a run that has both,
    the panel says how many runs escaped and how many had a prediction."""
    pts = [
        (float(r["predicted_escape_steps"]), float(r["escape_steps"]), float(r["delta"]))
        for r in rows
        if _present(r.get("predicted_escape_steps")) and _present(r.get("escape_steps"))
    ]
    ax.set_xlabel("predicted steps, plateau to escape")
    ax.set_ylabel("measured steps, plateau to escape")
    if not pts:
        escaped = sum(_present(r.get("escape_steps")) for r in rows)
        predicted = sum(_present(r.get("predicted_escape_steps")) for r in rows)
        panel_note(
            ax,
            "no escape time to compare:\n"
            f"{escaped} of {len(rows)} runs escaped the plateau,\n"
            f"{predicted} of {len(rows)} have a predicted escape",
            y=0.6,
            width=60,
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return ax
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import FuncFormatter

    p, m, x = (np.array(v, dtype=float) for v in zip(*pts))
    top = max(p.max(), m.max()) * 1.1
    ax.plot([0, top], [0, top], color="0.6", lw=1, label="measured = predicted")
    values = np.unique(x)
    if len(pts) >= COLORBAR_MIN_POINTS and len(values) > 1:
        norm = LogNorm(values.min(), values.max())
        sc = ax.scatter(p, m, c=x, cmap="viridis", norm=norm, s=14)
        bar = ax.figure.colorbar(sc, ax=ax, label=r"$\delta$")
        plain = FuncFormatter(lambda v, _: f"{v:.3g}")
        bar.ax.yaxis.set_major_formatter(plain)
        bar.ax.yaxis.set_minor_formatter(plain)
    else:
        cmap = plt.get_cmap("viridis")
        for i, v in enumerate(values):
            sel = x == v
            color = cmap(i / max(len(values) - 1, 1))
            ax.plot(p[sel], m[sel], "o", ms=4.5, color=color, label=rf"escape at $\delta$ = {v:g}")
    if legend:
        _axes_legend(ax)
    return ax


def learning_curve_deltas(rows, count=5) -> list:
    """The (at most ``count``) deltas of the learning-curve figure, spread over the grid."""
    deltas = sorted({float(r["delta"]) for r in rows})
    return [
        deltas[i] for i in np.unique(np.linspace(0, len(deltas) - 1, count).round().astype(int))
    ]


def learn_figures(rows_by_d, curves, thresholds, title="", dmft=None, d=None):
    """The figures of ``rmt learn``: transition, learning curves, Hessian at W1, escape times;
    ``dmft`` (``{delta: DMFTHessian}``) draws the DMFT over the simulated curves.

    ``curves`` and the Hessian panels are of the dimension ``d`` (default: the smallest of
    ``rows_by_d``).  The learning curves show every seed and mark each run's plateau; their
    title says which values of ``delta`` are shown when not all are."""
    d0 = sorted(rows_by_d)[0] if d is None else d
    rows = rows_by_d[d0]
    d_text = "" if f"d = {d0}" in title else f", d = {d0}"
    fig1, ax = new_figure(1, 1, width=5.5, height=4.4)
    plot_learning_transition(ax[0][0], rows_by_d, thresholds, legend=False)
    figure_legend(fig1, ax, ncols=2)
    set_title(fig1, title, fontsize=9)
    pick = learning_curve_deltas(rows)
    every = sorted({float(r["delta"]) for r in rows})
    seeds = sorted({int(r["seed"]) for r in curves if float(r["delta"]) in pick})
    fig2, ax2 = new_figure(1, 2, width=4.5, height=3.4)
    plot_learning_curves(
        ax2[0][0], ax2[0][1], curves, pick, legend=False, dmft=dmft, plateaus=plateau_steps(rows)
    )
    figure_legend(fig2, ax2, ncols=min(len(pick) + 1 + (2 if dmft else 0), 4))
    shown = (
        f"all {len(every)} values of δ"
        if len(pick) == len(every)
        else f"{len(pick)} of the {len(every)} values of δ ({', '.join(f'{x:g}' for x in pick)})"
    )
    runs = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} each"
    label = f" — {title}" if title else ""
    set_title(fig2, f"learning curves at {shown}, {runs}{d_text}{label}", fontsize=9)
    fig3, ax3 = new_figure(1, 3, width=4.0, height=3.4)
    plot_hessian_at_plateau(ax3[0][0], ax3[0][1], rows, thresholds, legend=False, dmft=dmft)
    plot_escape_times(ax3[0][2], rows, legend=False)
    figure_legend(fig3, ax3)
    set_title(fig3, f"Hessian at the plateau W1{d_text}{label}", fontsize=9)
    return {
        "learning_transition.png": fig1,
        "learning_curves.png": fig2,
        "hessian_at_plateau.png": fig3,
    }


#: the short words of a phase-diagram cell without a number
PHASE_WORDS = {"none": "no transition", "not determined": "n.d."}


def _series(rows, x_axis, series_axes):
    """``{label: [(x, row), ...]}``: the rows grouped by the values of ``series_axes``."""
    groups = {}
    for r in rows:
        label = ", ".join(f"{r[a]}" for a in series_axes) or "delta_NN"
        groups.setdefault(label, []).append((r[x_axis], r))
    return {k: sorted(v, key=lambda p: p[0]) for k, v in groups.items()}


def plot_phase_lines(ax, rows, x_axis, series_axes, legend=True, size="d -> inf"):
    """``delta_NN`` (DMFT, with error bars of two standard errors) against ``x_axis``, one line
    per value of ``series_axes``; ``delta_alg`` as a dotted reference line.  A series without a
    transition, or without an answer, is named in the legend with that word, never drawn as a
    number (docs/theory.md section 8.10).  ``size`` names the size of the values on the axis
    (``"d = 4000"`` for :func:`rmt.dmft_delta_nn` at a finite ``d``)."""
    for label, points in _series(rows, x_axis, series_axes).items():
        found = [(x, r) for x, r in points if r["status"] == "found"]
        gaps = {
            f"{PHASE_WORDS[r['status']]} at {x_axis} = {x}"
            for x, r in points
            if x not in dict(found)
        }
        note = f" ({'; '.join(sorted(gaps))})" if gaps else ""
        if found:
            x = [p[0] for p in found]
            y = [float(r["delta_nn"]) for _, r in found]
            err = [2.0 * float(r["stderr"]) for _, r in found]
            ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=3, label=label + note)
        else:
            words = sorted({PHASE_WORDS[r["status"]] for _, r in points})
            ax.plot(
                [], [], ls="none", marker="x", color="0.5", label=f"{label}: {', '.join(words)}"
            )
    algs = sorted({float(r["delta_alg"]) for r in rows if r.get("delta_alg") is not None})
    color, style = MARKS["delta_alg"]
    for i, value in enumerate(algs):
        ax.axhline(value, color=color, ls=style, lw=1.2, label="delta_alg" if i == 0 else None)
    ax.set_xlabel(x_axis)
    ax.set_ylabel(f"delta_NN (DMFT, {size})")
    if x_axis == "width":
        ax.set_xticks(sorted({p for p in (r["width"] for r in rows)}))
    elif x_axis in ("init_scale", "lr", "weight_decay") and min(r[x_axis] for r in rows) > 0:
        ax.set_xscale("log")
    if legend:
        _axes_legend(ax)
    return ax


def plot_phase_heatmap(ax, rows, x_axis, y_axis):
    """A heat map of ``delta_NN`` over two axes of the grid, each cell annotated with its value
    and standard error, or with why it has none (``no transition``, ``n.d.``), never coloured
    as a number then."""
    from matplotlib.colors import Normalize

    xs = list(dict.fromkeys(r[x_axis] for r in rows))
    ys = list(dict.fromkeys(r[y_axis] for r in rows))
    grid = np.full((len(ys), len(xs)), np.nan)
    text = {}
    for r in rows:
        i, j = ys.index(r[y_axis]), xs.index(r[x_axis])
        if r["status"] == "found":
            grid[i, j] = float(r["delta_nn"])
            text[i, j] = f"{float(r['delta_nn']):.3g}\n± {float(r['stderr']):.2g}"
        else:
            text[i, j] = PHASE_WORDS[r["status"]].replace(" ", "\n")
    finite = grid[np.isfinite(grid)]
    norm = Normalize(finite.min(), finite.max()) if finite.size else Normalize(0.0, 1.0)
    masked = np.ma.masked_invalid(grid)
    image = ax.imshow(masked, cmap="viridis", norm=norm, aspect="auto", origin="upper")
    ax.set_facecolor("0.9")
    for (i, j), words in text.items():
        dark = np.isfinite(grid[i, j]) and norm(grid[i, j]) < 0.6
        ax.text(j, i, words, ha="center", va="center", fontsize=7,
                color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(x_axis)
    ax.set_ylabel(y_axis)
    return image


def phase_diagram_figures(rows, grid, title="", size="d -> inf") -> dict:
    """The figures of a phase diagram (:func:`rmt.experiments.phase_diagram.phase_diagram`).

    ``phase_diagram_lines.png``: ``delta_NN`` against the first axis of ``grid`` (``width``
    when it is an axis), one line per value of the others, ``delta_alg`` beside it.  With two
    or more axes also ``phase_diagram_heatmap.png``: the heat map over the first axis and the
    next, one panel per value of the rest (at most 6 panels).

    Parameters
    ----------
    rows : list of dict
        :data:`rmt.experiments.phase_diagram.PHASE_COLUMNS` rows.
    grid : dict
        ``{axis: values}``: which axes vary.
    title : str
        The figures' title.
    size : str
        The size of the values, as the axes name it (``"d -> inf"``, or ``"d = 4000"``).

    Returns
    -------
    dict
        ``{file name: Figure}``.
    """
    axes_names = list(grid)
    x_axis = "width" if "width" in grid else axes_names[0]
    rest = [a for a in axes_names if a != x_axis]
    fig, axes = new_figure(1, 1, width=6.0, height=4.2)
    plot_phase_lines(axes[0][0], rows, x_axis, rest, legend=False, size=size)
    figure_legend(fig, axes, ncols=2)
    set_title(fig, title)
    figs = {"phase_diagram_lines.png": fig}
    if rest:
        y_axis, facets = rest[0], rest[1:]
        panels = _series(rows, x_axis, facets)
        if len(panels) <= 6:
            fig, axes = new_figure(1, len(panels), width=4.2, height=3.4)
            for ax, (label, points) in zip(axes[0], panels.items()):
                image = plot_phase_heatmap(ax, [r for _, r in points], x_axis, y_axis)
                if facets:
                    ax.set_title(label, fontsize=9)
            fig.colorbar(image, ax=axes[0].tolist(), label=f"delta_NN (DMFT, {size})")
            set_title(fig, title)
            figs["phase_diagram_heatmap.png"] = fig
    return figs


def plot_plateau_lengths(ax, summary, predicted, delta_nn=None, budget=None, legend=True):
    """The plateau length of gradient descent against ``delta``: the simulated median with its
    quartiles (bars) at each ``d``, the predicted curve of the same colour (docs/theory.md 7.7,
    dashed; and 7.8, solid with the quartiles as a band, where ``row_median`` is given), and
    ``delta_NN`` of the DMFT.

    Parameters
    ----------
    ax : matplotlib Axes
    summary : list of dict
        Per ``(d, delta)``: ``median``, ``q25``, ``q75`` (``None`` where censored: beyond the step
        budget, drawn as an open triangle at ``budget``).
    predicted : list of dict
        ``d``, ``delta``, ``predicted_steps`` (``None`` where no escape is predicted), and
        optionally ``row_q25``, ``row_median``, ``row_q75``.
    delta_nn : float or dict, optional
        The threshold (a number, or ``{"delta": value, "stderr": se}``).
    budget : float, optional
        The step budget of the runs.
    """
    import matplotlib.pyplot as plt

    sizes = sorted({int(s["d"]) for s in summary} | {int(p["d"]) for p in predicted})
    cmap = plt.get_cmap("tab10")
    for i, d in enumerate(sizes):
        color = cmap(i)
        rows = sorted((s for s in summary if int(s["d"]) == d), key=lambda s: s["delta"])
        done = [s for s in rows if s["median"] is not None]
        if done:
            x = np.array([s["delta"] for s in done])
            med = np.array([s["median"] for s in done], dtype=float)
            lo = np.array([s["q25"] if s["q25"] is not None else s["median"] for s in done])
            hi = np.array([s["q75"] if s["q75"] is not None else np.nan for s in done])
            hi = np.where(np.isfinite(hi), hi, budget if budget else med)
            ax.errorbar(x, med, yerr=[med - lo, hi - med], fmt="o", ms=5, capsize=3,
                        color=color, label=f"GD, d = {d}: median, quartiles")  # fmt: skip
        cut = [s for s in rows if s["median"] is None]
        if cut and budget:
            ax.plot([s["delta"] for s in cut], [budget] * len(cut), "^", mfc="none", color=color,
                    ms=7, label=f"d = {d}: median beyond the budget")  # fmt: skip
        pred = sorted(
            (p for p in predicted if int(p["d"]) == d and p["predicted_steps"] is not None),
            key=lambda p: p["delta"],
        )
        if pred:
            ax.plot([p["delta"] for p in pred], [p["predicted_steps"] for p in pred], "--",
                    color=color, lw=1.4, label=f"predicted, d = {d}")  # fmt: skip
        row = sorted(
            (p for p in predicted if int(p["d"]) == d and p.get("row_median") is not None),
            key=lambda p: p["delta"],
        )
        if row:
            x = [p["delta"] for p in row]
            med = np.maximum([p["row_median"] for p in row], 1.0)
            ax.plot(x, med, "-", color=color, lw=1.6, label=f"Theta* row, d = {d}: median")
            # the quartiles where both are a length > 0 (a 0 is a run that learns in its first
            # phase, None an escape beyond the solve's horizon): a band with gaps elsewhere
            lo = np.array([p.get("row_q25") or np.nan for p in row], dtype=float)
            hi = np.array([p.get("row_q75") or np.nan for p in row], dtype=float)
            ax.fill_between(x, lo, hi, where=np.isfinite(lo) & np.isfinite(hi), color=color,
                            alpha=0.15, lw=0)  # fmt: skip
    if delta_nn is not None:
        value = delta_nn["delta"] if isinstance(delta_nn, dict) else float(delta_nn)
        lo, hi = ax.get_xlim()
        ax.set_xlim(min(lo, 0.95 * value), hi)
        mark_thresholds(ax, {"delta_nn_dmft": delta_nn})
    ax.set_yscale("log")
    ax.set_xlabel(r"$\delta = n/d$")
    ax.set_ylabel("plateau length (steps)")
    if legend:
        _axes_legend(ax)
    return ax


def plot_delay_curves(ax, runs, legend=True):
    """Train (solid) and test (dashed) loss against steps for a few ``delta`` near the
    threshold: the plateau, then the sudden fall when ``Theta*`` is learned.

    ``runs`` is ``{delta: GDRun}`` (runs with a test set); each run's plateau and escape are
    marked (open circle, filled square)."""
    import matplotlib.pyplot as plt

    if not runs:
        panel_note(ax, "no runs to draw")
        return ax
    cmap = plt.get_cmap("viridis")
    ends = [run.escape_step for run in runs.values() if run.escape_step is not None]
    last = min(max(len(run.loss) for run in runs.values()) - 1, 4 * max(ends, default=10**4))
    for i, (x, run) in enumerate(sorted(runs.items())):
        color = cmap(i / max(len(runs) - 1, 1))
        steps = np.arange(len(run.loss))
        ax.semilogy(steps, run.loss, color=color, lw=1.1, label=rf"$\delta$ = {x:g}: train")
        if run.test_loss is not None:
            ax.semilogy(steps, run.test_loss, "--", color=color, lw=1.1, label="test")
        for t, marker in ((run.plateau_step, "o"), (run.escape_step, "s")):
            if t is not None:
                ax.plot(
                    [t], [run.loss[t]], marker, color=color, mfc="none" if marker == "o" else color
                )
    ax.plot([], [], "o", color="0.3", mfc="none", label="plateau W1")
    ax.plot([], [], "s", color="0.3", label="escape (overlap 0.5)")
    step_axis(ax, last)
    ax.set_ylabel("loss")
    if legend:
        _axes_legend(ax)
    return ax


def grokking_figures(summary, predicted, runs, delta_nn=None, budget=None, title="") -> dict:
    """The figures of the grokking-like delay: ``plateau_length.png`` (:func:`plot_plateau_lengths`)
    and ``delay_curves.png`` (:func:`plot_delay_curves`); returns ``{file name: Figure}``."""
    fig, axes = new_figure(1, 1, width=6.2, height=4.2)
    plot_plateau_lengths(axes[0][0], summary, predicted, delta_nn, budget, legend=False)
    figure_legend(fig, axes, ncols=2)
    set_title(fig, title)
    figs = {"plateau_length.png": fig}
    fig, axes = new_figure(1, 1, width=6.2, height=4.0)
    plot_delay_curves(axes[0][0], runs, legend=False)
    figure_legend(fig, axes, ncols=3)
    set_title(fig, title)
    figs["delay_curves.png"] = fig
    return figs
