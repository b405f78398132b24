"""Bulk edges and outliers of ``m = 1`` on the Silverstein-Choi inverse (docs/theory.md 3.4, 4.3).

With one hidden unit ``G = s`` is a scalar, and (MP) gives ``zeta`` in closed form:

    zeta(s)  = -1/s + E[F],              F = T / (1 + T s / delta),
    zeta'(s) = 1/s^2 - E[F^2] / delta,   dF/ds = -F^2 / delta.

On the side ``side`` (-1 left, +1 right) the physical branch is ``s = -side x`` with ``x > 0``.
Every point of it is a solution of (MP) with no Newton solve: one pass over the nodes gives
``zeta`` and ``zeta'``.  The continuation of ``edges.find_fold`` (a bordered Newton system at
every step) is replaced by two scalar root searches:

* **the edge**: ``h(x) = s^2 zeta'(s) = 1 - (s^2 / delta) E[F^2]`` falls strictly from
  ``h(0) = 1`` (each ``(T s)^2 / (1 + T s / delta)^2`` grows with ``x`` on the branch), so its
  only zero is the fold; bracketed Newton with ``h'(s) = -(2 s / delta)(E[F^2] - (s / delta)
  E[F^3])``.
* **an outlier**: the eigenvalue ``mu_j`` of ``S(s) = E[zhat zhat^T F] - zeta(s) I`` is strictly
  monotone in ``s`` (``dS/ds = -E[zhat zhat^T F^2] / delta - zeta'(s) I``, negative definite
  below the fold), so each eigenvalue with the outward sign at the edge has one root between the
  edge and ``s = 0``; bracketed Newton in ``s``, ``lambda = zeta(s)``.

Anything this path does not settle cleanly is left to the general solvers (the callers then
run them): an edge within ``MIN_MARGIN`` of the pole of the extreme node (the ``"pole"`` and
``"undetermined"`` kinds of ``find_fold``), the cut of exact ``d_bounds`` (``"boundary"``), no
zero of ``h`` (a definite ``D`` whose atom ends the spectrum), or an evaluation past a pole.
"""

from __future__ import annotations

import numpy as np

from rmt.freeprob.edges import FoldPoint, tau_bound
from rmt.freeprob.mp import ConvergenceError, MPSystem, NewtonState
from rmt.kernels.freeprob import scalar_moments, scalar_spike_sums

#: whether ``bulk_edges``, ``outliers`` (and what calls them) take this path for ``m = 1``; the
#: general continuation stays the reference it is tested against (``tests/test_scalar.py``)
ENABLED = True
#: the search stops when the Newton correction of ``x`` is below this fraction of ``x``: the edge
#: ``zeta`` is quadratic in ``x`` at the fold, so its error is far below rounding
EDGE_XTOL = 1e-13
#: an edge whose pole margin ``1 + T_ext s / delta`` (extreme node) is below this is left to
#: ``find_fold``, which tells a fold from a pole there (``POLE_MARGIN = 1e-10``) and knows whether
#: the extreme node attains the extreme of ``D``
MIN_MARGIN = 1e-6
#: an outlier's Newton search also needs its step in ``x`` below this fraction of ``x`` (where
#: ``zeta' = 0``, at the fold, the step alone does not bound the error of ``lambda``)
ROOT_XTOL = 1e-7
#: evaluations allowed to one root search (bracketed Newton: 5-10 are typical)
MAXIT = 100
#: without a pole on its side the search for a point past the fold doubles ``x`` up to this
#: multiple of ``delta / scale`` before it concludes that ``h`` has no zero
X_REACH = 1e8


class _Branch:
    """The physical real branch of ``mp`` (``m = 1``) on ``side``: evaluations at ``x = |s|``."""

    def __init__(self, mp: MPSystem, side):
        if mp.m != 1:
            raise ValueError(f"the scalar branch needs m = 1; got m = {mp.m}")
        self.mp, self.side = mp, side
        self.T = mp.Dv[0] if mp.Dv is not None else np.ascontiguousarray(mp.D[:, 0, 0])
        self.inv_delta = 1.0 / mp.delta
        lo, hi = mp.law.node_range
        ext = lo if side < 0 else hi
        #: ``x`` of the pole of the extreme node on this side (``inf``: no pole)
        self.ext = ext
        self.x_pole = mp.delta / abs(ext) if side * ext > 0 else np.inf
        self.evaluations = 0

    def s(self, x):
        return -self.side * x

    def moments(self, x):
        """``(E[F], E[F^2], E[F^3])`` at ``x``, or ``None`` past a pole."""
        out = np.empty(3)
        self.evaluations += 1
        if scalar_moments(self.T, self.mp.w, self.s(x), self.inv_delta, out):
            return None
        return out

    def margin(self, x):
        """``1 + T_ext s / delta``: the pivot of the extreme node (1 where no pole is near)."""
        return 1.0 + self.ext * self.s(x) * self.inv_delta if np.isfinite(self.x_pole) else 1.0

    def state(self, x, e1, e2):
        """The point ``s(x)`` of the branch as a ``NewtonState`` of (MP) (a warm start)."""
        s = self.s(x)
        zeta = -1.0 / s + e1
        res = abs(-zeta + e1 - 1.0 / s) / (1.0 + abs(zeta) + abs(1.0 / s) + abs(e1))
        J = np.array([[1.0 / s**2 - e2 * self.inv_delta]])
        return NewtonState(zeta, np.array([[s]]), J, 0, res)


def _h(br: _Branch, x, sums):
    """``(h, dh/dx)`` at ``x`` from its moments."""
    s = br.s(x)
    e1, e2, e3 = sums
    h = 1.0 - s * s * e2 * br.inv_delta
    dh_ds = -2.0 * s * br.inv_delta * (e2 - s * br.inv_delta * e3)
    return h, -br.side * dh_ds


def _past_fold(br: _Branch):
    """``(x, moments)`` of a point past the fold (``h < 0``) when the side has no pole, doubling
    ``x`` from ``delta / scale``; ``None`` if ``h`` stays positive (no fold)."""
    scale = br.mp.law.scale
    x = br.mp.delta / scale
    while x <= X_REACH * br.mp.delta / scale:
        sums = br.moments(x)
        if sums is None:
            return None
        if _h(br, x, sums)[0] < 0.0:
            return x, sums
        x *= 2.0
    return None


def fold(mp: MPSystem, side):
    """The edge on ``side`` as ``(FoldPoint, path)``, or ``None`` when this path does not settle it
    (see the module docstring; the caller then runs ``find_fold``).  ``path``: points of the
    branch below the fold met by the search, farthest first, as ``NewtonState`` (warm starts)."""
    br = _Branch(mp, side)
    a, b = 0.0, br.x_pole  # h(a) > 0 > h(b)
    if np.isfinite(b):
        x = 0.5 * b
    else:
        found = _past_fold(br)
        if found is None:
            return None
        b = found[0]
        x = 0.5 * b
    path = []
    for _ in range(MAXIT):
        sums = br.moments(x)
        if sums is None:  # past a pole to rounding: shorten
            b, x = x, 0.5 * (a + x)
            continue
        h, dh = _h(br, x, sums)
        if h > 0.0:
            a = x
            path.append((x, sums))
        elif h < 0.0:
            b = x
        nxt = x - h / dh if dh != 0.0 else np.nan
        if h != 0.0 and not a < nxt < b:
            nxt = 0.5 * (a + b)
        if h == 0.0 or abs(nxt - x) <= EDGE_XTOL * x:
            break
        x = nxt
    else:
        return None
    margin = br.margin(x)
    tau_b = tau_bound(mp, side)
    if margin < MIN_MARGIN or (tau_b is not None and abs(tau_b) <= x):
        return None
    st = br.state(x, sums[0], sums[1])
    pt = FoldPoint(
        tau=st.G[0, 0],
        zeta=st.zeta,
        G=st.G,
        h=h / x**2,
        iterations=br.evaluations,
        residual=st.residual,
    )
    pt.margin, pt.J = margin, st.J
    path.sort(key=lambda p: p[0])
    return pt, [br.state(px, ps[0], ps[1]) for px, ps in path]


class _Spikes:
    """``S(s)``, ``E[zhat zhat^T F^2]``, ``zeta`` and ``zeta'`` on the branch at ``x``."""

    def __init__(self, br: _Branch):
        self.br = br
        K = br.mp.zhat.shape[1]
        self.S1, self.S2, self.out = np.empty((K, K)), np.empty((K, K)), np.empty(2)

    def at(self, x):
        br = self.br
        s = br.s(x)
        br.evaluations += 1
        S1, S2 = np.empty_like(self.S1), np.empty_like(self.S2)
        if scalar_spike_sums(br.T, br.mp.w, br.mp.zhat, s, br.inv_delta, S1, S2, self.out):
            raise ConvergenceError(f"a node passed its pole at s = {s:.6g} on the branch")
        zeta = -1.0 / s + self.out[0]
        zp = 1.0 / s**2 - self.out[1] * br.inv_delta
        return S1, S2, zeta, zp


def outlier_roots(mp: MPSystem, side, s_edge, edge, root_rtol):
    """The outliers on ``side`` beyond a ``"fold"`` edge (``G = s_edge``, value ``edge`` before the
    shift): a list of ``(lambda, iterations, A, overlap_spike, overlap_theta, |mu|)``, one per
    eigenvalue of ``S`` with the outward sign at the edge (``docs/theory.md`` 4.1-4.3; roots
    within the edge resolution are the caller's to drop)."""
    br = _Branch(mp, side)
    sp = _Spikes(br)
    x_edge = abs(float(s_edge))
    at_edge = sp.at(x_edge)
    K = at_edge[0].shape[0]
    mu_edge = np.linalg.eigvalsh(at_edge[0] - edge * np.eye(K))
    tiny = 1e-10 * max(1.0, float(np.max(np.abs(mu_edge))))
    theta_rows = mp.law.theta_dims
    found = []
    for j in np.flatnonzero(side * mu_edge > tiny):
        its, (S2, zeta, zp), A, mu = _root(sp, j, x_edge, at_edge, side, root_rtol)
        # <A, -S' A> with S' = dS/dlambda = -E[zz^T F^2] G' / delta - I and G' = 1 / zeta'(s)
        denom = float(A @ (S2 @ A)) / (mp.delta * zp) + float(A @ A)
        if not denom > 0.0:
            raise ConvergenceError(f"<A, -S' A> = {denom:.3g} is not positive at {zeta}")
        ov_t = float(A[:theta_rows] @ A[:theta_rows]) / denom
        found.append((zeta, its, A, 1.0 / denom, ov_t, abs(mu)))
    return found


def _root(sp: _Spikes, j, x_edge, at_edge, side, root_rtol):
    """The root in ``x`` of the ``j``-th eigenvalue ``mu_j`` of ``S`` between the edge and
    ``x = 0``: bracketed Newton from the edge (``mu_j`` is smooth in ``x`` through the fold, and
    has the inward sign as ``x -> 0``, where ``lambda -> side * inf``).  Returns
    ``(evaluations, (S2, zeta, zeta'), A, mu)`` at the last point evaluated."""
    inner, outer = x_edge, 0.0  # mu_j: outward sign at inner, inward at outer
    x, (S1, S2, zeta, zp) = x_edge, at_edge
    eye = np.eye(S1.shape[0])
    for it in range(1, MAXIT + 1):
        vals, vecs = np.linalg.eigh(S1 - zeta * eye)
        mu, A = vals[j], vecs[:, j]
        if side * mu > 0.0:
            inner = x
        else:
            outer = x
        # d mu / dx = <A, dS/ds A> ds/dx, with dS/ds = -S2 / delta - zeta' I and ds/dx = -side
        dmu = side * (float(A @ (S2 @ A)) * sp.br.inv_delta + zp)
        nxt = x - mu / dmu if dmu != 0.0 else np.nan
        if mu != 0.0 and not min(inner, outer) < nxt < max(inner, outer):
            nxt = 0.5 * (inner + outer)
        step = abs(nxt - x)
        # lambda moves by about zeta' times the step in x; near the fold zeta' vanishes and the
        # second-order term takes over, which the relative bound on the step keeps negligible
        if mu == 0.0 or (
            step * max(zp, 0.0) <= root_rtol * (1.0 + abs(zeta)) and step <= ROOT_XTOL * x
        ):
            return it, (S2, zeta, zp), A, mu
        if step <= 4.0 * np.finfo(float).eps * x:
            return it, (S2, zeta, zp), A, mu
        x = nxt
        S1, S2, zeta, zp = sp.at(x)
    raise ConvergenceError(f"the root of the {j}-th eigenvalue of S did not converge")
