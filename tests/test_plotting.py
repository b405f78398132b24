"""Figures: the histogram keeps the normalisation of the whole spectrum; summaries are exact.
Progress bars show on a terminal only (unless forced)."""

import io
import sys

import numpy as np
import pytest

import rmt
from rmt.app.plotting import new_figure, plot_spectrum, save_figure, summarize_by_delta


def test_histogram_area_is_the_non_atom_fraction(tmp_path, rng):
    ev = np.concatenate([np.zeros(300), rng.normal(size=700)])
    fig, axes = new_figure()
    ax = plot_spectrum(
        axes[0][0],
        ev,
        density=(np.linspace(-3, 3, 50), np.ones(50)),
        edges=(-3.0, 3.0),
        outliers=[-4.0],
        sim_outliers=[-3.9],
    )
    area = sum(p.get_height() * p.get_width() for p in ax.patches)
    assert area == pytest.approx(0.7, rel=1e-12)
    assert any("30.0%" in t.get_text() for t in ax.texts)
    save_figure(fig, tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summaries_across_seeds():
    rows = [
        {"delta": d, "seed": s, "index": i, "eigenvalue": d + s + 10 * i}
        for d in (1.0, 2.0)
        for s in (0, 1, 2)
        for i in (0, 1)
    ]
    dl, mean, sd = summarize_by_delta(rows, "eigenvalue")
    np.testing.assert_array_equal(dl, [1.0, 2.0])
    np.testing.assert_allclose(mean, [2.0, 3.0])
    np.testing.assert_allclose(sd, np.std([0, 1, 2]))


def test_learning_figures_draw_the_dmft_over_the_simulation():
    """``rmt learn --dmft``: the DMFT curves (dashed) over the simulated ones, and the DMFT
    prediction at ``t1`` in the Hessian panel, at the same values."""
    import matplotlib.pyplot as plt

    from rmt.app.plotting import plot_hessian_at_plateau, plot_learning_curves

    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    res = rmt.dmft_gd(model, net, 4.0, 0.5, 12, 0.1, n_samples=100, n_test=100, rng=0)
    h = rmt.DMFTHessian(
        delta=4.0,
        t1=5,
        plateau_rule="local_min",
        edge_lo=-0.07,
        edge_hi=0.39,
        outliers=np.array([-0.08]),
        overlaps_theta=np.array([0.4]),
        bottom=-0.08,
        theta_outlier=-0.08,
        theta_overlap=0.4,
        negative=True,
        converged=True,
        message="ok",
        result=res,
    )
    curves = [
        {"delta": 4.0, "seed": 0, "step": t, "test_loss": 0.5, "overlap": 0.0} for t in range(3)
    ]
    fig, (a, b) = plt.subplots(1, 2)
    plot_learning_curves(a, b, curves, [4.0], dmft={4.0: h})
    dashed = [ln for ln in a.get_lines() if ln.get_linestyle() == "--" and len(ln.get_xdata())]
    assert len(dashed) == 1
    np.testing.assert_allclose(dashed[0].get_ydata(), res.test_loss)
    (diamond,) = [ln for ln in a.get_lines() if ln.get_marker() == "D" and len(ln.get_xdata())]
    assert diamond.get_xdata()[0] == 5 and diamond.get_ydata()[0] == res.test_loss[5]
    rows = [{"delta": 4.0, "bottom_eigenvalue": -0.07, "plugin_bottom": -0.07,
             "plugin_edge_lo": -0.06, "bottom_overlap": 0.4, "plugin_overlap": 0.4}]  # fmt: skip
    fig2, (c, e) = plt.subplots(1, 2)
    plot_hessian_at_plateau(c, e, rows, {}, dmft={4.0: h})
    pts = [ln for ln in c.get_lines() if ln.get_marker() == "D"]
    assert len(pts) == 1 and pts[0].get_ydata()[0] == -0.08
    plt.close(fig)
    plt.close(fig2)


class _Stream(io.StringIO):
    """A stderr that is a terminal or not."""

    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


#: (stderr is a terminal, progress given, a bar is expected)
PROGRESS_CASES = [
    (True, None, True),  # the default: a terminal gets bars
    (False, None, False),  # ... a file or a pipe gets none
    (False, True, True),  # forced into a file
    (True, False, False),  # turned off on a terminal
]


@pytest.mark.parametrize("tty, progress, shown", PROGRESS_CASES)
def test_progress_bars_show_on_a_terminal_only(monkeypatch, tty, progress, shown):
    """The bars of the task runner, the threshold table and gradient descent follow stderr:
    bar text on a terminal, none in a redirected stream, unless the caller forces them."""
    from rmt.experiments import threshold_table
    from rmt.operators import distributed
    from rmt.progress import progress_enabled

    stream = _Stream(tty)
    monkeypatch.setattr(sys, "stderr", stream)
    assert progress_enabled(progress) is shown
    kwargs = {} if progress is None else {"progress": progress}
    assert distributed.run_tasks(abs, [(-1,), (2,)], progress=progress) == [1, 2]
    threshold_table(rmt.RunConfig(), variants=[], **kwargs)
    model = rmt.MultiIndexModel("phase_retrieval")
    data = model.sample(40, 20, rng=0)
    rmt.gradient_descent(rmt.TwoLayerNet(2), data, steps=3, rng=0, **kwargs)
    text = stream.getvalue()
    for desc in ("tasks", "threshold table", "gradient descent"):
        assert (desc in text) is shown, (desc, text)
