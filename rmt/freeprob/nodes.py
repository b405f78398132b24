"""Integration nodes for the laws of ``(zhat, D)``: Gauss-Hermite, Monte Carlo, adaptive 1-D.

Plain Gauss-Hermite is spectrally accurate for smooth integrands but loses digits (often several
percent) across kinks and jumps (indicators, ``min``, ``relu``, sign targets).  In one dimension
``adaptive_gauss_1d`` places Gauss-Legendre panels on ``[-L, L]`` and bisects every panel on which
the features of the integrand are not resolved, so panel edges converge onto the kinks.
"""

from __future__ import annotations

import numpy as np

from ..quadrature import GaussianNodes, gauss_hermite, monte_carlo

DEFAULT_ORDER = {1: 120, 2: 48, 3: 20}
MAX_QUADRATURE_DIMS = 3


def _gauss_legendre_panels(lo, hi, order):
    """Nodes and weights (times the Gaussian density) of Gauss-Legendre on each panel."""
    x, w = np.polynomial.legendre.leggauss(order)
    half = 0.5 * (hi - lo)
    mid = 0.5 * (hi + lo)
    pts = mid[:, None] + half[:, None] * x[None, :]
    wts = half[:, None] * w[None, :] * np.exp(-0.5 * pts**2) / np.sqrt(2.0 * np.pi)
    return pts, wts


def _panel_integrals(func, lo, hi, owner, order):
    pts, wts = _gauss_legendre_panels(lo, hi, order)
    vals = func(pts.ravel(), np.repeat(owner, order)).reshape(pts.shape[0], order, -1)
    return np.einsum("pn,pnq->pq", wts, vals), pts, wts


def _extrapolation_weights(order):
    """Weights giving the interpolant through the Gauss-Legendre nodes at -1 and +1."""
    x, _ = np.polynomial.legendre.leggauss(order)
    out = np.ones((2, order))
    for row, t in enumerate((-1.0, 1.0)):
        for n in range(order):
            others = np.delete(x, n)
            out[row, n] = np.prod((t - others) / (x[n] - others))
    return out


def _hidden_jump(func, lo, hi, owner, order):
    """A jump that no Gauss node of the panel sees: it sits between an end and the first node.

    The values just inside both ends must match the polynomial through the nodes."""
    pts, _ = _gauss_legendre_panels(lo, hi, order)
    vals = func(pts.ravel(), np.repeat(owner, order)).reshape(pts.shape[0], order, -1)
    ends = np.stack([lo + 1e-12 * (hi - lo), hi - 1e-12 * (hi - lo)], axis=1)
    end_vals = func(ends.ravel(), np.repeat(owner, 2)).reshape(lo.size, 2, -1)
    pred = np.einsum("en,pnq->peq", _extrapolation_weights(order), vals)
    return np.max(np.abs(end_vals - pred), axis=(1, 2)) > JUMP_TOL


#: panels are split off-centre: with a midpoint split, a jump at the centre gives the same
#: integral for the panel and for its halves (the symmetric rules see it identically)
SPLIT = 0.4374281195637
#: a mismatch between the end values and the interpolant through the nodes beyond this is a jump
JUMP_TOL = 1e-6


def _refine_panels(func, lo, hi, owner, order, tol, min_width, max_panels):
    """Bisect panels until each integral agrees with the sum over its halves (vectorised)."""
    pts_acc, wts_acc, own_acc = [], [], []
    while lo.size:
        small = hi - lo <= 1e-2
        out = []
        for sel, o in ((~small, order), (small, 3)):
            if not np.any(sel):
                continue
            a, h, ow = lo[sel], hi[sel], owner[sel]
            mid = a + SPLIT * (h - a)
            whole, _, _ = _panel_integrals(func, a, h, ow, o)
            left, lp, lw = _panel_integrals(func, a, mid, ow, o)
            right, rp, rw = _panel_integrals(func, mid, h, ow, o)
            err = np.max(np.abs(whole - left - right), axis=1)
            ok = err <= tol
            if np.any(ok):
                ok[ok] = ~_hidden_jump(func, a[ok], h[ok], ow[ok], o)
            done = ok | (h - a <= min_width)
            pts_acc += [lp[done].ravel(), rp[done].ravel()]
            wts_acc += [lw[done].ravel(), rw[done].ravel()]
            own_acc += [np.repeat(ow[done], o), np.repeat(ow[done], o)]
            out.append(
                (
                    np.concatenate([a[~done], mid[~done]]),
                    np.concatenate([mid[~done], h[~done]]),
                    np.tile(ow[~done], 2),
                )
            )
        lo, hi, owner = (np.concatenate([t[i] for t in out]) for i in range(3))
        if lo.size > max_panels:
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

    ``func(z, j)`` (arrays of equal length) returns features ``(N, q)``.  Each rule starts from
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
    ``f(u) = huber_delta``), so its error there is about 1e-3 relative (``adaptive_2d`` is exact
    for one outer coordinate, at tens of seconds).  ``func(points)`` gets ``(N, 1 + outer_dims)``.
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


def gaussian_nodes(dims, nodes="auto", order=None, n_mc=200_000, rng=None) -> GaussianNodes:
    """Tensor Gauss-Hermite nodes up to ``dims = 3`` (``nodes="auto"``), Monte Carlo above.

    Monte Carlo nodes are drawn from ``numpy.random.default_rng(rng)``; ``rng=None`` means the
    fixed seed ``DEFAULT_MC_SEED``, so that laws (and their edges) are reproducible by default.
    Pass a seed or a ``Generator`` for independent draws."""
    if nodes not in ("auto", "quadrature", "monte_carlo"):
        raise ValueError(f"nodes must be 'auto', 'quadrature' or 'monte_carlo'; got {nodes!r}")
    if nodes == "auto":
        nodes = "quadrature" if dims <= MAX_QUADRATURE_DIMS else "monte_carlo"
    if nodes == "monte_carlo":
        return monte_carlo(dims, n_mc, DEFAULT_MC_SEED if rng is None else rng)
    order = DEFAULT_ORDER.get(dims, 12) if order is None else order
    if order**dims > 2_000_000:
        raise ValueError(
            f"tensor Gauss-Hermite with order {order} in {dims} dimensions has {order**dims} "
            "nodes (limit 2e6); lower the order or use nodes='monte_carlo'"
        )
    return gauss_hermite(dims, order)
