"""Numba kernels for the Lanczos-based spectral density (stochastic Lanczos quadrature).

Leaf kernels on arrays and scalars only, so ``cache=True`` holds (STYLE.md, Numba anchor).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def gaussian_mixture_density(nodes, weights, grid, width):
    """``rho(x) = sum_i w_i N(x; theta_i, width^2)`` on ``grid``: the smoothed SLQ density."""
    n_grid = grid.shape[0]
    out = np.zeros(n_grid)
    norm = 1.0 / (width * np.sqrt(2.0 * np.pi))
    inv = 1.0 / width
    for g in prange(n_grid):
        x = grid[g]
        s = 0.0
        for i in range(nodes.shape[0]):
            z = (x - nodes[i]) * inv
            if abs(z) < 40.0:
                s += weights[i] * np.exp(-0.5 * z * z)
        out[g] = s * norm
    return out


@njit(cache=True)
def quadrature_cdf(nodes, weights, points):
    """``F(x) = sum_{theta_i <= x} w_i`` at each of ``points`` (nodes need not be sorted)."""
    order = np.argsort(nodes)
    sorted_nodes = nodes[order]
    cumulative = np.cumsum(weights[order])
    out = np.empty(points.shape[0])
    for p in range(points.shape[0]):
        idx = np.searchsorted(sorted_nodes, points[p], side="right")
        out[p] = cumulative[idx - 1] if idx > 0 else 0.0
    return out


@njit(cache=True, parallel=True, fastmath=True)
def basis_coefficients(Q, W):
    """``Q^T W`` for a Fortran-ordered basis ``Q`` (``N x j``) and a block ``W`` (``N x b``).

    One column of ``Q`` per task, each dot product summed in a fixed order, so the result does
    not depend on the number of threads.  The Lanczos basis is read from memory (every Hessian
    product streams ``X`` through the caches), and on 2 threads this reads it faster than
    single-threaded BLAS; multithreaded BLAS would leave spinning threads behind.
    """
    N, b = W.shape
    j = Q.shape[1]
    H = np.empty((j, b))
    for c in prange(j):
        for k in range(b):
            s = 0.0
            for r in range(N):
                s += Q[r, c] * W[r, k]
            H[c, k] = s
    return H


#: rows per task of :func:`subtract_combination` (a fixed split: thread-count independent)
ROW_BLOCK = 1024


@njit(cache=True, parallel=True, fastmath=True)
def subtract_combination(Q, H, W):
    """``W -= Q H`` in place (``Q`` Fortran-ordered ``N x j``, ``W`` ``N x b``), by fixed
    blocks of rows."""
    N, b = W.shape
    j = Q.shape[1]
    for blk in prange((N + ROW_BLOCK - 1) // ROW_BLOCK):
        r0 = blk * ROW_BLOCK
        r1 = min(N, r0 + ROW_BLOCK)
        for k in range(b):
            for c in range(j):
                h = H[c, k]
                for r in range(r0, r1):
                    W[r, k] -= Q[r, c] * h
