"""The grokking-like delay: the plateau length of gradient descent predicted from the theory at
the end of the first phase (docs/theory.md section 7.7).

For each ``delta`` the DMFT of the first phase gives the Hessian at its plateau ``W1`` as
``d -> inf`` (:func:`rmt.dmft_hessian`): the ``Theta*`` outlier, the bulk edges and the bulk
density (:func:`rmt.bulk_density` of its law).  :func:`rmt.dynamics.escape.plateau_length` turns
them into the number of steps the outlier needs to outgrow the ``m d`` directions of the bulk:
the plateau length at dimension ``d``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmt.dynamics.dmft import DMFTHessian, dmft_hessian
from rmt.dynamics.escape import PlateauPrediction, plateau_length
from rmt.freeprob import bulk_density
from rmt.freeprob.mp import ConvergenceError

#: points of the bulk-density grid between the edges
DENSITY_POINTS = 400


@dataclass(frozen=True)
class PlateauLaw:
    """The predicted plateau at one ``delta``: the Hessian at the DMFT plateau (``hessian``)
    and the prediction at each dimension (``by_d``: ``{d: PlateauPrediction}``); ``reason``
    says why there is none when the DMFT gives no Hessian."""

    delta: float
    hessian: DMFTHessian
    by_d: dict
    reason: str = ""


def bulk_grid(hessian: DMFTHessian, points: int = DENSITY_POINTS):
    """The bulk density of ``hessian``'s law on a grid between its edges, and the atom at 0.

    Returns
    -------
    x, density : arrays (points,)
    atom : float

    Raises
    ------
    ConvergenceError
        When the density does not converge at a point.
    """
    lo, hi = hessian.edge_lo, hessian.edge_hi
    x = lo + (hi - lo) * 0.5 * (1.0 - np.cos(np.linspace(0.0, np.pi, points)))
    step = (hi - lo) / points
    dens = bulk_density(hessian.law, hessian.delta, x[1:-1], eta=step)
    density = np.concatenate([[0.0], np.maximum(dens.density, 0.0), [0.0]])
    return x, density, float(dens.atom)


def plateau_law(config, deltas, sizes) -> list[PlateauLaw]:
    """The predicted plateau length at each ``delta`` and dimension ``d`` (docs/theory.md 7.7).

    Parameters
    ----------
    config : rmt.RunConfig
        Target, network and training (``lr``, ``init_scale``, ``weight_decay``) and the DMFT's
        settings (``dmft_steps``, ``dmft_samples``, the seed ``seeds[0]``).
    deltas : sequence of float
        The sample ratios.
    sizes : sequence of int
        The dimensions ``d`` of the prediction.

    Returns
    -------
    list of PlateauLaw
        One per ``delta``: the DMFT Hessian at its plateau and ``{d: PlateauPrediction}``; a
        ``delta`` whose DMFT solve or density fails has ``by_d = {}`` and the reason.
    """
    options = config.dmft_hessian_options()
    out = []
    for delta in deltas:
        h = dmft_hessian(
            config.model(), config.net(), float(delta), stop_at_plateau=True, **options
        )
        if not h.converged:
            out.append(PlateauLaw(delta=float(delta), hessian=h, by_d={}, reason=h.message))
            continue
        try:
            x, rho, atom = bulk_grid(h)
        except ConvergenceError as exc:
            why = f"the bulk density did not converge: {exc}"
            out.append(PlateauLaw(delta=float(delta), hessian=h, by_d={}, reason=why))
            continue
        outlier = h.theta_outlier if np.isfinite(h.theta_outlier) else h.edge_lo
        by_d = {
            int(d): plateau_length(
                outlier, h.edge_lo, x, rho, atom=atom, width=config.width, d=int(d), lr=config.lr
            )
            for d in sizes
        }
        out.append(PlateauLaw(delta=float(delta), hessian=h, by_d=by_d))
    return out


def prediction_row(law: PlateauLaw, d: int) -> dict:
    """One row of the comparison table: ``delta``, ``d``, the outlier, the edge, the gap and the
    predicted plateau (``None`` with the reason where there is none)."""
    h = law.hessian
    pred: PlateauPrediction | None = law.by_d.get(int(d))
    return {
        "delta": law.delta,
        "d": int(d),
        "t1": h.t1,
        "outlier": h.theta_outlier if h.converged else None,
        "overlap": h.theta_overlap if h.converged else None,
        "edge": h.edge_lo if h.converged else None,
        "predicted_steps": None if pred is None else pred.steps,
        "reason": law.reason if pred is None else pred.reason,
    }
