"""The population-point threshold ``delta_pop``: when the most negative Hessian direction at a
*data-independent* point carries ``Theta*`` (docs/theory.md section 6.6).

This is not ``delta_NN``.  ``delta_NN`` refers to the point ``W1`` that gradient descent reaches,
which depends on the sample; it is measured by simulation in
:func:`rmt.experiments.learning.trained_thresholds` (docs/theory.md section 7.4).  The value here
is its ``delta -> infinity`` reference, exact for the free-probability engine.

**Definition (this project's own).**  For a configuration (model, network, point) the law of the
curvature blocks is fixed and ``delta = n/d`` varies.  ``delta_pop`` is the smallest ``delta`` at
which the Hessian has a left outlier (below the bulk, docs/theory.md section 4) that

* carries ``Theta*`` overlap (``overlap_theta > 0``), and
* is a descent direction: its eigenvalue is below 0.

The definition is the toolkit's own; it satisfies ``delta_pop >= delta_BBP`` by
construction, and ``delta_pop >= delta_alg`` is a property checked numerically rather than
imposed.  ``delta_pop = inf`` (with the reason) when no such
outlier exists in the searched range, when the curvature blocks are unbounded below (the bulk
then has no left edge), or when they carry no label information.  A solver failure is never an
answer: it gives ``status = "failed"`` and ``delta_pop = nan`` (:class:`ThresholdResult`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from rmt.freeprob import SpikeLaw, bbp_threshold, bulk_edges, delta_alg, outliers
from rmt.kernels.threads import adaptive_threads
from rmt.thresholds.points import as_point

DEFAULT_RANGE = (0.05, 64.0)


@dataclass(kw_only=True)
class ThresholdResult:
    """Result of :func:`population_threshold`.

    ``status`` says what ``delta_pop`` is: ``"found"`` (a finite threshold), ``"none"`` (no
    transition: ``delta_pop = inf``, ``reason`` says why) or ``"failed"`` (a solver failed, so
    nothing is known: ``delta_pop = nan``, never ``inf``; ``reason`` carries the message).
    ``delta_bbp`` and ``delta_alg`` are floats (``inf`` when there is none).  ``edge`` and
    ``outlier`` are the left bulk edge and the outlier at ``delta_pop`` (``nan`` unless found).
    ``converged`` is False exactly when ``status == "failed"``; ``notes`` lists the solver
    failures met along the way.
    """

    delta_pop: float
    delta_alg: float
    delta_bbp: float
    edge: float
    outlier: float
    overlap_theta: float
    converged: bool
    reason: str = ""
    bracket: tuple = (np.nan, np.nan)
    notes: list = field(default_factory=list)
    status: str = "found"

    def as_dict(self) -> dict:
        keys = [
            "status",
            "delta_pop",
            "delta_alg",
            "delta_bbp",
            "edge",
            "outlier",
            "overlap_theta",
            "converged",
            "reason",
        ]
        return {k: getattr(self, k) for k in keys}


def descent_outlier(law, delta, overlap_tol=1e-3, require_negative=True):
    """The lowest left outlier at ``delta`` that carries ``Theta*`` (``overlap_theta >
    overlap_tol``) and, with ``require_negative``, lies below 0; ``None`` if there is none."""
    outs = outliers(law, delta, side="left")
    good = [
        o
        for o in outs
        if o.overlap_theta > overlap_tol and o.converged and (o.value < 0 or not require_negative)
    ]
    return (min(good, key=lambda o: o.value) if good else None), outs


def _label_free(law, tol=1e-10) -> bool:
    """True when ``D`` carries no ``Theta*`` information: ``E[(z z^T - I) (x) D] = 0`` and
    ``E[z (x) D] = 0`` (then the spike term of docs/theory.md section 4 vanishes)."""
    z = law.zhat[:, : law.theta_dims]
    w = law.weights
    first = np.einsum("n,nk,nab->kab", w, z, law.D)
    second = np.einsum("n,nk,nl,nab->klab", w, z, z, law.D)
    second -= np.einsum("kl,ab->klab", np.eye(z.shape[1]), np.einsum("n,nab->ab", w, law.D))
    scale = max(1.0, float(np.max(np.abs(law.D))))
    return max(np.max(np.abs(first)), np.max(np.abs(second))) <= tol * scale


def _safe_descent(law, delta, overlap_tol, notes, require_negative=True):
    """:func:`descent_outlier`, recording a solver failure in ``notes`` (result: ``False``)."""
    try:
        return descent_outlier(law, delta, overlap_tol, require_negative)[0]
    except Exception as exc:  # a solver failure at one delta must not end the search
        notes.append(f"delta = {delta:.6g}: {type(exc).__name__}: {exc}")
        return False


def _positive_semidefinite(law) -> bool:
    """True when ``D_i + shift I`` is positive semidefinite at every node (then ``H >= 0``)."""
    lam_min = np.linalg.eigvalsh(law.D).min(axis=1) + getattr(law, "shift", 0.0)
    return bool(np.all(lam_min >= -1e-12 * max(1.0, float(np.max(np.abs(law.D))))))


def _outlier_value(law, delta, notes):
    """Value of the lowest left outlier carrying ``Theta*`` at ``delta`` (``nan`` if none)."""
    best = _safe_descent(law, delta, 0.0, notes, require_negative=False)
    return np.nan if not best else best.value


def _zero_crossing(law, lo, hi, n_grid, notes):
    """First ``delta`` in ``(lo, hi]`` where the ``Theta*`` outlier's value crosses below 0."""
    prev = lo
    for x in np.geomspace(lo, hi, n_grid)[1:]:
        v = _outlier_value(law, x, notes)
        if np.isfinite(v) and v < 0:

            def f(t):
                val = _outlier_value(law, t, notes)
                return val if np.isfinite(val) else 1.0  # no outlier yet: not below 0

            root, info = brentq(f, prev, x, xtol=1e-12, rtol=1e-10, full_output=True)
            return root, info.converged
        prev = x
    return np.inf, True


def _law_inputs(model, net, point):
    """``(Q, M, notes)`` of a data-independent point (a Point, a PointSpec or its name)."""
    point = as_point(point, model, net)
    inputs = point.law_inputs()
    if inputs is None:
        why = "it depends on the sample" if point.sample_dependent else "law_inputs() is None"
        raise ValueError(
            f"delta_pop needs the Gaussian law of a data-independent point; the {point.kind} "
            f"point has none ({why})"
        )
    return inputs[0], inputs[1], [point.failure] if point.failure else []


def _infinite(dalg, dbbp, reason, notes, converged=True):
    """No transition (``status="none"``, ``delta_pop = inf``), or, when a solver failed on the
    way (``converged`` False), a failure: ``status="failed"``, ``delta_pop = nan``."""
    if not converged:
        return _failed(dalg, dbbp, reason, notes)
    return _without_number(np.inf, dalg, dbbp, reason, notes, "none")


def _failed(dalg, dbbp, reason, notes):
    """A solver failure: never a number (``delta_pop = nan``), with the messages in ``reason``."""
    detail = "; ".join(str(n) for n in notes)
    why = f"solver failure: {reason}" + (f" ({detail})" if detail and detail not in reason else "")
    return _without_number(np.nan, dalg, dbbp, why, notes, "failed")


def _without_number(delta_pop, dalg, dbbp, reason, notes, status):
    """A result without a threshold: no transition (``inf``) or a failure (``nan``)."""
    return ThresholdResult(
        delta_pop=delta_pop,
        delta_alg=dalg,
        delta_bbp=dbbp,
        edge=np.nan,
        outlier=np.nan,
        overlap_theta=np.nan,
        converged=status != "failed",
        reason=reason,
        notes=notes,
        status=status,
    )


@adaptive_threads
def population_threshold(
    model, net, point="population", side="left", delta_range=DEFAULT_RANGE, n_grid=32
) -> ThresholdResult:
    """``delta_pop`` of a configuration at a data-independent point (module docstring).

    ``delta_BBP`` (:func:`rmt.bbp_threshold`) is where the first outlier carrying ``Theta*``
    leaves the bulk on the left.  If the bulk edge there is below 0, the outlier is a descent
    direction from its birth and ``delta_pop = delta_BBP``.  Otherwise ``delta_pop`` is where that
    outlier crosses 0: the first sign change on a geometric grid of ``n_grid`` values over
    ``(delta_BBP, delta_range[1]]``, refined by Brent's method.

    ``point`` is a data-independent :class:`rmt.Point` (its ``law_inputs()`` fix the law), a
    :class:`rmt.PointSpec`, or ``"population"`` / ``"zero"``; a point that depends on the sample
    (``"trained"``) raises ValueError.  See docs/theory.md sections 6.6-6.7.

    Parameters
    ----------
    model : MultiIndexModel
        The target.
    net : TwoLayerNet
        The network.
    point : Point, PointSpec or str
        The data-independent point.
    side : {"left"}
        Only the left (descent) side is defined.
    delta_range : (float, float)
        The search range ``0 < lo < hi < inf``.
    n_grid : int
        Points of the geometric scan above ``delta_BBP``.

    Returns
    -------
    ThresholdResult
        ``delta_pop`` with ``delta_alg``, ``delta_BBP``, the edge, outlier and overlap at
        ``delta_pop``, and ``status`` (``"found"``, ``"infinite"`` with a ``reason``, or
        ``"failed"`` with ``delta_pop = nan``).

    Raises
    ------
    ValueError
        For ``side != "left"``, an invalid ``delta_range`` or a sample-dependent ``point``.

    Examples
    --------
    >>> import rmt
    >>> model = rmt.MultiIndexModel("phase_retrieval")
    >>> net = rmt.TwoLayerNet(1, activation="softplus", loss="huber")
    >>> res = rmt.population_threshold(model, net)
    >>> res.status, round(res.delta_pop, 3), res.delta_pop >= res.delta_alg
    ('found', 0.749, True)
    """
    if side != "left":
        raise ValueError(f"delta_pop is defined on the left (descent) side; got side={side!r}")
    lo, hi = (float(v) for v in delta_range)
    if not 0 < lo < hi < np.inf:
        raise ValueError(f"delta_range must satisfy 0 < lo < hi < inf; got {delta_range}")
    Q, M, notes = _law_inputs(model, net, point)
    dalg = float(delta_alg(model).value)
    law = SpikeLaw.from_network(model, net, Q, M)
    if law.unbounded[0]:
        return _infinite(
            dalg,
            np.inf,
            "the curvature blocks D are unbounded below, so the bulk "
            "has no left edge and no outlier can separate (docs/theory.md section 4)",
            notes,
        )
    if _label_free(law):
        return _infinite(
            dalg,
            np.inf,
            "the curvature blocks D carry no label information at "
            "this point, so no outlier correlates with Theta*",
            notes,
        )
    if _positive_semidefinite(law):
        return _infinite(
            dalg,
            np.inf,
            "every curvature block D is positive semidefinite, so the "
            "Hessian has no negative direction at any delta",
            notes,
        )
    try:
        bbp = bbp_threshold(law, side="left", delta_range=(lo, hi))
    except RuntimeError as exc:  # reported as failed, never as a number
        return _failed(dalg, np.nan, f"the BBP search failed: {exc}", notes)
    if not bbp.found:
        return _infinite(
            dalg,
            bbp.delta,
            f"no outlier with Theta* overlap leaves the bulk: {bbp.reason}",
            notes,
            converged=bbp.converged,
        )
    try:
        return _past_bbp(law, bbp, dalg, hi, n_grid, notes)
    except RuntimeError as exc:  # an edge or outlier solve failed: reported, never a number
        return _failed(dalg, float(bbp.delta), f"{type(exc).__name__}: {exc}", notes)


def _past_bbp(law, bbp, dalg, hi, n_grid, notes):
    """``delta_pop`` from a found BBP threshold: at it, or where its outlier crosses 0."""
    d0 = float(bbp.delta)
    edge0 = float(bulk_edges(law, d0).lo)
    if edge0 < 0:
        dnn, ok = d0, bbp.converged
    else:
        dnn, ok = _zero_crossing(law, d0 * (1 + 1e-9), hi, n_grid, notes)
        if not np.isfinite(dnn):
            return _infinite(
                dalg,
                d0,
                f"the Theta* outlier stays above 0 for delta up to {hi:g}",
                notes,
                converged=not notes,
            )
    edge = float(bulk_edges(law, dnn).lo)
    best = _safe_descent(law, dnn * (1 + 1e-6), 0.0, notes, require_negative=False)
    # at the BBP point the outlier is born at the edge with zero overlap (docs/theory.md section 4)
    value, ov = (best.value, best.overlap_theta) if best else (edge, 0.0)
    if not ok or notes:  # a value found past a solver failure may be wrong: not an answer
        return _failed(dalg, d0, f"the search for delta_pop did not converge near {dnn:.6g}", notes)
    return ThresholdResult(
        delta_pop=dnn,
        delta_alg=dalg,
        delta_bbp=d0,
        edge=edge,
        outlier=value,
        overlap_theta=ov,
        converged=True,
        reason="",
        bracket=(d0, dnn),
        notes=notes,
    )
