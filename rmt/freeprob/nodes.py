"""Integration nodes for the laws of ``(zhat, D)``: Gauss-Hermite, Monte Carlo, adaptive 1-D.

Plain Gauss-Hermite is spectrally accurate for smooth integrands but loses digits (often several
percent) across kinks and jumps (indicators, ``min``, ``relu``, sign targets).  In one dimension
``adaptive_gauss_1d`` places Gauss-Legendre panels on ``[-L, L]`` and bisects every panel on which
the features of the integrand are not resolved, so panel edges converge onto the kinks.
"""

from __future__ import annotations

import numpy as np

from ..quadrature import GaussianNodes, gauss_hermite, monte_carlo

DEFAULT_ORDER = {1: 120, 2: 60, 3: 28}
MAX_QUADRATURE_DIMS = 3


def _gauss_legendre_panels(lo, hi, order):
    """Nodes and weights (times the Gaussian density) of Gauss-Legendre on each panel."""
    x, w = np.polynomial.legendre.leggauss(order)
    half = 0.5 * (hi - lo)
    mid = 0.5 * (hi + lo)
    pts = mid[:, None] + half[:, None] * x[None, :]
    wts = half[:, None] * w[None, :] * np.exp(-0.5 * pts**2) / np.sqrt(2.0 * np.pi)
    return pts, wts


def _panel_integrals(func, lo, hi, order):
    pts, wts = _gauss_legendre_panels(lo, hi, order)
    vals = func(pts.ravel()).reshape(pts.shape[0], order, -1)
    return np.einsum("pn,pnq->pq", wts, vals), pts, wts


def adaptive_gauss_1d(func, tol=1e-12, L=12.0, order=8, min_width=1e-9, max_panels=20000):
    """Adaptive Gauss-Legendre nodes for ``E[h(z)]``, ``z ~ N(0, 1)``, accurate across kinks.

    Parameters
    ----------
    func : callable
        ``func(z)`` for ``z`` of shape ``(N,)`` returns features of shape ``(N, q)`` (or ``(N,)``)
        whose integrals must be resolved, for example the entries of ``D(z)`` and their squares.
    tol : float
        Accept a panel when its integral and the sum over its two halves agree to ``tol`` times
        ``1 + max |E[feature]|``.
    L : float
        Truncation of the line; the neglected mass ``2 Phi(-L)`` is below 1e-32 for ``L = 12``.

    Returns
    -------
    GaussianNodes with ``kind = "adaptive"``; the weights sum to one up to the truncated mass.
    """
    edges = np.concatenate([np.linspace(-L, 0.0, 13), np.linspace(0.0, L, 13)[1:]])
    lo, hi = edges[:-1], edges[1:]
    acc_pts, acc_wts = [], []
    scale = 1.0 + np.max(np.abs(_panel_integrals(func, lo, hi, order)[0].sum(axis=0)))
    while lo.size:
        whole, _, _ = _panel_integrals(func, lo, hi, order)
        mid = 0.5 * (lo + hi)
        left, lp, lw = _panel_integrals(func, lo, mid, order)
        right, rp, rw = _panel_integrals(func, mid, hi, order)
        err = np.max(np.abs(whole - left - right), axis=1)
        done = (err <= tol * scale) | (hi - lo <= min_width)
        acc_pts += [lp[done].ravel(), rp[done].ravel()]
        acc_wts += [lw[done].ravel(), rw[done].ravel()]
        lo, hi = np.concatenate([lo[~done], mid[~done]]), np.concatenate([mid[~done], hi[~done]])
        if lo.size > max_panels:
            raise RuntimeError(
                f"adaptive_gauss_1d: more than {max_panels} open panels; the integrand is not "
                "piecewise smooth at tolerance {tol}"
            )
    pts = np.concatenate(acc_pts)
    order_idx = np.argsort(pts)
    return GaussianNodes(pts[order_idx][:, None], np.concatenate(acc_wts)[order_idx], "adaptive")


def gaussian_nodes(dims, nodes="auto", order=None, n_mc=200_000, rng=None) -> GaussianNodes:
    """Tensor Gauss-Hermite nodes up to ``dims = 3`` (``nodes="auto"``), Monte Carlo above."""
    if nodes not in ("auto", "quadrature", "monte_carlo"):
        raise ValueError(f"nodes must be 'auto', 'quadrature' or 'monte_carlo'; got {nodes!r}")
    if nodes == "auto":
        nodes = "quadrature" if dims <= MAX_QUADRATURE_DIMS else "monte_carlo"
    if nodes == "monte_carlo":
        return monte_carlo(dims, n_mc, rng)
    order = DEFAULT_ORDER.get(dims, 12) if order is None else order
    if order**dims > 2_000_000:
        raise ValueError(
            f"tensor Gauss-Hermite with order {order} in {dims} dimensions has {order**dims} "
            "nodes (limit 2e6); lower the order or use nodes='monte_carlo'"
        )
    return gauss_hermite(dims, order)
