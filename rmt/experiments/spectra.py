"""Full empirical spectra by dense ``eigh``, next to the predicted density (docs/theory.md sec. 3)."""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh

from rmt.experiments.simulation import prepare_point, simulate_point
from rmt.experiments.theory import point_law, theory_at
from rmt.freeprob import bulk_density
from rmt.kernels.threads import adaptive_threads

#: largest m*d whose full spectrum we compute by dense eigh
DENSE_LIMIT = 4000
#: grid points of the predicted density in a spectrum panel
DENSITY_POINTS = 400


def check_dense(config) -> None:
    """Raise ValueError when ``m*d`` exceeds :data:`DENSE_LIMIT`."""
    size = config.width * config.d
    if size > DENSE_LIMIT:
        raise ValueError(
            f"m*d = {size} is too large for a full spectrum (limit {DENSE_LIMIT}); lower d"
        )


@adaptive_threads
def spectrum_panel(config, point, delta: float, seed: int, law=None) -> dict:
    """Full spectrum at one ``delta`` and, with ``law``, the predicted density, edges, outliers.

    The density is Cauchy-smoothed over two grid steps (``eta``): a quadrature law is a sum of
    atoms of ``D``, and where the bulk comes from nearly singular ``D`` (next to the atom at 0
    when ``delta`` is small) its density at ``eta -> 0`` is a comb of narrow bumps, one per
    node, instead of the smooth density of the continuous law.
    """

    check_dense(config)
    sim = simulate_point(config, point, delta, seed)
    evals = eigh(sim.hessian.to_dense(), eigvals_only=True)
    panel = {"delta": delta, "eigenvalues": evals}
    if law is not None:
        th = theory_at(law, delta, 3)
        lo, hi = float(evals[0]), float(evals[-1])
        if not hi > lo:  # one eigenvalue of full multiplicity (H = 0 at W = 0 for cubic)
            lo, hi = lo - 0.5, hi + 0.5
        x = np.linspace(lo, hi, DENSITY_POINTS)
        eta = 2.0 * (x[1] - x[0])
        panel.update(
            density=(x, bulk_density(law, delta, x, eta=eta).density),
            eta=eta,
            edges=(th["edge_lo"], th["edge_hi"]),
            outliers=th["outliers"],
        )
    return panel


@adaptive_threads
def spectrum_panels(config, deltas=None, point=None) -> list[dict]:
    """:func:`spectrum_panel` at each of ``deltas`` (default ``config.deltas``), first seed.

    The prediction is drawn when the point has a Gaussian law (:func:`point_law`).
    """
    check_dense(config)
    point = prepare_point(config) if point is None else point
    law = point_law(config, point)
    deltas = config.deltas if deltas is None else deltas
    return [spectrum_panel(config, point, x, config.seeds[0], law) for x in deltas]
