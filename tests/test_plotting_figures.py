"""Figures of ``rmt.app.plotting`` a researcher would put in a talk: legends cover no data, titles
are not clipped, plain words, and the threshold chart draws only transitions as bars.

The references are the rendered figure itself: every plotted point, line segment (sampled
along its length), bar and text of every Axes, in display coordinates after a draw, against
the bounding box of every legend; the suptitle's box against the figure's box.
"""

import functools
import re
import struct

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection
from matplotlib.container import Container
from matplotlib.lines import Line2D

from rmt.app import plotting

LONG_TITLE = "phase_retrieval, softplus/huber, m=2, d=300, population point, 3 seeds, block_lanczos"


# ----------------------------------------------------------------------------- synthetic data
def _spectrum_panels(deltas, rng):
    panels = []
    for delta in deltas:
        ev = np.sort(np.concatenate([rng.uniform(-1.0, 3.0, 400), [-1.8, -1.5]]))
        x = np.linspace(-1.9, 3.4, 120)  # smoothed over the eigenvalues: past the edges
        panels.append(
            {
                "delta": delta,
                "eigenvalues": ev,
                "density": (x, np.full(x.size, 0.25)),
                "edges": (-1.0, 3.0),
                "outliers": [-1.7],
            }
        )
    return panels


THRESHOLDS = {"delta_alg": 0.5, "delta_bbp": 1.2, "delta_pop": 1.6, "delta_nn": 2.5}


def _sweep(rng):
    rows = [
        {
            "delta": d,
            "seed": s,
            "index": 0,
            "eigenvalue": -0.1 * d + 0.01 * s,
            "overlap_theta": min(1.0, 0.15 * d),
        }
        for d in (0.5, 1, 2, 3, 4, 6)
        for s in (0, 1)
    ]
    x = np.linspace(0.5, 6, 30)
    curve = {"delta": x, "edge_lo": -0.05 * x, "outlier": -0.1 * x, "overlap_theta": 0.15 * x}
    return rows, curve


#: the thresholds and reason of a point without a transition (as ``rmt sweep --activation
#: relu`` gets them from ``population_threshold``)
NO_TRANSITION = {"delta_alg": 0.5, "delta_bbp": np.inf, "delta_pop": np.inf}
NO_REASON = (
    "every curvature block D is positive semidefinite, so the Hessian has no negative "
    "direction at any delta"
)
#: the deltas of the spectrum figures (``spectra_4`` as a range ``--delta 0.5:4:8`` gives them)
SPECTRA = {
    "spectra_1": [4.0],
    "spectra_3": [1.0, 2.0, 4.0],
    "spectra_4": [0.5, 1.0 + 2.0 / 7.0, 2.5, 4.0],
}


def _sweep_without_transition(rng):
    """A sweep whose theory predicts no outlier anywhere: the outlier and overlap are NaN."""
    rows, curve = _sweep(rng)
    for r in rows:
        r["eigenvalue"], r["overlap_theta"] = 0.001 * r["delta"], 0.01
    nan = np.full(curve["delta"].size, np.nan)
    return rows, dict(curve, edge_lo=0.001 * curve["delta"], outlier=nan, overlap_theta=nan)


def _training():
    steps = np.arange(0, 3000, 10)
    overlap = 1 / (1 + np.exp(-(steps - 1500) / 100))
    curves = {
        "step": steps,
        "train_loss": 1 / (1 + steps / 100.0),
        "test_loss": 1.2 / (1 + steps / 100.0),
        "grad_norm": np.exp(-steps / 800.0) + 1e-3,
        "overlap": overlap,
    }
    return curves


def _learn(rng):
    deltas = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    rows_by_d = {}
    for d in (100, 200):
        rows_by_d[d] = [
            {
                "delta": x,
                "seed": s,
                "final_overlap": float(x > 2.5),
                "bottom_eigenvalue": -0.1 * x,
                "plugin_bottom": -0.1 * x + 0.01,
                "plugin_edge_lo": -0.05 * x,
                "bottom_overlap": min(1, 0.2 * x),
                "plugin_overlap": min(1, 0.2 * x),
                "predicted_escape_steps": 100 * x + 10 * s,
                "escape_steps": 110 * x,
                "plateau_step": 400 / x + 30 * s,
            }
            for x in deltas
            for s in (0, 1)
        ]
    curves = [
        {
            "delta": x,
            "seed": s,
            "step": t,
            "test_loss": (1 + 0.1 * s) / (1 + t),
            "overlap": min(1, t / (900 + 50 * s)),
        }
        for x in deltas
        for s in (0, 1)
        for t in range(0, 1000, 50)
    ]
    return rows_by_d, curves


def _threshold_rows():
    base = {"target": "phase_retrieval", "noise": 0.0, "activation": "softplus", "loss": "huber"}
    return [
        {**base, "width": 1, "delta_pop": 1.2, "delta_alg": 0.5, "reason": "", "status": "found"},
        {**base, "width": 2, "delta_pop": 3.0, "delta_alg": 0.5, "reason": "", "status": "found"},
        {
            **base,
            "width": 3,
            "delta_pop": np.inf,
            "delta_alg": 0.5,
            "reason": "extended Newton failed at tau = 1.2 near the fold",
            "status": "failed",
        },
        {
            **base,
            "activation": "tanh",
            "width": 2,
            "delta_pop": np.inf,
            "delta_alg": 0.5,
            "reason": "D carries no label information at this point",
            "status": "none",
        },
    ]


def _build(name):
    """The figure ``name`` of :data:`FIGURES`, from synthetic data."""
    rng = np.random.default_rng(0)
    if name.startswith("spectra"):
        return plotting.spectra_figure(_spectrum_panels(SPECTRA[name], rng), LONG_TITLE)
    if name == "sweep":
        rows, curve = _sweep(rng)
        return plotting.sweep_figure(rows, curve, THRESHOLDS, LONG_TITLE)
    if name == "sweep_none":
        rows, curve = _sweep_without_transition(rng)
        return plotting.sweep_figure(rows, curve, NO_TRANSITION, LONG_TITLE, reason=NO_REASON)
    if name == "threshold":
        return plotting.threshold_figure(_threshold_rows(), "population point")
    if name == "training":
        return plotting.training_figure(_training(), 1600.0, 900, 1500, LONG_TITLE)
    rows_by_d, curves = _learn(rng)
    return plotting.learn_figures(rows_by_d, curves, THRESHOLDS, LONG_TITLE)[name]


FIGURES = [
    "spectra_1",
    "spectra_3",
    "spectra_4",
    "sweep",
    "sweep_none",
    "threshold",
    "training",
    "learning_transition.png",
    "learning_curves.png",
    "hessian_at_plateau.png",
]


@functools.cache
def _saved(name, out):
    """The figure, saved as a PNG (the layout is final after the save) and drawn again."""
    fig = _build(name)
    plotting.save_figure(fig, out / f"{name}.png")
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("figures")


# ----------------------------------------------------------------------------- geometry helpers
def _segments_display(xy_display, n=40):
    """Points along each segment of a polyline (display coordinates)."""
    xy = np.asarray(xy_display, dtype=float)
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    if len(xy) < 2:
        return xy
    t = np.linspace(0.0, 1.0, n)[:, None, None]
    return (xy[:-1][None] * (1 - t) + xy[1:][None] * t).reshape(-1, 2)


def _data_points(ax):
    """Display coordinates of what the Axes shows: points and sampled segments of its lines and
    collections, clipped to the Axes (matplotlib clips them there)."""
    pts = []
    for line in ax.get_lines():
        if not line.get_visible():
            continue
        xy = line.get_transform().transform(line.get_xydata())
        pts.append(xy)
        if line.get_linestyle() not in ("None", "", " "):
            pts.append(_segments_display(xy))
    for coll in ax.collections:
        if not isinstance(coll, Collection) or not coll.get_visible():
            continue
        offsets = coll.get_offsets()
        if len(offsets) and coll.get_offset_transform() is not None:
            pts.append(coll.get_offset_transform().transform(offsets))
        for path in coll.get_paths():
            if len(path.vertices) < 2 or coll.get_offset_transform() is not coll.get_transform():
                pts.append(_segments_display(coll.get_transform().transform(path.vertices)))
    pts = np.concatenate([p.reshape(-1, 2) for p in pts]) if pts else np.empty((0, 2))
    box = ax.bbox
    inside = (
        (pts[:, 0] >= box.x0)
        & (pts[:, 0] <= box.x1)
        & (pts[:, 1] >= box.y0)
        & (pts[:, 1] <= box.y1)
    )
    return pts[inside]


def _legends(fig):
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]


def _overlaps(a, b):
    """Boxes that share an area (touching edges do not count)."""
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", FIGURES)
def test_legend_covers_no_data(out_dir, name):
    fig = _saved(name, out_dir)
    legends = _legends(fig)
    assert legends, f"{name}: no legend"
    renderer = fig.canvas.get_renderer()
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for ax in fig.axes:
            pts = _data_points(ax)
            hit = (
                (pts[:, 0] > box.x0)
                & (pts[:, 0] < box.x1)
                & (pts[:, 1] > box.y0)
                & (pts[:, 1] < box.y1)
            )
            assert not hit.any(), f"{name}: the legend covers {hit.sum()} plotted points"
            for patch in ax.patches:
                pb = patch.get_window_extent(renderer)
                if (
                    pb.width > 0
                    and pb.height > 0
                    and _overlaps(pb.intersection(pb, ax.bbox) or pb, box)
                ):
                    raise AssertionError(f"{name}: the legend covers a bar")
            for text in ax.texts:
                assert not _overlaps(text.get_window_extent(renderer), box), (name, text.get_text())


@pytest.mark.parametrize("name", FIGURES)
def test_one_legend_per_figure(out_dir, name):
    assert len(_legends(_saved(name, out_dir))) == 1, name


@pytest.mark.parametrize("name", [n for n in FIGURES if n != "threshold"])
def test_title_is_inside_the_figure(out_dir, name):
    fig = _saved(name, out_dir)
    title = fig._suptitle
    assert title is not None and title.get_text(), name
    box = title.get_window_extent(fig.canvas.get_renderer())
    fb = fig.bbox
    assert fb.x0 <= box.x0 and box.x1 <= fb.x1 and fb.y0 <= box.y0 and box.y1 <= fb.y1, (
        name,
        box,
        fb,
    )


def test_no_jargon_in_the_spectra_legend(out_dir):
    labels = [t.get_text() for t in _saved("spectra_1", out_dir).legends[0].get_texts()]
    assert "predicted density (smoothed to the plot's resolution)" in labels
    assert not any("η" in s or "eta" in s or "grid step" in s for s in labels), labels
    assert "predicted bulk edges" in labels  # the dashed lines are explained


def _bar_rows(ax):
    """y centres of the bars of a horizontal bar chart."""
    return sorted(round(p.get_y() + p.get_height() / 2, 6) for p in ax.patches)


def test_threshold_chart_draws_only_transitions_as_bars(out_dir):
    fig = _saved("threshold", out_dir)
    ax = fig.axes[0]
    assert _bar_rows(ax) == [0.0, 1.0]  # the two "found" rows, no bar for none/failed
    np.testing.assert_allclose(sorted(p.get_width() for p in ax.patches), [1.2 / 0.5, 3.0 / 0.5])
    texts = {round(t.get_position()[1]): t for t in ax.texts}
    failed, none = texts[2], texts[3]
    assert "solver failed" in failed.get_text() and "no transition" not in failed.get_text()
    assert matplotlib.colors.same_color(failed.get_color(), plotting.FAILED_COLOR)
    assert "no transition" in none.get_text()
    assert not matplotlib.colors.same_color(none.get_color(), plotting.FAILED_COLOR)
    # every reference line is explained in the legend
    legend_labels = [t.get_text() for t in fig.legends[0].get_texts()]
    for line in ax.get_lines():
        assert isinstance(line, Line2D) and line.get_label() in legend_labels, line.get_label()


def test_threshold_status_from_older_tables():
    rows = _threshold_rows()
    for r in rows:
        r.pop("status")
    rows[2]["delta_pop"] = np.nan  # an older table wrote NaN for a solver failure
    rows[2]["converged"] = False
    assert [plotting.threshold_status(r) for r in rows] == ["found", "found", "failed", "none"]
    fig = plotting.threshold_figure(rows)
    assert _bar_rows(fig.axes[0]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="status must be one of"):
        plotting.threshold_status({"status": "maybe", "delta_pop": 1.0})


def test_thresholds_with_intervals_are_drawn_as_bands():
    """An estimate with an interval is a band over exactly that interval (an open end runs to
    the edge of the axes) and its legend says the interval; a bare number is a line only."""
    fig = plotting.new_figure()[0]
    ax = fig.axes[0]
    ax.plot([1.0, 8.0], [0.0, 1.0])
    marks = {
        "delta_nn": {"delta": 3.46, "interval": [2.0, 4.0]},
        "delta_gd": {"delta": 2.45, "interval": [2.0, None]},
        "delta_alg": 1.5,
    }
    x1 = ax.get_xlim()[1]
    plotting.mark_thresholds(ax, marks)
    assert ax.get_xlim()[1] == x1
    spans = sorted(
        tuple(np.round(p.get_x() + np.array([0.0, p.get_width()]), 12)) for p in ax.patches
    )
    assert spans == sorted([(2.0, 4.0), (2.0, round(x1, 12))])
    labels = [line.get_label() for line in ax.lines[1:]]
    assert any("3.46 [2, 4]" in s for s in labels)
    assert any("2.45 [2, open]" in s for s in labels)
    assert any(s.endswith("= 1.5") for s in labels)


def test_threshold_marks_off_the_delta_axis_say_so():
    """A threshold outside the plotted ``delta`` range is not drawn: its legend entry says on
    which side of the axis it lies; one inside is left as it is."""
    fig = plotting.new_figure()[0]
    ax = fig.axes[0]
    ax.plot([2.0, 3.0, 4.0], [0.1, 0.5, 0.8], "o")
    plotting.mark_thresholds(ax, {"delta_alg": 0.5, "delta_nn": 2.5})
    plotting._log_delta_axis(ax)
    labels = {line.get_label() for line in ax.lines[1:]}
    assert any(s.endswith("= 0.5 (left of the axis)") for s in labels)
    assert any(s.endswith("= 2.5") for s in labels)


# ----------------------------------------------------------------------------- legend entries
def _shows_data(handle, ax):
    """Whether a legend handle is an artist that shows data in ``ax``: finite points inside its
    ``x`` limits (a vertical mark outside them may stay in the legend if its label says on
    which side of the axis it lies), a non-empty collection, a bar."""
    if isinstance(handle, Container):
        return any(_shows_data(c, ax) for c in handle.get_children())
    if isinstance(handle, Line2D):
        xy = np.asarray(handle.get_xydata(), dtype=float)
        xy = xy[np.isfinite(xy).all(axis=1)]
        if not handle.get_visible() or not len(xy):
            return False
        lo, hi = sorted(ax.get_xlim())
        inside = (xy[:, 0] >= lo) & (xy[:, 0] <= hi)
        return bool(inside.any()) or "of the axis)" in handle.get_label()
    if isinstance(handle, Collection):
        return len(handle.get_offsets()) > 0 or len(handle.get_paths()) > 0
    return handle.get_visible()


@pytest.mark.parametrize("name", FIGURES)
def test_every_legend_entry_is_drawn(out_dir, name):
    """The legend lists only what a panel shows: no entry for a predicted curve without a
    finite value (or a mark without a value)."""
    fig = _saved(name, out_dir)
    shown = set()
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if _shows_data(handle, ax):
                shown.add(label)
    labels = [t.get_text() for t in _legends(fig)[0].get_texts()]
    assert labels and not [s for s in labels if s not in shown], (name, shown)


def test_a_sweep_without_transition_says_so(out_dir):
    """``rmt sweep --activation relu``: the theory has no outlier; both panels say "no
    transition" (the overlap panel with the reason) and the legend has no predicted outlier,
    overlap, or threshold without a value."""
    fig = _saved("sweep_none", out_dir)
    ax_value, ax_overlap = fig.axes[:2]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert not [s for s in labels if "predicted outlier" in s or "predicted overlap" in s]
    assert not [s for s in labels if "BBP" in s or "pop" in s], labels  # infinite: not drawn
    assert any("bulk edge" in s for s in labels)  # the finite predicted curve is drawn
    for ax in (ax_value, ax_overlap):
        assert any("no transition" in t.get_text() for t in ax.texts)
    note = " ".join(" ".join(t.get_text() for t in ax_overlap.texts).split())
    assert " ".join(NO_REASON.split()) in note


def _png_size(path):
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def test_spectra_are_a_grid_of_readable_panels(out_dir):
    """At most three panels a row, a figure about as tall as wide, titles with the deltas to
    three significant digits (not four decimals)."""
    fig = _saved("spectra_4", out_dir)
    deltas = SPECTRA["spectra_4"]
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
    assert len(axes) == len(deltas)
    per_row = {}
    for ax in axes:
        per_row.setdefault(round(ax.get_position().y0, 3), []).append(ax)
    assert max(len(r) for r in per_row.values()) <= 3 and len(per_row) >= 2
    width, height = _png_size(out_dir / "spectra_4.png")
    assert 0.75 <= width / height <= 2.2, (width, height)
    for ax, delta in zip(axes, deltas):
        title = ax.get_title()
        assert not re.search(r"\d\.\d{4}", title), title
        shown = float(re.search(r"=\s*([0-9.eE+-]+)", title).group(1))
        assert shown == pytest.approx(delta, rel=5e-3) and shown == float(f"{delta:.3g}")


def test_spectrum_density_stays_inside_the_predicted_edges(out_dir):
    fig = _saved("spectra_4", out_dir)
    panels = _spectrum_panels(SPECTRA["spectra_4"], np.random.default_rng(0))
    axes = [ax for ax in fig.axes if ax.has_data()]
    for ax, p in zip(axes, panels):
        (line,) = [ln for ln in ax.get_lines() if ln.get_label().startswith("predicted density")]
        x = np.asarray(line.get_xdata())
        lo, hi = p["edges"]
        grid = p["density"][0]
        step = grid[1] - grid[0]
        assert x.min() >= lo and x.max() <= hi
        assert x.min() <= lo + step and x.max() >= hi - step  # the whole support is drawn
        assert np.any(grid < lo) and np.any(grid > hi)  # the data did run past the edges


def test_spectrum_extremes_are_visible_below_the_bars(out_dir):
    """The empirical extreme eigenvalues are a rug below the histogram's baseline, inside the
    Axes, at their values; the predicted outlier sits above the baseline."""
    fig = _saved("spectra_4", out_dir)
    panels = _spectrum_panels(SPECTRA["spectra_4"], np.random.default_rng(0))
    axes = [ax for ax in fig.axes if ax.has_data()]
    for ax, p in zip(axes, panels):
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        rug, predicted = lines["empirical extremes"], lines["predicted outlier"]
        np.testing.assert_array_equal(rug.get_xdata(), p["eigenvalues"][:2])
        bottom, top = ax.get_ylim()
        y = np.asarray(rug.get_ydata())
        assert np.all(y < 0) and np.all(y > bottom)  # below every bar, inside the Axes
        assert np.all(np.asarray(predicted.get_ydata()) > 0)
        np.testing.assert_array_equal(predicted.get_xdata(), p["outliers"])


def test_coinciding_thresholds_are_one_line():
    """delta_BBP and delta_pop at the same value (to 1e-9 relative) are one line with one
    legend entry naming both; values that differ more stay separate lines."""
    fig = plotting.new_figure()[0]
    ax = fig.axes[0]
    ax.plot([0.2, 2.0], [0.0, 1.0])
    pop = 0.8365098225255967
    marks = {"delta_alg": 0.5, "delta_bbp": pop, "delta_pop": pop * (1 + 1e-12), "delta_nn": 0.84}
    plotting.mark_thresholds(ax, marks)
    values = sorted(marks.values())
    distinct = 1 + sum(b - a > 1e-9 * b for a, b in zip(values, values[1:]))
    lines = ax.lines[1:]
    assert len(lines) == distinct == 3
    labels = [line.get_label() for line in lines]
    (both,) = [s for s in labels if "BBP" in s]
    assert "pop" in both and sum("pop" in s for s in labels) == 1
    assert both.endswith(f"= {pop:.3g}")


# ----------------------------------------------------------------------------- training, learning
def test_training_steps_show_both_phases_and_round_off_is_clipped():
    """A plateau after ~100 steps of ~3000 takes a good part of the step axis (not a sliver),
    and a gradient norm that falls to round-off (1e-15) is clipped 1e-8 below its largest
    value, which the panel says."""
    curves = _training()
    steps = curves["step"]
    curves["grad_norm"] = np.where(steps < 2000, curves["grad_norm"], 1e-15)
    plateau, escape = 120, 1500
    fig = plotting.training_figure(curves, None, plateau, escape, LONG_TITLE)
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    ax_loss, ax_grad, ax_overlap = fig.axes[:3]
    for ax in (ax_loss, ax_grad, ax_overlap):
        x0, x_plateau, x_last = (
            ax.transData.transform((v, 1.0))[0] for v in (max(steps[1], 1), plateau, steps[-1])
        )
        width = ax.bbox.width
        assert (x_plateau - ax.bbox.x0) / width > 0.25, "the first phase is a sliver"
        assert (x_last - x_plateau) / width > 0.25, "the second phase is a sliver"
        assert ax.bbox.x0 - 1 <= x0 and x_last <= ax.bbox.x1 + 1
    largest = np.max(curves["grad_norm"])
    bottom = ax_grad.get_ylim()[0]
    assert bottom == pytest.approx(1e-8 * largest, rel=1e-6)
    texts = [ax_grad.get_title()] + [t.get_text() for t in ax_grad.texts]
    assert any("not shown" in t and f"{1e-8 * largest:.1e}" in t for t in texts), texts


def test_training_gradient_norm_is_not_clipped_without_need():
    curves = _training()
    fig = plotting.training_figure(curves, None, 120, 1500, LONG_TITLE)
    ax_grad = fig.axes[1]
    assert ax_grad.get_ylim()[0] <= np.min(curves["grad_norm"])
    assert not ax_grad.get_title()


CONFIG_TITLE = "phase_retrieval, softplus/huber, m = 2, trained point, d = 200"


def _learning_curves_figure():
    rows_by_d, curves = _learn(np.random.default_rng(0))
    figs = plotting.learn_figures(rows_by_d, curves, THRESHOLDS, CONFIG_TITLE, d=200)
    return figs, rows_by_d[200], curves


def test_learning_curves_show_every_seed_and_each_plateau():
    figs, rows, curves = _learning_curves_figure()
    fig = figs["learning_curves.png"]
    ax_loss, ax_overlap = fig.axes[:2]
    shown = [float(s.split("=")[1]) for s in ax_overlap.get_legend_handles_labels()[1] if "=" in s]
    seeds = {r["seed"] for r in curves}
    for ax in (ax_loss, ax_overlap):
        runs = [
            ln
            for ln in ax.get_lines()
            if ln.get_linestyle() == "-" and ln.get_marker() in ("None", "")
        ]
        assert (
            len(runs)
            == len(shown) * len(seeds)
            == len({(r["delta"], r["seed"]) for r in curves if r["delta"] in shown})
        )
        (marks,) = [ln for ln in ax.get_lines() if ln.get_label() == plotting.PLATEAU_LABEL]
        expected = sorted(r["plateau_step"] for r in rows if r["delta"] in shown)
        np.testing.assert_allclose(sorted(marks.get_xdata()), expected)
    # the marks sit on the curves: the overlap of the run at its plateau step
    (marks,) = [ln for ln in ax_overlap.get_lines() if ln.get_label() == plotting.PLATEAU_LABEL]
    for t, y in zip(marks.get_xdata(), marks.get_ydata()):
        run = [r for r in rows if r["plateau_step"] == t and r["delta"] in shown][0]
        c = [r for r in curves if r["delta"] == run["delta"] and r["seed"] == run["seed"]]
        assert y == pytest.approx(np.interp(t, [r["step"] for r in c], [r["overlap"] for r in c]))


def test_learning_curve_titles_say_which_deltas_and_name_d_once():
    figs, rows, curves = _learning_curves_figure()
    every = sorted({r["delta"] for r in rows})
    fig = figs["learning_curves.png"]
    shown = [float(s.split("=")[1]) for s in fig.axes[1].get_legend_handles_labels()[1] if "=" in s]
    title = " ".join(fig._suptitle.get_text().split())
    assert len(shown) < len(every)  # the data have more deltas than the figure shows
    assert f"{len(shown)} of the {len(every)} values" in title
    assert all(f"{x:g}" in title for x in shown)
    for name in ("learning_curves.png", "hessian_at_plateau.png"):
        title = " ".join(figs[name]._suptitle.get_text().split())
        assert title.count("d = 200") == 1, title


# ----------------------------------------------------------------------------- escape panel
def _escape_rows(points):
    """Runs as ``rmt learn`` tables them: ``(delta, predicted, measured)``, None for none."""
    return [
        {"delta": x, "seed": i, "predicted_escape_steps": p, "escape_steps": m}
        for i, (x, p, m) in enumerate(points)
    ]


def test_escape_panel_with_few_points_has_a_legend_not_a_colour_bar():
    rows = _escape_rows([(4.0, 300.0, 280.0), (4.0, 320.0, 330.0), (2.0, None, None)])
    fig, axes = plotting.new_figure()
    plotting.plot_escape_times(axes[0][0], rows, legend=False)
    assert len(fig.axes) == 1  # no colour bar
    with_both = [r for r in rows if r["escape_steps"] is not None]
    labels = axes[0][0].get_legend_handles_labels()[1]
    for x in sorted({r["delta"] for r in with_both}):
        (line,) = [ln for ln in axes[0][0].get_lines() if ln.get_label().endswith(f"= {x:g}")]
        np.testing.assert_allclose(
            sorted(line.get_xdata()),
            sorted(r["predicted_escape_steps"] for r in with_both if r["delta"] == x),
        )
    assert len([s for s in labels if "escape at" in s]) == len({r["delta"] for r in with_both})


def test_escape_panel_with_many_points_over_deltas_has_a_colour_bar():
    rows = _escape_rows([(2.0, 500.0, 450.0), (3.0, 400.0, 420.0), (4.0, 300.0, 310.0)])
    fig, axes = plotting.new_figure()
    plotting.plot_escape_times(axes[0][0], rows, legend=False)
    assert len(fig.axes) == 2


def test_empty_escape_panel_says_why():
    rows = _escape_rows([(2.0, None, None), (3.0, None, 420.0), (4.0, None, 310.0)])
    fig, axes = plotting.new_figure()
    ax = plotting.plot_escape_times(axes[0][0], rows, legend=False)
    text = " ".join(" ".join(t.get_text() for t in ax.texts).split())
    escaped = sum(r["escape_steps"] is not None for r in rows)
    assert "no escape time to compare" in text
    assert f"{escaped} of {len(rows)} runs escaped" in text
    assert f"0 of {len(rows)} have a predicted escape" in text
