"""Integration nodes for the laws of ``(zhat, D)``: Gauss-Hermite, Monte Carlo, adaptive 1-D.

Plain Gauss-Hermite is spectrally accurate for smooth integrands but loses digits (often several
percent) across kinks and jumps (indicators, ``min``, ``relu``, sign targets).  In one dimension
``adaptive_gauss_1d`` places Gauss-Legendre panels on ``[-L, L]`` and bisects every panel on which
the features of the integrand are not resolved, so panel edges converge onto the kinks.
"""

from __future__ import annotations

import functools

import numpy as np

from rmt.problem.quadrature import QMC_NODES, GaussianNodes, gauss_hermite, monte_carlo, sobol

DEFAULT_ORDER = {1: 120, 2: 48, 3: 20}
MAX_QUADRATURE_DIMS = 3


@functools.lru_cache(maxsize=None)
def _legendre(order):
    """Gauss-Legendre nodes and weights on ``[-1, 1]`` (cached: the refinement asks often)."""
    return np.polynomial.legendre.leggauss(order)


def _gauss_legendre_panels(lo, hi, order):
    """Nodes and weights (times the Gaussian density) of Gauss-Legendre on each panel."""
    x, w = _legendre(order)
    half = 0.5 * (hi - lo)
    mid = 0.5 * (hi + lo)
    pts = mid[:, None] + half[:, None] * x[None, :]
    wts = half[:, None] * w[None, :] * np.exp(-0.5 * pts**2) / np.sqrt(2.0 * np.pi)
    return pts, wts


def _evaluate(func, pieces):
    """``func`` at the points of several sets of ``(points (P, o), owner (P,))`` in one call;
    returns the values of each set as ``(P, o, q)``.  ``func`` is pointwise, so its values do
    not depend on the batch they come in."""
    pts = np.concatenate([p.ravel() for p, _ in pieces])
    own = np.concatenate([np.repeat(ow, p.shape[1]) for p, ow in pieces])
    vals = func(pts, own)
    vals = vals.reshape(pts.size, -1)
    out, start = [], 0
    for p, _ in pieces:
        out.append(vals[start : start + p.size].reshape(p.shape[0], p.shape[1], vals.shape[1]))
        start += p.size
    return out


@functools.lru_cache(maxsize=None)
def _extrapolation_weights(order):
    """Weights giving the interpolant through the Gauss-Legendre nodes at -1 and +1."""
    x, _ = np.polynomial.legendre.leggauss(order)
    out = np.ones((2, order))
    for row, t in enumerate((-1.0, 1.0)):
        for n in range(order):
            others = np.delete(x, n)
            out[row, n] = np.prod((t - others) / (x[n] - others))
    return out


def _end_points(lo, hi):
    """Points just inside both ends of each panel, ``(P, 2)``."""
    return np.stack([lo + 1e-12 * (hi - lo), hi - 1e-12 * (hi - lo)], axis=1)


def _jump_seen(vals, end_vals, order):
    """A jump that no Gauss node of the panel sees: it sits between an end and the first node.

    The values just inside both ends (``end_vals``, ``(P, 2, q)``) must match the polynomial
    through the node values ``vals`` (``(P, order, q)``)."""
    pred = np.einsum("en,pnq->peq", _extrapolation_weights(order), vals)
    return np.max(np.abs(end_vals - pred), axis=(1, 2)) > JUMP_TOL


#: panels are split off-centre: with a midpoint split, a jump at the centre gives the same
#: integral for the panel and for its halves (the symmetric rules see it identically)
SPLIT = 0.4374281195637
#: a mismatch between the end values and the interpolant through the nodes beyond this is a jump
JUMP_TOL = 1e-6
#: panels at most this wide use the 3-point rule
SMALL_PANEL = 1e-2


class _Open:
    """The open panels of a refinement, with what is known of them from the round before:
    ``order[p] > 0`` when the integral ``integrals[p]`` and the node values ``V[p, :order[p]]`` of the
    rule of that order on the whole panel are known."""

    def __init__(self, lo, hi, owner, order=None, integrals=None, V=None):
        self.lo, self.hi, self.owner = lo, hi, owner
        self.order = np.zeros(lo.size, dtype=np.int64) if order is None else order
        self.integrals, self.V = integrals, V


def _round_halves(func, panels, sel_orders):
    """Integrals of the whole panels and of their halves, for each group ``(sel, o)`` of open
    panels, from one call of ``func``; the whole panel's from the round before when known."""
    pieces, groups = [], []
    for sel, o in sel_orders:
        a, h, ow = panels.lo[sel], panels.hi[sel], panels.owner[sel]
        mid = a + SPLIT * (h - a)
        known = panels.order[sel] == o
        wp, ww = _gauss_legendre_panels(a[~known], h[~known], o)
        lp, lw = _gauss_legendre_panels(a, mid, o)
        rp, rw = _gauss_legendre_panels(mid, h, o)
        pieces += [(wp, ow[~known]), (lp, ow), (rp, ow)]
        groups.append(dict(sel=sel, o=o, a=a, h=h, ow=ow, mid=mid, known=known, ww=ww))
        groups[-1].update(lp=lp, lw=lw, rp=rp, rw=rw)
    vals = _evaluate(func, pieces)
    for k, g in enumerate(groups):
        wv, lv, rv = vals[3 * k : 3 * k + 3]
        q = lv.shape[2]
        g["whole"], g["V"] = np.empty((g["a"].size, q)), np.empty((g["a"].size, g["o"], q))
        if np.any(g["known"]):
            g["whole"][g["known"]] = panels.integrals[g["sel"]][g["known"]]
            g["V"][g["known"]] = panels.V[g["sel"]][g["known"], : g["o"]]
        g["whole"][~g["known"]] = np.einsum("pn,pnq->pq", g["ww"], wv)
        g["V"][~g["known"]] = wv
        g["left"], g["lv"] = np.einsum("pn,pnq->pq", g["lw"], lv), lv
        g["right"], g["rv"] = np.einsum("pn,pnq->pq", g["rw"], rv), rv
    return groups


def _round_accept(func, groups, tol, min_width):
    """``done`` for each group: the halves agree with the whole to ``tol`` and no jump hides
    between an end and the first node (one call of ``func`` at the ends), or the panel is
    narrower than ``min_width``."""
    for g in groups:
        g["ok"] = np.max(np.abs(g["whole"] - g["left"] - g["right"]), axis=1) <= tol
    pieces = [(_end_points(g["a"][g["ok"]], g["h"][g["ok"]]), g["ow"][g["ok"]]) for g in groups]
    if any(p.shape[0] for p, _ in pieces):
        ends = _evaluate(func, pieces)
        for g, e in zip(groups, ends):
            if e.shape[0]:
                g["ok"][g["ok"]] = ~_jump_seen(g["V"][g["ok"]], e, g["o"])
    for g in groups:
        g["done"] = g["ok"] | (g["h"] - g["a"] <= min_width)


def _next_open(groups, width, q):
    """The halves of the panels not done, with their integrals and node values."""
    parts = []
    for g in groups:
        nd = ~g["done"]
        V = np.zeros((2 * int(nd.sum()), width, q))
        V[:, : g["o"]] = np.concatenate([g["lv"][nd], g["rv"][nd]])
        parts.append(
            (
                np.concatenate([g["a"][nd], g["mid"][nd]]),
                np.concatenate([g["mid"][nd], g["h"][nd]]),
                np.tile(g["ow"][nd], 2),
                np.full(V.shape[0], g["o"], dtype=np.int64),
                np.concatenate([g["left"][nd], g["right"][nd]]),
                V,
            )
        )
    return _Open(*(np.concatenate([p[i] for p in parts]) for i in range(6)))


def _refine_panels(func, lo, hi, owner, order, tol, min_width, max_panels):
    """Bisect panels until each integral agrees with the sum over its halves (vectorised).

    A round calls ``func`` twice: at the halves of every open panel (and at the whole panel
    when its integral is not known yet), then just inside the ends of the panels that pass.
    A half that stays open is the next round's whole panel: its integral and node values are
    kept when its rule (``order``, or 3 at most ``SMALL_PANEL`` wide) stays the same."""
    pts_acc, wts_acc, own_acc = [], [], []
    panels = _Open(lo, hi, owner)
    while panels.lo.size:
        small = panels.hi - panels.lo <= SMALL_PANEL
        sel_orders = [(sel, o) for sel, o in ((~small, order), (small, 3)) if np.any(sel)]
        groups = _round_halves(func, panels, sel_orders)
        _round_accept(func, groups, tol, min_width)
        for g in groups:
            done, o = g["done"], g["o"]
            pts_acc += [g["lp"][done].ravel(), g["rp"][done].ravel()]
            wts_acc += [g["lw"][done].ravel(), g["rw"][done].ravel()]
            own_acc += [np.repeat(g["ow"][done], o), np.repeat(g["ow"][done], o)]
        panels = _next_open(groups, max(order, 3), groups[0]["lv"].shape[2])
        if panels.lo.size > max_panels:
            raise RuntimeError(
                f"adaptive Gauss-Legendre: more than {max_panels} open panels; "
                f"the integrand is not piecewise smooth at tolerance {tol}"
            )
    # adjacent halves sum to the panel integrals
    return np.concatenate(pts_acc), np.concatenate(wts_acc), np.concatenate(own_acc)


def adaptive_gauss_batch(
    func,
    n_outer,
    tol=1e-10,
    L=10.0,
    order=8,
    n_base=12,
    min_width=1e-8,
    max_panels=400_000,
):
    """Adaptive Gauss-Legendre rules for ``E[h(z, j)]``, ``z ~ N(0, 1)``, for ``j < n_outer`` at once.

    ``func(z, j)`` (arrays of equal length) returns features ``(N, q)``, row by row (a row's
    features depend on its own ``z`` and ``j`` only: points are evaluated in batches that mix
    panels, halves and owners, two calls a round).  Each rule starts from
    ``n_base`` panels on ``[-L, L]`` and bisects a panel until its integral and the sum over its
    halves agree to ``tol``; panel edges converge onto kinks and jumps.  Panels narrower than
    ``1e-2`` use the 3-point rule, so each resolved jump costs about a hundred nodes.
    Returns ``(z, weights, owner)``: the rule of outer node ``j`` is ``owner == j``.
    """
    edges = np.linspace(-L, L, n_base + 1)
    lo = np.tile(edges[:-1], n_outer)
    hi = np.tile(edges[1:], n_outer)
    owner = np.repeat(np.arange(n_outer), n_base)
    return _refine_panels(func, lo, hi, owner, order, tol, min_width, max_panels)


def adaptive_gauss_1d(func, tol=1e-12, L=12.0, order=8, min_width=1e-9):
    """Adaptive Gauss-Legendre nodes for ``E[h(z)]``, ``z ~ N(0, 1)``, accurate across kinks.

    ``func(z)`` for ``z`` of shape ``(N,)`` returns features ``(N, q)`` whose integrals must be
    resolved, for example the entries of ``D(z)`` and their squares.  The neglected mass
    ``2 Phi(-L)`` is below 1e-32 for ``L = 12``.  Returns ``GaussianNodes`` of kind ``"adaptive"``.
    """
    z, w, _ = adaptive_gauss_batch(lambda t, j: func(t), 1, tol, L, order, 24, min_width)
    idx = np.argsort(z)
    return GaussianNodes(z[idx][:, None], w[idx], "adaptive")


def nested_nodes(func, outer_dims, outer_order, tol=1e-10):
    """Adaptive Gauss-Legendre in the first coordinate, for each node of an outer rule.

    For a single-index target the kinks of the labels, of the loss (Huber) and of preprocessings
    lie along the ``Theta*`` coordinate for each value of the others; there the adaptive rule
    resolves them.  The outer rule is tensor Gauss-Hermite of order ``outer_order``: the inner
    integral has square-root singularities in the outer coordinates where kinks appear (e.g. at
    ``f(u) = huber_delta``), so its error is algebraic in the order, not spectral (its size
    on ``E[D]`` is in docs/theory.md section 3.9).
    ``adaptive_2d`` is exact for one outer coordinate, but slow.  ``func(points)``
    gets ``(N, 1 + outer_dims)``.
    """
    outer = gauss_hermite(outer_dims, outer_order)
    keep = outer.weights > 0.0  # high orders: the extreme weights underflow to 0
    outer = GaussianNodes(outer.points[keep], outer.weights[keep], outer.kind)

    def inner(z, j):
        v = func(np.concatenate([z[:, None], outer.points[j]], axis=1)).reshape(z.size, -1)
        t = v / (1.0 + np.abs(v))
        return np.concatenate([t, (z * z)[:, None] * t], axis=1)

    z, w, owner = adaptive_gauss_batch(inner, outer.points.shape[0], tol)
    pts = np.concatenate([z[:, None], outer.points[owner]], axis=1)
    return GaussianNodes(pts, w * outer.weights[owner], "nested")


#: the fold test of a nested rule (``inner_kink_counts``): outer Gauss-Hermite order, points
#: along the inner coordinate on ``[-FOLD_RANGE, FOLD_RANGE]``, the outer weights it looks at
FOLD_OUTER_ORDER, FOLD_GRID, FOLD_RANGE, FOLD_MIN_WEIGHT = 8, 801, 6.0, 1e-6


def inner_kink_counts(kinks, outer_dims, order=FOLD_OUTER_ORDER, n_grid=FOLD_GRID, L=FOLD_RANGE):
    """Kinks along the first coordinate at the nodes of an outer rule: ``(counts, points)`` for
    the outer Gauss-Hermite nodes of order ``order`` whose weight is at least
    ``FOLD_MIN_WEIGHT`` times the largest.

    ``kinks(points)`` (``points`` of shape ``(N, 1 + outer_dims)`` as in ``nested_nodes``)
    returns ``(N, q)`` functions whose zeros are the kinks and jumps of the integrand
    (``rmt.TwoLayerNet.kinks``); a count is the number of their sign changes on a grid of
    ``n_grid`` points along the first coordinate.  Where the count differs between outer nodes,
    kinks appear or merge inside the outer domain (a fold: ``f(u) = +-huber_delta`` at the
    vertex of a quadratic target), and there the inner integral has a square-root singularity
    that an outer Gauss-Hermite rule does not resolve (``rmt.freeprob.law._nested_checked``).
    Two kinks closer than a grid step count as none: that happens next to a fold."""
    outer = gauss_hermite(outer_dims, order)
    op = outer.points[outer.weights >= FOLD_MIN_WEIGHT * outer.weights.max()]
    z = np.linspace(-L, L, n_grid)
    pts = np.concatenate([np.tile(z, op.shape[0])[:, None], np.repeat(op, n_grid, axis=0)], 1)
    v = np.asarray(kinks(pts)).reshape(op.shape[0], n_grid, -1)
    pos = v > 0.0  # not signbit: a kink function that is 0 (+0 or -0) has no sign change
    changes = pos[:, 1:] != pos[:, :-1]
    return changes.sum(axis=(1, 2)), op


def _features(v, z):
    t = v / (1.0 + np.abs(v))  # bounded, with the kinks and jumps of v
    return np.concatenate([t, (z * z)[:, None] * t], axis=1)


def adaptive_2d(func, tol=1e-10):
    """Two-level adaptive rule on ``R^2`` (accurate to ``tol`` across kinks, but slow: the
    outer rule bisects around the square-root singularities of the inner integrals)."""

    def inner_rules(g):
        def inner(z, j):
            return _features(func(np.stack([z, g[j]], axis=1)).reshape(z.size, -1), z)

        return adaptive_gauss_batch(inner, g.size, tol)

    def outer(g, _j):
        z, w, owner = inner_rules(g)
        feats = _features(func(np.stack([z, g[owner]], axis=1)).reshape(z.size, -1), z)
        return np.stack([np.bincount(owner, w * f, minlength=g.size) for f in feats.T], axis=1)

    g, wg, _ = adaptive_gauss_batch(outer, 1, tol)
    z, w, owner = inner_rules(g)
    return GaussianNodes(np.stack([z, g[owner]], axis=1), w * wg[owner], "nested")


#: the seed of Monte Carlo nodes when no ``rng`` is given: a law is the same on every call
DEFAULT_MC_SEED = 20240607


#: i.i.d. draws of ``nodes="monte_carlo"`` when ``n_mc`` is not given
DEFAULT_MC_NODES = 200_000


def random_kind(n_mc):
    """The random nodes that ``"auto"`` means: ``"qmc"``, or ``"monte_carlo"`` when the caller
    gave a number ``n_mc`` of i.i.d. draws."""
    return "qmc" if n_mc is None else "monte_carlo"


def gaussian_nodes(
    dims, nodes="auto", order=None, n_mc=None, rng=None, n_qmc=QMC_NODES
) -> GaussianNodes:
    """Tensor Gauss-Hermite nodes up to ``dims = 3`` (``nodes="auto"``), randomised QMC above.

    ``"qmc"``: ``n_qmc`` scrambled Sobol nodes in independent replicates (``rmt.problem.quadrature.sobol``);
    ``"monte_carlo"``: ``n_mc`` i.i.d. draws (default ``DEFAULT_MC_NODES``).  An ``n_mc`` given
    with ``nodes="auto"`` asks for those i.i.d. draws above three dimensions, in place of the
    QMC nodes.  Both come from
    ``numpy.random.default_rng(rng)``;
    ``rng=None`` means the fixed seed ``DEFAULT_MC_SEED``, so that laws (and their edges) are
    reproducible by default.  Pass a seed or a ``Generator`` for independent draws."""
    if nodes not in ("auto", "quadrature", "monte_carlo", "qmc"):
        raise ValueError(
            f"nodes must be 'auto', 'quadrature', 'monte_carlo' or 'qmc'; got {nodes!r}"
        )
    if nodes == "auto":
        nodes = "quadrature" if dims <= MAX_QUADRATURE_DIMS else random_kind(n_mc)
    seed = DEFAULT_MC_SEED if rng is None else rng
    if nodes == "monte_carlo":
        return monte_carlo(dims, DEFAULT_MC_NODES if n_mc is None else n_mc, seed)
    if nodes == "qmc":
        return sobol(dims, n_qmc, seed)
    order = DEFAULT_ORDER.get(dims, 12) if order is None else order
    if order**dims > 2_000_000:
        raise ValueError(
            f"tensor Gauss-Hermite with order {order} in {dims} dimensions has {order**dims} "
            "nodes (limit 2e6); lower the order or use nodes='qmc'"
        )
    return gauss_hermite(dims, order)


#: the aligned rule (:func:`aligned_nodes`): the inner coordinate is cut at ``+-ALIGNED_RANGE``
#: (Gaussian mass ``2 Phi(-7.5) = 6e-14`` left out) into Gauss-Legendre panels of order
#: ``ALIGNED_ORDER`` at most ``ALIGNED_WIDTH / max(scale, 1)`` wide, and at every kink
ALIGNED_RANGE, ALIGNED_WIDTH, ALIGNED_ORDER = 7.5, 2.5, 10
#: the outer (``Theta*``) coordinate of the aligned rule is cut at ``+-8`` (mass ``1.2e-15``)
ALIGNED_OUTER_RANGE = 8.0
#: the kinks along the inner coordinate are bracketed on a grid of this step (divided by
#: ``max(scale, 1)``), then the brackets shrink by Illinois steps (regula falsi that halves the
#: value kept at a stale end: superlinear on a smooth function) with a bisection after
#: ``STALL_STEPS`` steps that did not halve a bracket (a kink function flat on one side, as
#: Huber's where a ReLU unit is off, defeats regula falsi: 12 Illinois steps left zeros 1e-3
#: off there), until every bracket is narrower than ``KINK_TOL`` or closed on an exact zero
#: (``KINK_STEPS`` steps at most)
KINK_STEP, KINK_STEPS, KINK_TOL = 0.125, 100, 1e-13
#: steps of the kink search after which a bracket that has not halved is bisected
STALL_STEPS = 3
#: the largest kink grid step when the zeros of a kink function are known to lie apart
#: (``aligned_nodes``'s ``separation``)
KINK_SEPARATED_STEP = 0.5


def kink_roots(kinks, z, scale=1.0, span=ALIGNED_RANGE, step=None):
    """Zeros of the kink functions along the second coordinate, for each first coordinate.

    ``kinks(points)`` takes points ``(N, 2)`` and returns ``(N, q)`` functions whose zeros are
    the jumps and kinks of the integrand (``rmt.TwoLayerNet.kinks``).  Sign changes on a grid of
    step ``step`` (default ``KINK_STEP / max(scale, 1)``) over ``[-span, span]`` bracket the
    zeros, which safeguarded Illinois steps then narrow to ``KINK_TOL``.  Returns
    ``(owner, roots)``: the index into ``z`` of each zero and its position.  Two zeros of one
    function within one grid step are not seen (for ``m = 1`` and a monotone activation the two
    Huber kinks lie ``2 huber_delta`` apart in ``f``: ``law._kink_separation``)."""
    P = z.size
    step = KINK_STEP / max(scale, 1.0) if step is None else step
    grid = np.linspace(-span, span, int(np.ceil(2.0 * span / step)) + 1)
    n = grid.size
    v = np.asarray(kinks(np.stack([np.repeat(z, n), np.tile(grid, P)], axis=1)), dtype=float)
    v = v.reshape(P, n, -1)
    pos = v > 0.0  # not signbit: a kink function that is 0 (+0 or -0) has no sign change
    owner, cell, col = np.nonzero(pos[:, 1:] != pos[:, :-1])
    if owner.size == 0:
        return owner, np.empty(0)
    lo, hi = grid[cell], grid[cell + 1]
    flo, fhi = v[owner, cell, col], v[owner, cell + 1, col]
    slo = flo > 0.0  # the sign at the low end; the high end has the other
    glo, ghi = flo.copy(), fhi.copy()  # the values regula falsi uses (Illinois-scaled)
    zo = z[owner]
    last = np.zeros(owner.size, dtype=np.int8)  # the end the last step moved: -1 low, +1 high
    bisect = np.zeros(owner.size, dtype=bool)
    back = [hi - lo] * STALL_STEPS  # the widths of the brackets over the last steps
    for _ in range(KINK_STEPS):
        act = np.flatnonzero(hi - lo > KINK_TOL)  # the brackets still open
        if act.size == 0:
            break
        a, b, ga, gb = lo[act], hi[act], glo[act], ghi[act]
        width = b - a
        den = gb - ga
        c = a - ga * width / np.where(den != 0.0, den, 1.0)
        c = np.where(bisect[act] | (den == 0.0) | ~(c > a) | ~(c < b), 0.5 * (a + b), c)
        fc = np.asarray(kinks(np.stack([zo[act], c], axis=1)), dtype=float)
        fc = fc[np.arange(act.size), col[act]]
        low = (fc > 0.0) == slo[act]  # c replaces the low end
        was = last[act]
        glo[act] = np.where(low, fc, np.where(was == 1, 0.5 * ga, ga))
        ghi[act] = np.where(low, np.where(was == -1, 0.5 * gb, gb), fc)
        exact = fc == 0.0  # a zero to the function's own precision: the bracket closes on it
        lo[act] = np.where(low | exact, c, a)
        hi[act] = np.where(low & ~exact, b, c)
        last[act] = np.where(low, -1, 1)
        back = back[1:] + [hi - lo]
        bisect = back[-1] > 0.5 * back[0]  # STALL_STEPS steps did not halve the bracket
    return owner, 0.5 * (lo + hi)


def aligned_inner(kinks, z, scale=1.0, step=None, find_zeros=None):
    """The inner rule of :func:`aligned_nodes` at each first coordinate ``z`` (``P``):
    ``(points, weights)``, both ``(P, n)``: Gauss-Legendre panels over ``[-ALIGNED_RANGE,
    ALIGNED_RANGE]`` cut at every kink (:func:`kink_roots`, or ``find_zeros(z) -> (owner, roots)``
    in its place when the zeros are known in closed form), weights times the Gaussian density.
    Every row has the same number of panels: the rows with fewer kinks get empty panels (zero
    weights) at the end of the range."""
    P, span = z.size, ALIGNED_RANGE
    width = ALIGNED_WIDTH / max(scale, 1.0)
    cuts = np.linspace(-span, span, int(np.ceil(2.0 * span / width)) + 1)
    if find_zeros is None:
        owner, roots = kink_roots(kinks, z, scale, step=step)
    else:
        owner, roots = find_zeros(z)
    counts = np.bincount(owner, minlength=P)
    extra = int(counts.max(initial=0))
    E = np.full((P, cuts.size + extra), span)
    E[:, : cuts.size] = cuts
    if extra:
        slot = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts)
        E[owner, cuts.size + slot] = roots
    E.sort(axis=1)
    x, w = _legendre(ALIGNED_ORDER)
    half = 0.5 * (E[:, 1:] - E[:, :-1])
    pts = 0.5 * (E[:, 1:] + E[:, :-1])[..., None] + half[..., None] * x
    wts = half[..., None] * w * np.exp(-0.5 * pts**2) / np.sqrt(2.0 * np.pi)
    return pts.reshape(P, -1), wts.reshape(P, -1)


def aligned_nodes(func, kinks, scale=1.0, tol=1e-10, separation=None, find_zeros=None):
    """Nodes for ``E[h(z, t)]``, ``(z, t) ~ N(0, I_2)``, with every kink of ``h`` on a panel edge
    along ``t``.

    For a noiseless single-index target and one unit (``u = M z + c t``) the kinks of ``D`` lie,
    at fixed ``z`` (the ``Theta*`` coordinate), at the zeros of ``kinks`` along ``t``
    (``|f(u) - g(z)| = huber_delta``, ReLU's ``u = 0``): the inner rule
    (:func:`aligned_inner`) cuts its Gauss-Legendre panels there, so it is spectrally accurate.
    The outer integrand in ``z`` is then smooth except at the kinks of the target ``g`` and
    where a kink enters the range steeply; an adaptive Gauss-Legendre rule
    (:func:`adaptive_gauss_batch`, tolerance ``tol`` on the inner integrals of ``D``, ``t D``,
    ``t^2 D`` against ``1, z, z^2``) resolves those.  ``scale`` is ``c``, the spread of ``u``
    along ``t``: the features of ``D`` sit at ``1/c`` there, and the panels and the kink grid
    shrink with it.  ``separation``, when known, is a lower bound on the distance along ``t``
    between two zeros of one kink function: the kink grid's step is then half of it (at most
    ``KINK_SEPARATED_STEP``), in place of the default ``KINK_STEP / max(scale, 1)``.
    ``func(points)`` and ``kinks(points)`` get ``(N, 2)`` points ``(z, t)``; ``find_zeros``, when
    given, returns the zeros of ``kinks`` along ``t`` in closed form (``law._kink_positions``) and
    replaces the grid search.
    Measured on ``E[D]`` and ``E[z^2 D]`` against closed forms: 2e-11 (softplus/Huber) and
    3e-7 (tanh/Huber, ``Q = 4, 9``) relative (docs/theory.md section 3.9)."""

    step = None if separation is None else min(KINK_SEPARATED_STEP, 0.5 * separation)
    rules = {}  # the inner rule of every outer point evaluated, for the nodes kept at the end

    def outer(z, _j):
        t, v = aligned_inner(kinks, z, scale, step, find_zeros)
        rules.update(zip(z.tolist(), zip(t, v)))
        P, n = t.shape
        vals = func(np.stack([np.repeat(z, n), t.ravel()], axis=1)).reshape(P, n, -1)
        b = vals / (1.0 + np.abs(vals))  # bounded, with the jumps of the values
        h0 = np.einsum("pn,pnq->pq", v, b)
        h1 = np.einsum("pn,pnq->pq", v * t, b)
        h2 = np.einsum("pn,pnq->pq", v * t * t, b)
        zc = z[:, None]
        return np.concatenate([h0, h2, zc * zc * h0, zc * h1], axis=1)

    z, w, _ = adaptive_gauss_batch(outer, 1, tol, L=ALIGNED_OUTER_RANGE)
    kept = [rules[x] for x in z.tolist()]  # every kept outer node was evaluated
    n = max(r[0].size for r in kept)  # batches with more kinks have more (empty) panels
    t = np.full((z.size, n), ALIGNED_RANGE)
    v = np.zeros((z.size, n))
    for row, (tr, vr) in enumerate(kept):
        t[row, : tr.size], v[row, : vr.size] = tr, vr
    weights = (w[:, None] * v).ravel()
    points = np.stack([np.repeat(z, t.shape[1]), t.ravel()], axis=1)
    keep = weights > 0.0  # the empty panels
    return GaussianNodes(points[keep], weights[keep], "aligned")
