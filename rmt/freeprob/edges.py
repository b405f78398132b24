"""Bulk edges as folds of the real branch of (MP) (docs/theory.md section 3).

Below (above) the spectrum the physical ``G(zeta)`` is real, definite, and increasing in ``zeta``.
We parametrise the branch by ``tau = tr G / m``, which stays monotone through the fold, and solve
the extended system

    R(G, zeta) = 0,      tr G / m = tau,

by Newton in ``(G, zeta)``.  Along it ``h(tau) = d zeta / d tau = m / tr G'``; the edge is the
first zero of ``h`` met when continuing from ``zeta = -+inf`` (a maximum of ``zeta(tau)`` on the
left, a minimum on the right).  For ``m = 1`` this is exactly the Silverstein-Choi inverse
``zeta(s) = -1/s + E[T / (1 + T s / delta)]`` and ``h = zeta'(s)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from rmt.freeprob.mp import (
    NEWTON_MAXIT,
    NEWTON_TOL,
    ConvergenceError,
    EdgeNotDetermined,
    MPSystem,
    NewtonState,
)
from rmt.kernels.freeprob import lu_solve_checked


@dataclass(kw_only=True)
class FoldPoint:
    """A solution of the extended system: ``zeta``, ``G``, ``h = d zeta / d tau``."""

    tau: float
    zeta: float
    G: np.ndarray
    h: float
    iterations: int
    residual: float
    dG: np.ndarray | None = None  # d vech(G) / d tau
    margin: float = np.inf  # smallest pivot of I + G D_i / delta over nodes (0: a pole)
    J: np.ndarray | None = field(default=None, repr=False)  # Jacobian of (MP) in G

    def state(self):
        """This point as a ``NewtonState`` of (MP) at real ``zeta`` (a warm start)."""
        return NewtonState(self.zeta, self.G, self.J, self.iterations, self.residual)


@dataclass(kw_only=True)
class BulkEdges:
    """Result of ``bulk_edges``.  Unpacks as ``lo, hi = bulk_edges(law, delta)``.

    ``lo_kind``/``hi_kind``: ``"fold"`` (square-root edge), ``"pole"`` (the pole of an extreme
    node that attains the extreme of ``D``, see ``find_fold``), ``"undetermined"`` (``nan``: the
    branch ran into the pole of a node short of the extreme of ``D``; ``reason`` says so),
    ``"boundary"`` (the branch ends where
    the exact range of ``D`` in ``law.d_bounds`` puts a pole), ``"atom"`` (an atom at 0 is the end
    of the spectrum), or ``"unbounded"`` (``law.unbounded``: the edge is infinite).
    ``G_lo``/``G_hi`` are ``G`` at the edges, before the shift by ``law.shift``.
    """

    lo: float
    hi: float
    lo_kind: str
    hi_kind: str
    G_lo: np.ndarray | None
    G_hi: np.ndarray | None
    delta: float
    iterations: int
    residual: float
    converged: bool = True
    #: points of the real branch met on the way from ``-inf`` (``+inf``) to the edge, as
    #: ``NewtonState``: warm starts for ``outliers`` (empty for an unbounded or atom edge)
    branch_lo: list = field(default_factory=list, repr=False)
    branch_hi: list = field(default_factory=list, repr=False)
    #: why a side is ``"undetermined"`` (empty when both are determined)
    reason: str = ""

    def __iter__(self):
        return iter((self.lo, self.hi))


def _bordered(mp: MPSystem, G, zeta):
    """Residual, equilibrated bordered Jacobian ``[[J/s, -e], [e^T/m, 0]]`` and ``s = ||G^{-1}||^2``.

    The unknowns are ``(dG, dzeta / s)``; without the scaling the matrix is as ill-conditioned
    as ``||J|| ~ 1/tau^2`` far from the bulk."""
    R, J, scale, ginv_max = mp.residual_parts(G, zeta)
    if R is None:
        return None, None, None, scale, 1.0
    p = mp.e.size
    s = ginv_max**2  # the size of J's G^{-1} dG G^{-1} term
    A = np.zeros((p + 1, p + 1))
    A[:p, :p] = J / s
    A[:p, p] = -mp.e
    A[p, :p] = mp.e / mp.m
    return R, J, A, scale, s


#: below this ratio of the smallest to the largest LU pivot, ``_lstsq`` leaves the plain solve
#: for the truncated SVD one: three orders of magnitude above its ``rcond``, so that a matrix the
#: SVD would truncate is not solved plainly because partial pivoting hid its near-singularity
LU_PIVOT_RATIO = 1e-6


def _lstsq(A, b):
    """Minimum-norm solve: equal to ``solve`` unless ``A`` is singular to ``1e-9`` relative, as at
    a fold of a law with an exchange symmetry (several sectors fold together); the residual has
    no component along those directions, so the truncated step is the right one.

    A Numba LU solve first (much cheaper than numpy's SVD-based ``lstsq`` on the small
    bordered systems, solved many times per sweep point); the SVD only when its pivots fall
    below ``LU_PIVOT_RATIO``."""
    x = np.empty(b.shape[0])
    if lu_solve_checked(A, np.asarray(b, dtype=float), x) >= LU_PIVOT_RATIO:
        return x
    return np.linalg.lstsq(A, b, rcond=1e-9)[0]


def solve_at_tau(mp: MPSystem, tau, G0, zeta0, maxit=NEWTON_MAXIT, monotone=False, tol=NEWTON_TOL):
    """Newton on ``(vech G, zeta)`` at fixed ``tau``; ``None`` on failure.

    ``monotone``: fail as soon as an iteration does not reduce the residual (see ``MPSystem.newton``).
    ``tol``: the relative residual at which the point counts as converged (``STEP_TOL`` for the
    points of the continuation that only serve as warm starts).
    """
    g, zeta = mp.vech(G0).astype(float), float(zeta0)
    last = np.inf
    p = mp.e.size
    rhs = np.empty(p + 1)
    for it in range(maxit + 1):
        G = mp.unvech(g)
        R, J, A, scale, s = _bordered(mp, G, zeta)
        if R is None:
            return None
        c = float(g @ mp.e) / mp.m - tau
        res = max(float(np.max(np.abs(R))) / scale, abs(c) / (abs(tau) + 1e-300))
        if res <= tol:
            rhs[:p], rhs[p] = 0.0, 1.0
            try:
                t = _lstsq(A, rhs)
            except np.linalg.LinAlgError:
                return None
            return FoldPoint(
                tau=tau,
                zeta=zeta,
                G=G,
                h=float(t[-1]) * s,
                iterations=it,
                residual=res,
                dG=t[:-1],
                J=J,
            )
        if it == maxit or (monotone and res >= last):
            return None
        last = res
        np.divide(R, -s, out=rhs[:p])
        rhs[p] = -c
        try:
            step = _lstsq(A, rhs)
        except np.linalg.LinAlgError:
            return None
        g, zeta = g + step[:-1], zeta + step[-1] * s
        if not np.all(np.isfinite(g)):
            return None
    return None


def tau_bound(mp: MPSystem, side):
    """For ``m = 1`` with exact ``d_bounds``: ``tau`` where ``1 + tau D / delta`` hits 0."""
    b = mp.law.d_bounds
    if b is None:
        return None
    edge_value = b[0] if side < 0 else b[1]
    if side * edge_value <= 0 or not np.isfinite(edge_value):
        return None
    return -mp.delta / edge_value


def _start(mp: MPSystem, side):
    zeta0 = side * mp.far(side)
    st = mp.newton(zeta0, -np.eye(mp.m) / zeta0)
    if st is None:
        raise ConvergenceError(f"Newton failed at the starting point zeta = {zeta0:.3g}")
    pt = solve_at_tau(mp, float(np.trace(st.G)) / mp.m, st.G, zeta0)
    if pt is None:
        raise ConvergenceError(f"extended Newton failed at the starting point zeta = {zeta0:.3g}")
    pt.margin = mp.pole_margin(pt.G, side)
    return pt


#: the most negative eigenvalue, relative to the largest, that the symmetric part of ``G'`` may
#: have and still count as positive semidefinite (rounding)
TANGENT_RTOL = 1e-8


def psd_tangent(Gp) -> bool:
    """Whether the symmetric part of ``G'(zeta)`` at a real point is positive semidefinite (to
    :data:`TANGENT_RTOL` of its largest eigenvalue).  Used to notice a continuation step that
    turned it indefinite (:func:`_sheet_jump`, docs/theory.md section 3.7)."""
    ev = np.linalg.eigvalsh(0.5 * (Gp + Gp.T))
    return bool(ev[0] >= -TANGENT_RTOL * max(abs(ev[-1]), 1e-300))


def _tangent_psd(mp, pt) -> bool:
    """Whether ``G' = (dG/dtau) / h`` at ``pt`` (short of the fold) is positive semidefinite."""
    return pt.dG is not None and pt.h > 0.0 and psd_tangent(mp.unvech(pt.dG) / pt.h)


def _sheet_jump(mp, pt, new) -> bool:
    """Whether a step from ``pt`` to ``new`` (both short of the fold) turned ``G'`` from
    positive semidefinite to indefinite: a sign of a landing on the other sheet that meets the
    branch near the fold.  The branch itself can turn so near a fold (the m = 3 population
    law does), so such a step is only retried shorter, down to the fold bracket."""
    return new.h > 0.0 and _tangent_psd(mp, pt) and not _tangent_psd(mp, new)


def _continuation_step(mp, pt, tau_new, side, tol=NEWTON_TOL):
    """One continuation step to ``tau_new`` with a tangent predictor; ``None`` if it fails."""
    dt = tau_new - pt.tau
    G_pred = pt.G + mp.unvech(pt.dG) * dt
    zeta_pred = pt.zeta + pt.h * dt
    new = solve_at_tau(mp, tau_new, G_pred, zeta_pred, maxit=STEP_MAXIT, monotone=True, tol=tol)
    if new is None:
        return None
    moved = np.max(np.abs(new.G - pt.G)) + 1e-300
    if np.max(np.abs(new.G - G_pred)) > PREDICTOR_TRUST * moved:
        return None  # the corrector went far from the tangent: maybe another branch
    new.margin = mp.pole_margin(new.G, side)
    return new if new.margin > 0 else None


POLE_MARGIN = 1e-10
#: relative residual of the points of the continuation on the way to the edge: they are warm
#: starts (tangent predictors, ``BulkEdges.branch_lo``), and Newton's quadratic convergence makes
#: the step from here to ``NEWTON_TOL`` one iteration, which only the edge itself needs
#: (``_polish``); every other point saves it
STEP_TOL = 1e-8
#: a step is accepted only if the corrector moved less than this fraction of the step
PREDICTOR_TRUST = 0.25
#: Newton iterations allowed after a tangent predictor (a good one converges in 3-5)
STEP_MAXIT = 10
#: the fold is bracketed by a step of at most this relative length in tau
FOLD_BRACKET = 0.02
#: a step that keeps ``h > 0`` but divides it by more than ``1 / H_DROP`` is retried shorter.
#: Near a fold ``h`` falls linearly with the distance to it, so on the same branch such a step
#: lands within a few percent of the fold; a long step can instead land on another real branch
#: whose fold is nearby (seen at delta = 0.335 for the softplus/Huber population point: the
#: same edge, but a G whose off-diagonal had the wrong sign, and outliers that do not exist).
H_DROP = 0.05


def _next_ratio(prev, pt, ratio):
    """Step ratio after a failed step: halve it, or aim at 90% of the way to the pole that the
    linear extrapolation of the pole margin predicts, whichever is shorter."""
    halved = 1.0 + 0.5 * (ratio - 1.0)
    if prev is None or not pt.margin < prev.margin:
        return halved
    tau_pole = pt.tau - pt.margin * (pt.tau - prev.tau) / (pt.margin - prev.margin)
    aim = (pt.tau + 0.9 * (tau_pole - pt.tau)) / pt.tau
    return min(halved, aim) if aim > 1.0 else halved


def _bracket_ratio(pt, h_past, ratio):
    """Step ratio after a step past the fold that was too long to bracket it safely.

    ``h`` changes sign between ``pt`` and the point past the fold (ratio ``ratio``, value
    ``h_past``); its linear interpolant puts the fold at ``r_f``.  Aim just short of it, so that
    the next step brackets the fold within ``FOLD_BRACKET``, or across it when it is that close
    already."""
    r_f = 1.0 + (ratio - 1.0) * pt.h / (pt.h - h_past)
    margin = 0.4 * FOLD_BRACKET
    if r_f - 1.0 > FOLD_BRACKET:
        return r_f - margin
    return min(r_f + margin, 1.0 + 0.9 * FOLD_BRACKET, ratio)  # short, rounding included


#: the extreme node reaches the supremum of D when no far point exceeds it by more than this
#: (relative to the scale of D): its pole is then the edge, to about sqrt(its weight)
SUP_RTOL = 1e-6


def _node_reaches_sup(law, side):
    """Whether the extreme node of ``law`` on ``side`` attains the extreme of ``D`` that the
    exact map reaches far out (``law.far_range``): then a pole of that node before any fold is
    the edge (its fold lies within ``sqrt(weight)`` of it), not an artefact of the nodes' reach.
    A law without the exact map (an empirical law) has nothing beyond its nodes."""
    far = getattr(law, "far_range", None)
    if far is None:
        return law.kind == "empirical"
    tol = SUP_RTOL * (law.scale + abs(far[1 if side > 0 else 0]))
    if side > 0:
        return law.node_range[1] >= far[1] - tol
    return law.node_range[0] <= far[0] + tol


#: a failed step caps the next ones at this fraction of the way to where it failed, until the
#: continuation is within ``FAIL_NEAR`` (relative) of that point
FAIL_FRACTION = 0.5
FAIL_NEAR = 0.25 * FOLD_BRACKET


def _cap_by_failure(pt, failed, ratio):
    """``(failed, ratio to try)``: the step ratio capped by the last failure beyond ``pt``.

    Steps past the fold of a discretised law mostly fail: beyond it the real branch runs into
    the poles of the extreme nodes.  Without the cap the continuation forgets a failure once the
    halved step succeeds and aims at the same point again, failing again.  With it, the fold
    lies between ``pt`` and the failure and the steps
    bisect that interval; once ``pt`` is within ``FAIL_NEAR`` of the failure, the cap is dropped
    (a step that failed for its length, short of the fold, then stops holding the steps back)."""
    if failed is None or failed / pt.tau - 1.0 <= 0.0:
        return None, ratio
    gap = failed / pt.tau - 1.0
    if gap <= FAIL_NEAR:
        return None, ratio
    return failed, min(ratio, 1.0 + FAIL_FRACTION * gap)


def _polish(mp, pt, side):
    """``pt`` converged to ``NEWTON_TOL``: one or two Newton iterations from a point of the
    continuation (converged to ``STEP_TOL`` only), nothing for a point that is there already."""
    if pt.residual <= NEWTON_TOL:
        return pt
    new = solve_at_tau(mp, pt.tau, pt.G, pt.zeta)
    if new is None:
        raise ConvergenceError(
            f"extended Newton failed to converge the edge point at tau = {pt.tau:.12g} "
            f"(residual {pt.residual:.2g})",
            partial=pt,
        )
    new.margin = mp.pole_margin(new.G, side)
    return new


#: the longest continuation step, as a ratio of ``tau``
RATIO_MAX = 2.0
#: cap the steps by the fold bracket of ``fold_bracket`` (False: the geometric rule alone)
FOLD_MODEL = True
#: a step aims this fraction of the way from the lower to the upper estimate of the fold
FOLD_AIM = 0.3
#: once the two estimates lie within this relative distance, the step goes ``FOLD_PAST`` of
#: their gap past the upper one: it lands past the fold and brackets it for ``_refine``
FOLD_WINDOW = FOLD_BRACKET
FOLD_PAST = 0.1


def fold_bracket(a, b):
    """``(low, high)``: estimates of ``tau`` at the fold below and above it, from two points ``a``,
    ``b`` of the branch with ``0 < b.h < a.h``; ``None`` when they do not apply.

    Two models of ``h`` bracket the fold in practice (docs/theory.md 3.7):

    - ``low``, the zero of the secant of ``h^2``: ``h`` is convex far out and falls like a square
      root next to the fold of a discretised law (``h^2`` nearly linear), so the secant of
      ``h^2`` reaches zero first;
    - ``high``, the power law of ``k = 1 - h tau^2``: far out ``zeta ~ -1/tau``, so ``k`` rises
      from 0, and it reaches 1 at the fold; its local exponent ``log(k_b/k_a) / log(tau_b/tau_a)``
      grows towards the fold, so extrapolating with the present one goes past it."""
    if not 0.0 < b.h < a.h:
        return None
    low = b.tau + b.h**2 * (b.tau - a.tau) / (a.h**2 - b.h**2)
    k_a, k_b = 1.0 - a.h * a.tau**2, 1.0 - b.h * b.tau**2
    if not 0.0 < k_a < k_b < 1.0:
        return None
    gamma = np.log(k_b / k_a) / np.log(b.tau / a.tau)
    with np.errstate(over="ignore"):  # a tiny exponent puts the upper estimate at infinity
        high = b.tau * (1.0 / k_b) ** (1.0 / gamma)
    if not abs(high) > abs(low):
        return None
    return low, high


def _fold_model_ratio(a, b):
    """Step ratio from ``b`` by the fold bracket of ``a``, ``b`` (``inf`` without one): aim
    ``FOLD_AIM`` of the way from the lower to the upper estimate, short of the fold, where the
    corrector converges; once the two are within ``FOLD_WINDOW``, ``FOLD_PAST`` of their gap
    past the upper one, so that a short step brackets the fold."""
    bracket = fold_bracket(a, b)
    if bracket is None:
        return np.inf
    low, high = bracket
    if abs(high - low) <= FOLD_WINDOW * abs(b.tau):
        return (high + FOLD_PAST * (high - low)) / b.tau
    return (low + FOLD_AIM * (high - low)) / b.tau


def find_fold(mp: MPSystem, side, max_steps=400):
    """Continue from ``zeta = side * inf`` to the edge; returns ``(FoldPoint, kind, steps, path)``.

    ``path`` lists the accepted points of the continuation, from the start.

    ``kind`` is ``"fold"``, ``"boundary"`` (cut at ``law.d_bounds``) or ``"pole"``.  When the
    branch reaches a pole of a node (``I + G D_i/delta`` singular to ``POLE_MARGIN``) before any
    fold, the edge is the pole only if that extreme node attains the extreme of ``D`` (no far
    point of the exact map beyond it, ``law.far_range``): the kind is ``"pole"``, and the fold
    lies within ``sqrt(weight)`` of it (a tail node of weight ``~ phi(10)``).  Otherwise the edge
    is not determined and ``ConvergenceError`` is raised: the pole then tells the reach of the
    nodes, not the edge of the law (an unbounded ``D`` the probe missed, or a supremum reached
    only at infinity).
    """
    pt, prev, past = _start(mp, side), None, None  # past: a point known to lie past the fold
    path = [pt]
    tau_b = tau_bound(mp, side)
    ratio, steps, failed = 1.5, 0, None  # failed: the nearest tau beyond pt where a step failed
    while steps < max_steps:
        steps += 1
        failed, tried = _cap_by_failure(pt, failed, ratio)
        tau_new = pt.tau * tried
        if tau_b is not None and abs(tau_new) >= abs(tau_b):
            tau_new = tau_b
        new = _continuation_step(mp, pt, tau_new, side, tol=STEP_TOL)
        if new is None and (failed is None or abs(tau_new) < abs(failed)):
            failed = tau_new
        if new is not None and tried - 1.0 > FOLD_BRACKET and _sheet_jump(mp, pt, new):
            new = None  # a long step whose tangent turned indefinite: maybe another sheet
        if new is not None and 0.0 < new.h < H_DROP * pt.h and tried - 1.0 > FOLD_BRACKET:
            new = None  # h fell too fast: a long step may have landed on another real branch
        if new is None:
            ratio = _next_ratio(prev, pt, tau_new / pt.tau)
            if ratio - 1.0 < 1e-13:
                break
            continue
        if new.h <= 0.0:
            if tried - 1.0 > FOLD_BRACKET:  # bracket the fold by a short step: no branch jump
                ratio, past = _bracket_ratio(pt, new.h, tried), new
                continue
            return _polish(mp, _refine(mp, pt, new, side), side), "fold", steps, path
        prev, pt = pt, new
        path.append(pt)
        if pt.margin < POLE_MARGIN:
            if _node_reaches_sup(mp.law, side):
                return _polish(mp, pt, side), "pole", steps, path
            raise EdgeNotDetermined(
                f"the bulk edge on the {'left' if side < 0 else 'right'} is not determined: the "
                f"real branch reached a pole of the extreme node (zeta = {pt.zeta:.6g}) before "
                "any fold; the edge of a discretised law there is an artefact of its largest "
                "node (D may be unbounded, or reach its bound only at infinity: pass T_bounds "
                "or d_bounds)",
                partial=pt,
            )
        if tau_b is not None and tau_new == tau_b:
            return _polish(mp, pt, side), "boundary", steps, path
        ratio = min(1.0 + 1.5 * (ratio - 1.0), RATIO_MAX)
        if past is not None and past.tau / pt.tau > 1.0:  # no longer step than to the fold
            ratio = min(ratio, _bracket_ratio(pt, past.h, past.tau / pt.tau))
        elif FOLD_MODEL and prev is not None:
            if _near_fold(pt, [prev]):
                return _polish(mp, pt, side), "fold", steps, path
            ratio = min(ratio, _fold_model_ratio(prev, pt))
    raise ConvergenceError(
        f"no fold of the real branch found on the {'left' if side < 0 else 'right'} after "
        f"{steps} continuation steps (last tau = {pt.tau:.6g}, zeta = {pt.zeta:.6g}, "
        f"h = {pt.h:.3g}); the law may reach a pole without a fold",
        partial=pt,
    )


#: a fold located by the safeguarded search is accepted when the edge value it returns is within
#: this relative distance of the extremum of ``zeta(tau)`` (estimated from the bracket)
EDGE_RTOL = 1e-9
#: evaluations of the safeguarded search
SAFE_MAXIT = 60


def _refine(mp, a, b, side):
    """Locate ``h(tau) = 0`` between ``a`` (``h > 0``) and ``b`` (``h <= 0``) by Brent's method.

    ``zeta(tau)`` is quadratic at its extremum, so a relative ``tau`` tolerance of 1e-10 gives
    the edge to about 1e-20 relative: far below the Newton tolerance.  When an evaluation near
    the fold fails (the corrector leaves the branch), the safeguarded search ``_refine_safe``
    takes over."""
    if b.h == 0.0:
        return b
    try:
        return _refine_brent(mp, a, b, side)
    except ConvergenceError:
        return _refine_safe(mp, a, b, side)


#: Brent's search stops at a point whose ``zeta`` is within this relative distance of the
#: extremum (``_near_fold``): ``zeta`` is quadratic there, so the last evaluations that pin
#: ``tau`` to 1e-10 move the edge by far less (two passes over the nodes per side saved)
EDGE_STOP_RTOL = 1e-12


class _FoldReached(Exception):
    def __init__(self, pt):
        super().__init__()
        self.pt = pt


def _near_fold(pt, others):
    """Whether ``zeta(pt)`` lies within ``EDGE_STOP_RTOL`` of the extremum of ``zeta(tau)``:
    ``0.5 h^2 / |h'|`` with ``|h'|`` the smallest secant slope of ``h`` from ``pt`` to the points
    evaluated before (an overestimate of the distance where ``h`` steepens towards the fold, as
    for the discretised laws)."""
    slopes = [abs((q.h - pt.h) / (q.tau - pt.tau)) for q in others if q.tau != pt.tau]
    if not slopes or min(slopes) == 0.0:
        return False
    return 0.5 * pt.h**2 / min(slopes) <= EDGE_STOP_RTOL * abs(pt.zeta)


def _refine_brent(mp, a, b, side):
    cache = {"pt": a}
    known = {a.tau: a, b.tau: b}  # Brent starts by evaluating both ends: they are known

    def h(tau):
        if tau in known:
            return known[tau].h
        near = cache["pt"]
        new = _continuation_step(mp, near, tau, side) or _continuation_step(mp, a, tau, side)
        if new is None or not _between(new.h, a, b):
            raise ConvergenceError(f"extended Newton failed at tau = {tau:.17g} near the fold")
        if _near_fold(new, known.values()):
            raise _FoldReached(new)
        cache["pt"] = known[tau] = new
        return new.h

    try:
        tau_star = brentq(h, a.tau, b.tau, xtol=1e-10 * abs(a.tau), rtol=1e-10, maxiter=200)
    except _FoldReached as done:
        return done.pt
    if tau_star in known:  # Brent returns a point it has evaluated
        return known[tau_star]
    return _continuation_step(mp, cache["pt"], tau_star, side) or cache["pt"]


def _between(h, a, b):
    """``h`` lies strictly between ``a.h`` and ``b.h``: ``h`` falls through the fold, so a point
    of the bracket whose ``h`` does not is on another real branch.  Near the fold of a law with
    an exchange symmetry broken slightly by the quadrature (``m >= 3`` identical units), such a
    branch lies close: there the corrector converges to a ``G`` with unequal units and an ``h``
    out of order (seen for softplus/Huber, ``m = 3``, at ``delta = 3.25``)."""
    return min(a.h, b.h) < h < max(a.h, b.h)


def _edge_error(a, b):
    """``(point, estimated |zeta_fold - zeta(point)|)`` for the end of the bracket ``(a, b)``
    nearer the fold, from the linear model of ``h`` (``zeta`` is quadratic at the fold)."""
    slope = (b.h - a.h) / (b.tau - a.tau)
    best = min((a, b), key=lambda p: abs(p.h))
    return best, 0.5 * best.h**2 / abs(slope) + abs(best.h * (b.tau - a.tau)) * 1e-3


def _substep(mp, start, tau, side, a, b):
    """Continue from ``start`` to ``tau`` in 1, 2, 4 or 8 steps; the point if it stays in order."""
    for n in (1, 2, 4, 8):
        pt = start
        for t in np.linspace(start.tau, tau, n + 1)[1:]:
            pt = _continuation_step(mp, pt, t, side)
            if pt is None or (t != tau and not _between(pt.h, a, b)):
                break
        if pt is not None and _between(pt.h, a, b):
            return pt
    return None


def _refine_safe(mp, a, b, side):
    """Shrink the bracket ``(a, b)`` of the fold by regula falsi (Illinois), keeping only points
    whose ``h`` lies between the ends' (``_between``), reached by short continuation steps from
    the nearer end.  Returns the end nearer the fold once ``_edge_error`` is below ``EDGE_RTOL``
    relative: a point of the real branch outside the bulk, within that distance of the edge.
    Raises ``ConvergenceError`` otherwise."""
    kept = None  # the end kept by the last step: its h is halved (Illinois)
    for _ in range(SAFE_MAXIT):
        best, err = _edge_error(a, b)
        if err <= EDGE_RTOL * max(abs(best.zeta), 1e-300):
            return best
        ha, hb = a.h * (0.5 if kept == "a" else 1.0), b.h * (0.5 if kept == "b" else 1.0)
        tau = a.tau + min(max(ha / (ha - hb), 0.05), 0.95) * (b.tau - a.tau)
        start = a if abs(tau - a.tau) <= abs(tau - b.tau) else b
        for frac in (1.0, 0.25, 0.0625):  # aim closer to the end it starts from on failure
            new = _substep(mp, start, start.tau + frac * (tau - start.tau), side, a, b)
            if new is not None:
                break
        if new is None:
            break
        if new.h > 0:
            a, kept = new, "b"
        else:
            b, kept = new, "a"
    best, err = _edge_error(a, b)
    raise ConvergenceError(
        f"extended Newton failed near the fold: bracket tau in [{a.tau:.12g}, {b.tau:.12g}], "
        f"edge {best.zeta:.12g} known to {err:.2g} only",
        partial=best,
    )
