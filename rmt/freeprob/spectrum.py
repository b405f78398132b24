"""Solvers for the bulk: ``stieltjes``, ``bulk_edges``, ``bulk_density`` (docs/theory.md section 3).

``check_law``, ``side_edge``, ``continue_real_branch`` and ``real_branch_start`` are the
building blocks that the outlier and BBP solvers share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmt.freeprob import scalar
from rmt.freeprob.edges import STEP_MAXIT, STEP_TOL, BulkEdges, find_fold
from rmt.freeprob.law import SpikeLaw
from rmt.freeprob.mp import (
    NEWTON_MAXIT,
    NEWTON_TOL,
    ConvergenceError,
    EdgeNotDetermined,
    MPSystem,
    NewtonState,
)


def check_law(law):
    """Raise TypeError unless ``law`` is an :class:`rmt.SpikeLaw` (every solver's first check)."""
    if not isinstance(law, SpikeLaw):
        raise TypeError(f"law must be an rmt.SpikeLaw; got {type(law).__name__}")


def side_edge(mp: MPSystem, side):
    """The edge of the bulk on ``side`` (-1 left, +1 right) of the system ``mp``.

    Returns ``(value, kind, G, iterations, residual, branch)`` of that edge, before the shift;
    ``branch``: the points of the real branch met on the way (``NewtonState``)."""
    law = mp.law
    idx = 0 if side < 0 else 1
    if law.unbounded[idx]:
        return side * np.inf, "unbounded", None, 0, 0.0, []
    # an atom at 0: too few samples for the nodes' ranks, or ranges that share a null space
    atom = mp.delta * law.expected_rank < law.m - 1e-12 or law.common_rank < law.m
    definite = (
        law.node_range[0] >= -1e-12 * law.scale
        if side < 0
        else law.node_range[1] <= 1e-12 * law.scale
    )
    if atom and definite:
        return 0.0, "atom", None, 0, 0.0, []
    # for m = 1 the Silverstein-Choi inverse settles most edges (scalar.py)
    if mp.m == 1 and scalar.ENABLED:
        found = scalar.fold(mp, side)
        if found is not None:
            pt, states = found
            return pt.zeta, "fold", pt.G, pt.iterations, pt.residual, states
    pt, kind, steps, path = find_fold(mp, side)
    return pt.zeta, kind, pt.G, steps, pt.residual, [p.state() for p in path]


def _side_or_undetermined(mp, side):
    """``side_edge``, or ``(nan, "undetermined", None, 0, 0.0, [], reason)`` when the edge on that
    side is not determined (the branch ran into the pole of a node short of the extreme of D)."""
    try:
        return side_edge(mp, side) + ("",)
    except EdgeNotDetermined as exc:
        return np.nan, "undetermined", None, 0, 0.0, [], str(exc)


def bulk_edges(law, delta, *, side=None) -> BulkEdges:
    """Edges ``(lo, hi)`` of the bulk of ``H``: folds of the real branch (docs/theory.md sec. 3.7).

    Each edge is the fold of the real branch of (MP) continued from ``-+inf`` and refined by
    Newton on the extended system.  An unbounded side (``law.unbounded``) gives ``-+inf``;
    ``lo = 0`` with kind ``"atom"`` when ``D >= 0`` and ``delta E[rank D] < m`` (the atom at 0
    is then the bottom of the spectrum).  An edge that the discretised law does not determine
    (the branch ran into the pole of an extreme node short of the extreme of ``D``,
    ``find_fold``) is ``nan`` with kind ``"undetermined"`` and the cause in ``reason``; the other
    side stays usable.

    Parameters
    ----------
    law : SpikeLaw
        The law of ``(zhat, D)``.
    delta : float
        Sample ratio ``n / d``.
    side : {None, "left", "right"}
        None: both edges.  ``"left"`` or ``"right"``: that edge alone (the same value, to the
        last bit, as with both); the other is ``nan`` with kind ``"not computed"``.

    Returns
    -------
    BulkEdges
        ``lo``, ``hi`` (shifted by ``law.shift``), their kinds, ``G`` at each edge and the points
        of the real branch met on the way.

    Raises
    ------
    EdgeNotDetermined
        When neither side is determined.
    ConvergenceError
        When no fold is found.

    Examples
    --------
    With ``D = 1`` the bulk is Marchenko-Pastur, with edges ``(1 -+ delta^{-1/2})^2``
    (docs/theory.md section 3.5):

    >>> import numpy as np
    >>> import rmt
    >>> law = rmt.SpikeLaw(np.zeros(1), np.ones(1))
    >>> edges = rmt.bulk_edges(law, 4.0)
    >>> print(f"{edges.lo:.6f} {edges.hi:.6f} {edges.lo_kind} {edges.hi_kind}")
    0.250000 2.250000 fold fold
    >>> print(f"{(1 - 4.0**-0.5) ** 2:.6f} {(1 + 4.0**-0.5) ** 2:.6f}")
    0.250000 2.250000
    """
    check_law(law)
    if side not in (None, "left", "right"):
        raise ValueError(f"side must be None, 'left' or 'right'; got {side!r}")
    mp = MPSystem(law, delta)
    skipped = (np.nan, "not computed", None, 0, 0.0, [], "")
    lo = skipped if side == "right" else _side_or_undetermined(mp, -1)
    hi = skipped if side == "left" else _side_or_undetermined(mp, +1)
    computed = [e for e in (lo, hi) if e[1] != "not computed"]
    if all(e[1] == "undetermined" for e in computed):
        which = "neither bulk edge is" if side is None else f"the {side} bulk edge is not"
        raise EdgeNotDetermined(f"{which} determined: {computed[0][6]}")
    return BulkEdges(
        lo=lo[0] + law.shift,
        hi=hi[0] + law.shift,
        lo_kind=lo[1],
        hi_kind=hi[1],
        G_lo=lo[2],
        G_hi=hi[2],
        delta=mp.delta,
        iterations=lo[3] + hi[3],
        residual=max(lo[4], hi[4]),
        branch_lo=lo[5],
        branch_hi=hi[5],
        reason="; ".join(r for r in (lo[6], hi[6]) if r),
    )


@dataclass
class StieltjesResult:
    """``G(zeta)`` (``m x m``, docs/theory.md (MP)) with its convergence record.

    ``np.asarray(result)`` is the matrix.  ``s = trace(G)/m`` is the scalar Stieltjes transform.
    """

    G: np.ndarray
    zeta: complex
    iterations: int
    residual: float
    converged: bool = True

    @property
    def s(self):
        return np.trace(self.G) / self.G.shape[0]

    def __array__(self, dtype=None, copy=None):
        return self.G if dtype is None else self.G.astype(dtype)


def _continue_complex(mp: MPSystem, zeta):
    """Continuation in ``Im zeta`` from far above down to ``zeta`` (``Im zeta > 0``)."""
    x, eta = zeta.real, zeta.imag
    top = mp.far() + abs(x)
    if eta >= top:
        st = mp.newton(zeta, -np.eye(mp.m) / zeta)
        if st is None:
            raise ConvergenceError(f"Newton failed at zeta = {zeta}")
        return st, st.iterations
    log_t, log_end = np.log(top), np.log(eta)
    z0 = complex(x, top)
    st = mp.newton(z0, -np.eye(mp.m, dtype=complex) / z0)
    total, step = st.iterations, 2.0
    while log_t > log_end:
        nxt = max(log_t - step, log_end)
        zn = complex(x, np.exp(nxt))
        Gp = mp.tangent(st)
        new = mp.newton(zn, st.G + Gp * (zn - st.zeta), maxit=STEP_MAXIT, monotone=True)
        if new is None or not _physical(new.G):
            step *= 0.5
            if step < 1e-10:
                raise ConvergenceError(f"continuation in Im(zeta) stalled at {zn}", partial=st)
            continue
        st, log_t, total = new, nxt, total + new.iterations
        step = min(step * 1.5, 4.0)
    return st, total


def _physical(G):
    """``Im G`` positive semidefinite, as for any Stieltjes transform with ``Im zeta > 0``."""
    imag = 0.5 * (G.imag + G.imag.T)
    return np.linalg.eigvalsh(imag).min() >= -1e-9 * (1.0 + np.abs(G).max())


def continue_real_branch(mp: MPSystem, start: NewtonState, target, side):
    """Continuation along the real branch from ``start`` to ``target`` (same side, outside)."""
    st, total = start, 0
    step = target - st.zeta.real
    if step == 0 and st.residual > NEWTON_TOL:  # a warm start converged to STEP_TOL only
        st = mp.newton(target, st.G)
        if st is None:
            raise ConvergenceError(f"Newton failed at the branch point {target}", partial=start)
        return st, st.iterations
    while st.zeta.real != target:
        nxt = target if abs(step) >= abs(target - st.zeta.real) else st.zeta.real + step
        Gp = mp.tangent(st)
        tol = NEWTON_TOL if nxt == target else STEP_TOL  # the way there needs no more
        pred = st.G + Gp * (nxt - st.zeta.real)
        new = mp.newton(nxt, pred, maxit=STEP_MAXIT, monotone=True, tol=tol)
        if new is None or not mp.admissible(new.G, side):
            step *= 0.5
            if abs(step) < 1e-14 * (1.0 + abs(target)):
                raise ConvergenceError(f"real-branch continuation stalled at {nxt}", partial=st)
            continue
        st, total = new, total + new.iterations
        step *= 2.0
    return st, total


def real_branch_start(mp: MPSystem, side):
    zeta0 = side * mp.far(side)
    st = mp.newton(zeta0, -np.eye(mp.m) / zeta0)
    if st is None:
        raise ConvergenceError(f"Newton failed at the starting point zeta = {zeta0:.3g}")
    return st


def stieltjes(law, delta, zeta, edges=None) -> StieltjesResult:
    """Matrix Stieltjes transform ``G(zeta)`` solving (MP) (docs/theory.md sections 3.2-3.3).

    For complex ``zeta``: Newton on the entries of ``G`` with continuation in ``Im zeta`` from far
    above (``G(conj zeta) = conj G(zeta)``, docs/theory.md section 3.8).  For real ``zeta``
    outside the bulk: continuation along the real branch from ``-+inf``.

    Parameters
    ----------
    law : SpikeLaw
        The law of ``(zhat, D)``.
    delta : float
        Sample ratio ``n / d``.
    zeta : complex or float
        The spectral argument; a real one must lie outside the bulk.
    edges : (float, float), optional
        The bulk edges ``(lo, hi)`` of the same law and ``delta`` (computed when not given).

    Returns
    -------
    StieltjesResult
        ``G`` (``m x m``), ``zeta``, the Newton iterations and the residual.

    Raises
    ------
    ValueError
        For a real ``zeta`` inside ``[lo, hi]``.
    ConvergenceError
        When Newton does not converge.

    Examples
    --------
    For ``D = 1``, ``G`` is the Stieltjes transform of Marchenko-Pastur with ratio
    ``gamma = 1/delta``, known in closed form:

    >>> import numpy as np
    >>> import rmt
    >>> law = rmt.SpikeLaw(np.zeros(1), np.ones(1))
    >>> res = rmt.stieltjes(law, 4.0, -1.0)
    >>> gamma, z = 1 / 4.0, -1.0
    >>> ref = (1 - gamma - z - np.sqrt((z - 1 - gamma) ** 2 - 4 * gamma)) / (2 * gamma * z)
    >>> print(f"{res.G[0, 0].real:.8f} {ref:.8f}")
    0.53112887 0.53112887
    """
    check_law(law)
    mp = MPSystem(law, delta)
    zeta = complex(zeta) - law.shift
    if zeta.imag != 0.0:
        st, its = _continue_complex(mp, complex(zeta.real, abs(zeta.imag)))
        G = st.G if zeta.imag > 0 else np.conj(st.G)
        return StieltjesResult(G, zeta + law.shift, its, st.residual)
    lo, hi = edges if edges is not None else bulk_edges(law, delta)
    x = zeta.real
    if lo - law.shift <= x <= hi - law.shift:
        raise ValueError(
            f"real zeta = {x + law.shift} lies in the bulk [{lo}, {hi}]; "
            "give zeta an imaginary part"
        )
    side = -1 if x < lo - law.shift else 1
    st0 = real_branch_start(mp, side)
    if side * x >= side * st0.zeta.real:  # beyond the starting point: G ~ -I/x is close
        far = mp.newton(x, -np.eye(mp.m) / x)
        if far is None:
            raise ConvergenceError(f"Newton failed at real zeta = {x + law.shift}")
        return StieltjesResult(far.G, complex(x + law.shift), far.iterations, far.residual)
    st, its = continue_real_branch(mp, st0, x, side)
    return StieltjesResult(st.G, complex(x + law.shift), its, st.residual)


@dataclass(kw_only=True)
class BulkDensity:
    """``rho(x) = Im tr G(x + i eta) / (m pi)`` on a grid, minus the atom's Lorentzian.

    ``atom`` is the mass at ``law.shift`` (``max(0, 1 - delta E[rank D] / m)``, docs/theory.md sec. 3).
    """

    x: np.ndarray
    density: np.ndarray
    atom: float
    eta: float
    iterations: int
    max_residual: float
    converged: bool = True


def _predictors(zeta, prev, older):
    """Starting points at ``zeta`` from the last two solved grid points, best first.

    ``prev``, ``older``: ``(state, tangent G')``.  Quadratic (``G'' ~ (G'_1 - G'_0) / (z_1 -
    z_0)``, error third order in the step), the tangent line (second order), then ``G``."""
    (st, tan) = prev
    h = zeta - st.zeta
    linear = st.G + tan * h
    out = [(linear, STEP_MAXIT), (st.G, NEWTON_MAXIT)]
    if older is not None and older[0].zeta != st.zeta:
        curv = (tan - older[1]) / (st.zeta - older[0].zeta)
        out.insert(0, (linear + 0.5 * curv * h * h, STEP_MAXIT))
    return out


def _warm_point(mp: MPSystem, zeta, prev, older=None):
    """``(state, iterations)`` at ``zeta`` by Newton from the previous grid points, or
    ``(None, 0)``: from each of :func:`_predictors` in turn, until Newton converges to a
    physical solution (``Im G >= 0``).  A good predictor saves one or two Newton steps, each a
    pass over the nodes."""
    if prev is None:
        return None, 0
    for G0, maxit in _predictors(zeta, prev, older):
        st = mp.newton(zeta, G0, maxit=maxit) if np.all(np.isfinite(G0)) else None
        if st is not None and _physical(st.G):
            return st, st.iterations
    return None, 0


def bulk_density(law, delta, x, eta=None) -> BulkDensity:
    """Density of the bulk at the points ``x`` and the mass of the atom at 0 (docs/theory.md sec. 3).

    Each point is solved at ``zeta = x + i eta`` (default ``eta = 1e-10 * law.scale``), warm
    started from a predictor through the previous two points (quadratic, else the tangent line,
    else the previous ``G``) and checked to be physical (``Im G >= 0``), otherwise by
    continuation in ``Im zeta``.  The atom contributes ``atom * eta / (pi (x^2 + eta^2))``, which
    is removed.  Raises ``ConvergenceError`` if a point does not converge.

    A quadrature or Monte-Carlo law is a finite sum of atoms of ``D``.  Where the bulk comes from
    nearly singular ``D`` (next to the atom at 0 when ``delta`` is small) the density of such a
    law at ``eta -> 0`` is a comb of narrow bumps, one per node, not the smooth density of the
    continuous law; pass an ``eta`` of the order of the grid step there (the density is then
    smoothed by a Cauchy kernel of width ``eta``), as the figures of ``rmt spectrum`` do.

    Parameters
    ----------
    law : SpikeLaw
        The law of ``(zhat, D)``.
    delta : float
        Sample ratio ``n / d``.
    x : float or array (p,)
        Finite points at which the density is evaluated.
    eta : float, optional
        Imaginary part of ``zeta`` (default ``1e-10 * law.scale``).

    Returns
    -------
    BulkDensity
        ``density`` at ``x``, the mass ``atom`` at 0, ``eta`` and the convergence record.

    Raises
    ------
    ValueError
        For ``x`` that is not a finite 1-D array.
    ConvergenceError
        When a point does not converge.

    Examples
    --------
    With ``D = 1`` the density is Marchenko-Pastur's (docs/theory.md section 3.5):

    >>> import numpy as np
    >>> import rmt
    >>> from rmt.freeprob import closed_forms
    >>> law = rmt.SpikeLaw(np.zeros(1), np.ones(1))
    >>> x = np.array([0.5, 1.0, 2.0])
    >>> res = rmt.bulk_density(law, 4.0, x)
    >>> print(np.round(res.density, 6), res.atom)
    [0.842169 0.616404 0.210542] 0.0
    >>> bool(np.allclose(res.density, closed_forms.mp_density(x, 4.0), atol=1e-8))
    True
    """
    check_law(law)
    mp = MPSystem(law, delta)
    xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
    if xs.ndim != 1 or not np.all(np.isfinite(xs)):
        raise ValueError("x must be a finite 1-D grid")
    eta = 1e-10 * law.scale if eta is None else float(eta)
    if not eta > 0:
        raise ValueError(f"eta must be > 0; got {eta}")
    atom = max(0.0, 1.0 - mp.delta * law.expected_rank / law.m)
    out, total, worst, prev, older = np.empty(xs.size), 0, 0.0, None, None
    for i, xi in enumerate(xs - law.shift):
        zeta = complex(xi, eta)
        st, its = _warm_point(mp, zeta, prev, older)
        if st is None:
            st, its = _continue_complex(mp, zeta)
            prev = None  # a restart: no history across it
        total, worst = total + its, max(worst, st.residual)
        older, prev = prev, (st, mp.tangent(st))
        s = np.trace(st.G) / law.m
        out[i] = s.imag / np.pi - atom * eta / (np.pi * (xi * xi + eta * eta))
    return BulkDensity(
        x=xs,
        density=np.clip(out, 0.0, None),
        atom=atom,
        eta=eta,
        iterations=total,
        max_residual=worst,
    )
