"""``delta_NN``: when the most negative Hessian direction at the post-first-phase point carries
``Theta*`` (THEORY.md section 6).

**Definition (this project's own).**  For a configuration (model, network, point) the law of the
curvature blocks is fixed and ``delta = n/d`` varies.  ``delta_NN`` is the smallest ``delta`` at
which the Hessian has a left outlier (below the bulk, THEORY.md section 4) that

* carries ``Theta*`` overlap: ``overlap_theta > overlap_tol``, and
* is a descent direction: its eigenvalue is below 0.

The exact formula of the source paper was not available, so this is our definition; it
satisfies ``delta_NN >= delta_BBP`` by construction, and ``delta_NN >= delta_alg`` is a property
we check numerically rather than impose.  ``delta_NN = inf`` (with the reason) when no such
outlier exists in the searched range, when the curvature blocks are unbounded below (the bulk
then has no left edge), or when they carry no label information.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validation import check_nonneg_float

DEFAULT_RANGE = (0.05, 64.0)


@dataclass
class ThresholdResult:
    """Result of :func:`delta_nn`.

    ``delta_nn``, ``delta_bbp`` and ``delta_alg`` are floats (``inf`` when there is none; see
    ``reason``).  ``edge`` and ``outlier`` are the left bulk edge and the outlier at
    ``delta_nn`` (``nan`` when infinite).  ``converged`` is False when a solver along the way
    failed to converge; ``notes`` lists such events.
    """

    delta_nn: float
    delta_alg: float
    delta_bbp: float
    edge: float
    outlier: float
    overlap_theta: float
    converged: bool
    reason: str = ""
    bracket: tuple = (np.nan, np.nan)
    notes: list = field(default_factory=list)

    def as_dict(self) -> dict:
        keys = ["delta_nn", "delta_alg", "delta_bbp", "edge", "outlier", "overlap_theta",
                "converged", "reason"]
        return {k: getattr(self, k) for k in keys}


def descent_outlier(law, delta, overlap_tol=1e-3):
    """The lowest left outlier at ``delta`` that carries ``Theta*`` and is negative, or None."""
    from .freeprob import outliers

    outs = outliers(law, delta, side="left")
    good = [o for o in outs if o.overlap_theta > overlap_tol and o.value < 0 and o.converged]
    return (min(good, key=lambda o: o.value) if good else None), outs


def _label_free(law, tol=1e-10) -> bool:
    """True when ``D`` carries no ``Theta*`` information: ``E[(z z^T - I) (x) D] = 0`` and
    ``E[z (x) D] = 0`` (then the spike term of THEORY.md section 4 vanishes)."""
    z = law.zhat[:, : law.theta_dims]
    w = law.weights
    first = np.einsum("n,nk,nab->kab", w, z, law.D)
    second = np.einsum("n,nk,nl,nab->klab", w, z, z, law.D)
    second -= np.einsum("kl,ab->klab", np.eye(z.shape[1]), np.einsum("n,nab->ab", w, law.D))
    scale = max(1.0, float(np.max(np.abs(law.D))))
    return max(np.max(np.abs(first)), np.max(np.abs(second))) <= tol * scale


def _safe_descent(law, delta, overlap_tol, notes):
    """:func:`descent_outlier`, recording a solver failure in ``notes`` (result: ``False``)."""
    try:
        return descent_outlier(law, delta, overlap_tol)[0]
    except Exception as exc:  # a solver failure at one delta must not end the search
        notes.append(f"delta = {delta:.6g}: {type(exc).__name__}: {exc}")
        return False


def _scan(law, grid, overlap_tol, notes):
    """First grid index with a descent outlier (``None`` when there is none)."""
    for i, x in enumerate(grid):
        if _safe_descent(law, x, overlap_tol, notes):
            return i
    return None


def _bisect(law, lo, hi, overlap_tol, rtol, notes):
    """Shrink ``[lo, hi]`` (no outlier at ``lo``, one at ``hi``) to relative width ``rtol``.

    A solver failure at a midpoint is retried once slightly off it; a second failure stops the
    bisection with the bracket reached so far (recorded in ``notes``).
    """
    while hi - lo > rtol * hi:
        mid = np.sqrt(lo * hi)
        best = _safe_descent(law, mid, overlap_tol, notes)
        if best is False:
            mid = (lo * hi * hi) ** (1 / 3)  # a third of the way (log scale) towards hi
            best = _safe_descent(law, mid, overlap_tol, notes)
            if best is False:
                break
        lo, hi = (lo, mid) if best is not None else (mid, hi)
    return lo, hi


def _point_QM(model, net, point):
    from .points import PointSpec, population_point

    if isinstance(point, PointSpec):
        return point.Q, point.M, []
    if point == "population":
        spec = population_point(model, net)
        notes = [] if spec.converged else [f"population point not converged: {spec.message}"]
        return spec.Q, spec.M, notes
    if point == "zero":
        return np.zeros((net.width, net.width)), np.zeros((net.width, model.k)), []
    raise ValueError(f"point must be 'population', 'zero' or a PointSpec; got {point!r}")


def _infinite(dalg, dbbp, reason, notes, converged=True):
    return ThresholdResult(np.inf, dalg, dbbp, np.nan, np.nan, np.nan, converged, reason,
                           notes=notes)


def delta_nn(model, net, point="population", side="left", delta_range=DEFAULT_RANGE, n_grid=32,
             overlap_tol=1e-3, rtol=1e-3) -> ThresholdResult:
    """``delta_NN`` of a configuration (see the module docstring for the definition).

    The law of ``(zhat, D)`` at the point (``rmt.SpikeLaw.from_network``) is scanned on a
    geometric grid of ``n_grid`` values over ``delta_range``; the first grid value with a
    descent outlier is refined by bisection (on the log scale) to relative width ``rtol``.
    A transition narrower than the grid spacing can be missed.
    """
    from .freeprob import SpikeLaw, bbp_threshold, bulk_edges, delta_alg

    if side != "left":
        raise ValueError(f"delta_NN is defined on the left (descent) side; got side={side!r}")
    lo, hi = (float(v) for v in delta_range)
    if not 0 < lo < hi < np.inf:
        raise ValueError(f"delta_range must satisfy 0 < lo < hi < inf; got {delta_range}")
    check_nonneg_float(overlap_tol, "overlap_tol")
    Q, M, notes = _point_QM(model, net, point)
    dalg = float(delta_alg(model).value)
    law = SpikeLaw.from_network(model, net, Q, M)
    try:
        bbp = bbp_threshold(law, side="left", delta_range=(lo, hi))
        dbbp = float(bbp.delta)
        if not bbp.converged:
            notes.append(f"bbp_threshold: {bbp.reason}")
    except RuntimeError as exc:  # reported, not hidden: delta_BBP is then unknown (nan)
        dbbp = np.nan
        notes.append(f"bbp_threshold failed: {type(exc).__name__}: {exc}")
    if law.unbounded[0]:
        return _infinite(dalg, dbbp, "the curvature blocks D are unbounded below, so the bulk "
                         "has no left edge and no outlier can separate (THEORY.md section 4)",
                         notes)
    if _label_free(law):
        return _infinite(dalg, dbbp, "the curvature blocks D carry no label information at this "
                         "point, so no outlier correlates with Theta*", notes)
    grid = np.geomspace(lo, hi, n_grid)
    n_notes = len(notes)
    i = _scan(law, grid, overlap_tol, notes)
    failed = len(notes) > n_notes
    if i is None:
        return _infinite(dalg, dbbp, f"no negative outlier with Theta* overlap > {overlap_tol} "
                         f"for delta in [{lo:g}, {hi:g}]", notes, converged=not failed)
    if i == 0:
        notes.append(f"a descent outlier exists already at delta = {lo:g}: delta_NN <= {lo:g}")
        b_lo, b_hi = 0.0, lo
    else:
        b_lo, b_hi = _bisect(law, grid[i - 1], grid[i], overlap_tol, rtol, notes)
    best, outs = descent_outlier(law, b_hi, overlap_tol)
    edge = float(bulk_edges(law, b_hi).lo)
    return ThresholdResult(b_hi, dalg, dbbp, edge, best.value, best.overlap_theta,
                           i > 0 and b_hi - b_lo <= rtol * b_hi, "", (b_lo, b_hi), notes)
