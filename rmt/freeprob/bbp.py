"""BBP threshold in ``delta`` of a spiked kernel ensemble (docs/theory.md section 4).

An outlier with ``overlap_theta > 0`` exists on a side iff ``S_lambda`` at the edge has an
eigenvalue of the outward sign whose eigenvector has rows along ``Theta*``.  With

    psi(delta) = max over such eigenpairs of  side * mu_j(S_{lambda_edge(delta)}),

the threshold is the first zero crossing of ``psi`` from below: found on a geometric grid of
``delta`` and refined by Brent's method.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from rmt.freeprob.mp import MPSystem
from rmt.freeprob.outliers import RealBranch, check_side, edge_and_branch
from rmt.freeprob.spectrum import check_law

THETA_TOL = 1e-8


@dataclass(kw_only=True)
class BBPThreshold:
    """Result of ``bbp_threshold``.

    ``found`` is False when no crossing lies in ``delta_range`` (then ``delta`` is ``inf`` and
    ``reason`` says why, e.g. an unbounded side, or an outlier already present at the lower end,
    in which case ``delta <= delta_range[0]`` is all that is known and ``delta`` is ``nan``).
    """

    delta: float
    found: bool
    side: str
    bracket: tuple
    iterations: int
    reason: str = ""
    converged: bool = True


def theta_margin(law, delta, side):
    """``psi(delta)``: positive iff an outlier with ``Theta*`` overlap exists on ``side``.

    Returns ``-1.0`` when the edge has no such eigenpair (including an ``"atom"`` edge).
    """
    sgn = check_side(side)
    mp = MPSystem(law, delta)
    edge, kind, G_edge, points = edge_and_branch(mp, sgn)
    if kind in ("atom", "unbounded"):
        return -1.0
    branch = RealBranch(mp, sgn, edge, G_edge, points)
    vals, vecs = np.linalg.eigh(branch.S(edge)[0])
    rows = law.theta_dims * law.m
    carries = np.sum(vecs[:rows] ** 2, axis=0) > THETA_TOL
    if not np.any(carries):
        return -1.0
    return float(np.max(sgn * vals[carries]))


def bbp_threshold(law, side="left", delta_range=(0.05, 50.0), n_grid=25) -> BBPThreshold:
    """Smallest ``delta`` at which an outlier with ``overlap_theta > 0`` leaves the bulk (``side``).

    The law is fixed and ``delta`` varies (docs/theory.md section 4.4).  ``psi``
    (:func:`theta_margin`) is scanned on a geometric grid of ``n_grid`` points over
    ``delta_range``; the first sign change is refined by Brent's method to relative tolerance
    1e-12.  A crossing narrower than the grid spacing can be missed.

    Parameters
    ----------
    law : SpikeLaw
        The law of ``(zhat, D)``.
    side : {"left", "right"}
        Which end of the spectrum.
    delta_range : (float, float)
        The search range ``0 < lo < hi < inf``.
    n_grid : int
        Points of the geometric scan.

    Returns
    -------
    BBPThreshold
        ``delta`` and ``found``; without a crossing in the range, ``found`` is False and
        ``reason`` says why (``D`` unbounded on ``side``, no outlier up to ``hi``, or one
        already at ``lo``).

    Raises
    ------
    ValueError
        For an invalid ``delta_range`` or ``side``.
    EdgeNotDetermined
        When the edge on ``side`` is not determined by the discretised law.

    Examples
    --------
    The Lu & Li spectral estimator of phase retrieval, ``T(y) = 1 - 1/y``, has its published
    threshold at ``delta = 1/2`` (docs/theory.md section 4.5):

    >>> import numpy as np
    >>> import rmt
    >>> model = rmt.MultiIndexModel("phase_retrieval")
    >>> law = rmt.SpikeLaw.spectral(model, lambda y: 1.0 - 1.0 / y, T_bounds=(-np.inf, 1.0))
    >>> res = rmt.bbp_threshold(law, side="right", delta_range=(0.1, 5.0))
    >>> res.found, round(res.delta, 6)
    (True, 0.5)
    """
    check_law(law)
    sgn = check_side(side)
    lo, hi = (float(v) for v in delta_range)
    if not (0 < lo < hi < np.inf):
        raise ValueError(f"delta_range must satisfy 0 < lo < hi < inf; got {delta_range}")
    if law.unbounded[0 if sgn < 0 else 1]:
        return BBPThreshold(
            delta=np.inf,
            found=False,
            side=side,
            bracket=(lo, hi),
            iterations=0,
            reason=f"D is unbounded on the {side}: the bulk extends to infinity there and "
            f"no outlier separates at any delta ({law.unbounded_reason})",
        )
    grid = np.geomspace(lo, hi, n_grid)
    prev = None
    for i, d in enumerate(grid):
        val = theta_margin(law, d, side)
        if val > 0:
            if i == 0:
                return BBPThreshold(
                    delta=np.nan,
                    found=False,
                    side=side,
                    bracket=(lo, lo),
                    iterations=1,
                    reason=f"an outlier with Theta* overlap already exists at "
                    f"delta = {lo}; lower delta_range[0]",
                )
            root, info = brentq(
                lambda t: theta_margin(law, t, side),
                prev,
                d,
                xtol=1e-14,
                rtol=1e-12,
                full_output=True,
                maxiter=200,
            )
            return BBPThreshold(
                delta=root,
                found=info.converged,
                side=side,
                bracket=(prev, d),
                iterations=i + 1 + info.iterations,
                reason="" if info.converged else "Brent's method did not converge",
                converged=info.converged,
            )
        prev = d
    return BBPThreshold(
        delta=np.inf,
        found=False,
        side=side,
        bracket=(lo, hi),
        iterations=n_grid,
        reason=f"no outlier with Theta* overlap on the {side} for delta in [{lo}, {hi}]",
    )
