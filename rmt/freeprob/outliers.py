"""Outlier eigenvalues and their overlaps (docs/theory.md section 4; the BBP threshold is in ``bbp.py``).

For real ``lambda`` outside the bulk, with ``G = G(lambda)`` and ``F`` as in (MP), the map on
``A in R^{K x m}``

    S_lambda(A) = E[zhat zhat^T A F] - lambda A,   i.e.   E[kron(zhat zhat^T, F)] - lambda I,

is symmetric.  ``lambda`` is an outlier iff ``S_lambda`` is singular.  Its eigenvalues decrease in
``lambda`` (``S' = -(1/delta) E[kron(zz^T, F G' F)] - I``), so each eigenvalue of ``S`` at the edge
with the outward sign gives exactly one root, bracketed between the edge and a far point.  With
the null vector ``A`` (unit norm), the squared overlaps are ``||A||^2 / <A, -S' A>`` with
``R^m (x) span(zhat)`` and ``||A_Theta||^2 / <A, -S' A>`` with ``R^m (x) span(Theta*)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rmt.freeprob import scalar
from rmt.freeprob.mp import ConvergenceError, EdgeNotDetermined, MPSystem
from rmt.freeprob.spectrum import check_law, continue_real_branch, real_branch_start, side_edge

SIDES = {"left": -1, "right": 1}
EDGE_RESOLUTION = 1e-9  # roots closer than this (relative) to the edge are not outliers
#: outward continuation steps allowed, relative to the distance from the edge (``RealBranch``)
OUTWARD_STEP = 1e-2
#: relative tolerance of a root of ``mu_j`` (the Newton correction, or its quadratic prediction)
ROOT_RTOL = 1e-14
#: start the root of each eigenvalue from the evaluations of ``S`` made for the others
#: (``_warm_start``); False: from the far end of its bracket
WARM_ROOTS = True


@dataclass(kw_only=True)
class Outlier:
    """An outlier eigenvalue of ``H`` outside the bulk (docs/theory.md section 4).

    ``overlap_spike``: squared overlap of the eigenvector with ``R^m (x) span(zhat)``;
    ``overlap_theta``: with ``R^m (x) span(Theta*)``.  ``vector`` is the null vector ``A``
    (``K x m``) of ``S_lambda``; ``residual`` is ``|mu(value)|``, the eigenvalue of ``S`` at the
    root.
    """

    value: float
    overlap_spike: float
    overlap_theta: float
    side: str
    delta: float
    vector: np.ndarray = field(repr=False)
    iterations: int = 0
    residual: float = 0.0
    converged: bool = True


class Outliers(list):
    """A list of ``Outlier`` with the edge it was measured from and, when empty, the reason."""

    def __init__(self, items=(), side="left", edge=np.nan, edge_kind="", reason=""):
        super().__init__(items)
        self.side, self.edge, self.edge_kind, self.reason = (
            side,
            edge,
            edge_kind,
            reason,
        )


def check_side(side):
    """``-1`` for ``"left"``, ``+1`` for ``"right"``; ValueError for anything else."""
    if side not in SIDES:
        raise ValueError(f"side must be 'left' or 'right'; got {side!r}")
    return SIDES[side]


class RealBranch:
    """The real branch of (MP) on one side, with cached points for warm starts."""

    def __init__(self, mp: MPSystem, side, edge, G_edge, points=()):
        self.mp, self.side, self.edge, self.G_edge = mp, side, edge, G_edge
        self.points = list(points) or [real_branch_start(mp, side)]
        self._S = {}

    def state(self, lam):
        """``G(lam)`` by continuation towards the edge from the nearest known point that lies
        farther from it than ``lam``, or outward from one by a short step (``_may_start``).
        Never a long step outwards: near the fold the unphysical real branch is close by, and a
        step away from the edge can land on it (it then gives outliers that do not exist, e.g.
        at delta = 0.335 for the softplus/Huber population point)."""
        if lam == self.edge:
            return None
        far = [p for p in self.points if self._may_start(p, lam)]
        start = min(far, key=lambda p: abs(p.zeta.real - lam)) if far else self.points[0]
        st, _ = continue_real_branch(self.mp, start, lam, self.side)
        self.points.append(st)
        return st

    def _may_start(self, p, lam):
        """Whether the continuation to ``lam`` may start from the point ``p``: ``p`` lies farther
        from the edge, or ``lam`` lies outward of it by at most ``OUTWARD_STEP`` of its distance to
        the edge.  The physical and the unphysical real branch part like the square root of that
        distance, while the tangent predictor errs by the square of the step: such a step stays on
        the branch it starts from.  (The Newton iterates of ``_root`` move outward by such steps
        as they converge: from the farther point they cost two or three passes more.)"""
        out = self.side * (p.zeta.real - lam)
        return out >= 0 or -out <= OUTWARD_STEP * abs(p.zeta.real - self.edge)

    def S(self, lam):
        """``S_lambda`` and ``S'_lambda`` as ``Km x Km`` symmetric matrices (cached by ``lam``)."""
        if lam not in self._S:
            st = self.state(lam)
            G = self.G_edge if st is None else st.G
            Gp = np.zeros_like(G) if st is None else self.mp.tangent(st)
            ES, ESp = self.mp.spike_matrices(G, Gp)
            n = ES.shape[0]
            self._S[lam] = (ES - lam * np.eye(n), -ESp / self.mp.delta - np.eye(n))
        return self._S[lam]


def edge_and_branch(mp: MPSystem, side):
    """``(edge, kind, G_edge, branch_points)`` on ``side`` (see :func:`side_edge`), before the
    shift: what :class:`RealBranch` starts from."""
    value, kind, G, _, _, branch = side_edge(mp, side)
    return value, kind, G, branch


def _root(branch: RealBranch, j, mu_edge):
    """The root of the ``j``-th eigenvalue ``mu_j`` of ``S_lambda`` outward of the edge.

    Newton on ``mu_j`` (``mu_j' = <A, S' A>``), kept inside a bracket that bisection shrinks
    whenever a Newton step leaves it."""
    side, edge = branch.side, branch.edge
    step = 0.05 * (branch.mp.law.scale + abs(edge)) + 1e-3
    far = edge + side * step
    while side * np.linalg.eigvalsh(branch.S(far)[0])[j] >= 0:
        step *= 2.0
        far = edge + side * step
        if step > 1e30:
            raise ConvergenceError(f"no sign change of the {j}-th eigenvalue of S found")
    inner, outer = (
        edge,
        far,
    )  # mu_j has the outward sign at inner, the inward one at outer
    lam = far
    if WARM_ROOTS:
        inner, outer, lam = _warm_start(branch, j, inner, outer, far)
    last = None  # the previous Newton correction (None after a bisection)
    for it in range(1, 200):
        S, Sp = branch.S(lam)
        vals, vecs = np.linalg.eigh(S)
        mu, dmu = vals[j], float(vecs[:, j] @ Sp @ vecs[:, j])
        if side * mu > 0:
            inner = lam
        else:
            outer = lam
        nxt = lam - mu / dmu if dmu != 0 else np.nan
        # converged before the bracket test: at the root, the Newton point may coincide with a
        # bracket end to rounding, and bisecting there would throw the converged root away
        if mu == 0.0:
            return lam, it
        tol = ROOT_RTOL * (1.0 + abs(lam))
        step = abs(nxt - lam)
        if step <= tol:
            return nxt, it
        if not (min(inner, outer) < nxt < max(inner, outer)):
            nxt, last = 0.5 * (inner + outer), None
            if abs(nxt - lam) <= tol:
                return nxt, it
        else:
            # quadratic convergence: the next correction is about rate * step^2, with the rate
            # from the last two; below the tolerance, nxt is the root and needs no evaluation
            if last is not None and step < 0.1 * last and step**3 / last**2 <= 0.1 * tol:
                return nxt, it
            last = step
        lam = nxt
    raise ConvergenceError(f"the root of the {j}-th eigenvalue of S did not converge")


def _warm_start(branch: RealBranch, j, inner, outer, far):
    """``(inner, outer, start)`` for the root of ``mu_j`` from the ``S_lambda`` evaluated so far
    (the iterates of the roots found before, the bracket search): the bracket ``(inner, outer)``
    shrunk to the nearest evaluations with the outward and the inward sign, and the Newton
    prediction from the evaluation whose correction ``|mu_j / mu_j'|`` is smallest, when it lies
    inside that bracket (else ``far``).  The outliers of a law with several spike directions can
    lie close together, so the evaluations for one root start the next near it."""
    side, bracket = branch.side, (inner, outer)
    best, start = np.inf, far
    for lam, (S, Sp) in branch._S.items():
        if lam == branch.edge:
            continue
        vals, vecs = np.linalg.eigh(S)
        mu, dmu = vals[j], float(vecs[:, j] @ Sp @ vecs[:, j])
        if side * mu > 0:
            if side * (lam - inner) > 0:
                inner = lam
        elif side * (lam - outer) < 0:
            outer = lam
        if dmu != 0.0 and abs(mu / dmu) < best:
            best, start = abs(mu / dmu), lam - mu / dmu
    if not side * (outer - inner) > 0:  # the signs do not order as one root: ignore them
        return bracket[0], bracket[1], far
    if not min(inner, outer) < start < max(inner, outer):
        start = outer
    return inner, outer, start


def _overlaps(branch: RealBranch, lam, j, theta_rows):
    S, Sp = branch.S(lam)
    vals, vecs = np.linalg.eigh(S)
    A = vecs[:, j]
    denom = float(A @ (-Sp @ A))
    if not denom > 0:
        raise ConvergenceError(f"<A, -S' A> = {denom:.3g} is not positive at lambda = {lam}")
    return 1.0 / denom, float(A[:theta_rows] @ A[:theta_rows]) / denom, A, abs(vals[j])


def _roots(mp: MPSystem, sgn, edge, kind, G_edge, branch_points):
    """``(lambda, iterations, A, overlap_spike, overlap_theta, |mu|)`` for each eigenvalue of ``S``
    with the outward sign at the edge (before the shift): on the scalar branch for ``m = 1``
    beyond a fold (``scalar.outlier_roots``), else by continuation of ``G`` in ``lambda``."""
    if mp.m == 1 and scalar.ENABLED and kind == "fold":
        return scalar.outlier_roots(mp, sgn, float(G_edge[0, 0]), edge, ROOT_RTOL)
    branch = RealBranch(mp, sgn, edge, G_edge, branch_points)
    mu_edge = np.linalg.eigvalsh(branch.S(edge)[0])
    # an eigenvalue of S that vanishes at the edge to rounding is not an outlier
    tiny = 1e-10 * max(1.0, float(np.max(np.abs(mu_edge))))
    out = []
    for j in np.flatnonzero(sgn * mu_edge > tiny):
        lam, its = _root(branch, j, mu_edge[j])
        ov_s, ov_t, A, res = _overlaps(branch, lam, j, mp.law.theta_dims * mp.m)
        out.append((lam, its, A, ov_s, ov_t, res))
    return out


def outliers(law, delta, side="left", edges=None) -> Outliers:
    """Outliers of ``H`` beyond the bulk edge on ``side``, nearest the edge last (docs/theory.md sec. 4).

    The outliers are the roots of ``det S(lambda) = 0`` beyond the edge, and their overlaps come
    from the derivative of ``S`` (docs/theory.md sections 4.1-4.3).  An unbounded side returns
    an empty list with the reason; an ``"atom"`` left edge (``D >= 0``) has no outliers.

    Parameters
    ----------
    law : SpikeLaw
        The law of ``(zhat, D)``.
    delta : float
        Sample ratio ``n / d``.
    side : {"left", "right"}
        Which end of the spectrum.
    edges : BulkEdges, optional
        The edges of the same law and ``delta``, to skip recomputing the edge (unless that
        side's edge was not computed).

    Returns
    -------
    Outliers
        A list of :class:`Outlier` (``value``, ``overlap_spike``, ``overlap_theta``), possibly
        empty; then ``.reason`` says why.

    Raises
    ------
    ValueError
        For an unknown ``side``.
    EdgeNotDetermined
        When the edge on ``side`` is not determined by the discretised law.
    ConvergenceError
        When a root does not converge.

    Examples
    --------
    The spectral estimator of phase retrieval (``y = z^2``) with ``T(y) = 1 - 1/y``
    (Lu & Li, 2017; docs/theory.md section 4.5) has, at ``delta = 2``, the published outlier
    0.500 with squared overlap 0.639:

    >>> import numpy as np
    >>> import rmt
    >>> model = rmt.MultiIndexModel("phase_retrieval")
    >>> law = rmt.SpikeLaw.spectral(model, lambda y: 1.0 - 1.0 / y, T_bounds=(-np.inf, 1.0))
    >>> (out,) = rmt.outliers(law, 2.0, side="right")
    >>> print(f"{out.value:.3f} {out.overlap_theta:.3f}")
    0.500 0.639
    """
    check_law(law)
    sgn = check_side(side)
    mp = MPSystem(law, delta)
    computed = edges is not None and (edges.lo_kind if sgn < 0 else edges.hi_kind) != "not computed"
    if computed and edges.delta == mp.delta:
        edge, kind = (edges.lo, edges.lo_kind) if sgn < 0 else (edges.hi, edges.hi_kind)
        edge, G_edge = edge - law.shift, edges.G_lo if sgn < 0 else edges.G_hi
        branch_points = edges.branch_lo if sgn < 0 else edges.branch_hi
    else:
        edge, kind, G_edge, branch_points = edge_and_branch(mp, sgn)
    shift = law.shift
    if kind == "undetermined":
        raise EdgeNotDetermined(f"no outliers on the {side}: {edges.reason}")
    if kind in ("unbounded", "atom"):
        why = {
            "unbounded": f"D is unbounded on the {side}: the bulk extends to infinity and no "
            f"outlier separates ({law.unbounded_reason})",
            "atom": "D is definite and the atom at 0 ends the spectrum on this side",
        }[kind]
        return Outliers([], side, edge + shift, kind, why)
    found = []
    for lam, its, A, ov_s, ov_t, res in _roots(mp, sgn, edge, kind, G_edge, branch_points):
        # G has a square-root singularity at the edge, so S there is only known to about the
        # square root of the rounding error: a root this close to the edge is the edge itself
        if abs(lam - edge) <= EDGE_RESOLUTION * (law.scale + abs(edge)):
            continue
        found.append(
            Outlier(
                value=lam + shift,
                overlap_spike=ov_s,
                overlap_theta=ov_t,
                side=side,
                delta=mp.delta,
                vector=A.reshape(law.K, law.m),
                iterations=its,
                residual=res,
            )
        )
    found.sort(key=lambda o: sgn * o.value, reverse=True)
    reason = "" if found else "S at the edge has no eigenvalue of the outward sign"
    return Outliers(found, side, edge + shift, kind, reason)
