"""Figures: the histogram keeps the normalisation of the whole spectrum; summaries are exact."""

import numpy as np
import pytest

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
