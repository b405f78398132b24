"""Figures: the histogram keeps the normalisation of the whole spectrum; summaries are exact."""

import numpy as np
import pytest

import rmt
from rmt.plotting import new_figure, plot_spectrum, save_figure, summarize_by_delta


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

    from rmt.plotting import plot_hessian_at_plateau, plot_learning_curves

    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    res = rmt.dmft_gd(model, net, 4.0, 0.5, 12, 0.1, n_samples=100, n_test=100, rng=0)
    h = rmt.DMFTHessian(4.0, 5, "local_min", -0.07, 0.39, np.array([-0.08]), np.array([0.4]),
                        -0.08, -0.08, 0.4, True, True, "ok", res)  # fmt: skip
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
