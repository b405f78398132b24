"""Numba kernels of our Lanczos engine (basis projections, the block's QR) and of the spectral
density (stochastic Lanczos quadrature).

Leaf kernels on arrays and scalars only, so ``cache=True`` holds (STYLE.md, Numba anchor).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from rmt.kernels.hessian import dots4


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


# Every kernel below takes the Lanczos basis and the blocks as row-major *transposes*:
# ``Qt = Q.T`` (``j x N``) of the Fortran-ordered basis, ``Wt = W.T`` (``b x N``) of a block.
# They are C-contiguous whatever ``j`` and ``b`` (an ``N x 1`` column is C- and F-contiguous at
# once, so Numba typed the plain arrays ``C`` for one column and ``F`` for more), so each
# kernel compiles once instead of once per layout (each compilation is slow:
# benchmarks/RESULTS.md).


@njit(cache=True, parallel=True, fastmath=True)
def basis_coefficients(Qt, Wt, first):
    """``Q^T W`` over the basis vectors ``first..j-1``: ``Qt`` (``j x N``) and ``Wt``
    (``b x N``) row-major; returns ``(j - first) x b``.

    Four basis vectors per task (each entry of ``W`` loaded once for four products), each
    dot product summed in a fixed order, so the result does not depend on the number of
    threads.  The Lanczos basis is read from memory (every Hessian product streams ``X``
    through the caches), so this is a bandwidth-bound parallel read; multithreaded BLAS would
    leave spinning threads behind.
    """
    b, N = Wt.shape
    j = Qt.shape[0] - first
    H = np.empty((j, b))
    for g in prange((j + 3) // 4):
        c0 = 4 * g
        if c0 + 4 <= j:
            for k in range(b):
                H[c0, k], H[c0 + 1, k], H[c0 + 2, k], H[c0 + 3, k] = dots4(Qt, first + c0, Wt[k], N)
        else:
            for c in range(c0, j):
                q = Qt[first + c]
                for k in range(b):
                    w = Wt[k]
                    s = 0.0
                    for r in range(N):
                        s += q[r] * w[r]
                    H[c, k] = s
    return H


#: rows per task of :func:`subtract_combination` (a fixed split: thread-count independent)
ROW_BLOCK = 1024


@njit(cache=True, parallel=True, fastmath=True)
def subtract_combination(Qt, H, Wt, first):
    """``W -= Q[:, first:] H`` in place (``Qt`` ``j x N`` and ``Wt`` ``b x N`` row-major), by
    fixed blocks of rows of ``W``; returns the squared column norms of the new ``W`` per row
    block (``blocks x b``, for :func:`_norms`).

    Each row block of ``W`` is copied into a local buffer, which stays in L1 while the basis
    vectors stream past it (the store to ``W`` itself, which LLVM cannot prove distinct from
    ``Q``, kept the loop from vectorising)."""
    b, N = Wt.shape
    j = Qt.shape[0]
    blocks = (N + ROW_BLOCK - 1) // ROW_BLOCK
    squares = np.zeros((blocks, b))
    for blk in prange(blocks):
        r0 = blk * ROW_BLOCK
        nr = min(N, r0 + ROW_BLOCK) - r0
        acc = np.empty((b, nr))
        for k in range(b):
            for r in range(nr):
                acc[k, r] = Wt[k, r0 + r]
        c = first
        while c + 4 <= j:  # four columns per sweep of the buffer: a quarter of the stores
            q0, q1 = Qt[c, r0 : r0 + nr], Qt[c + 1, r0 : r0 + nr]
            q2, q3 = Qt[c + 2, r0 : r0 + nr], Qt[c + 3, r0 : r0 + nr]
            for k in range(b):
                h0, h1 = H[c - first, k], H[c + 1 - first, k]
                h2, h3 = H[c + 2 - first, k], H[c + 3 - first, k]
                a = acc[k]
                for r in range(nr):
                    a[r] -= q0[r] * h0 + q1[r] * h1 + q2[r] * h2 + q3[r] * h3
            c += 4
        while c < j:
            qc = Qt[c, r0 : r0 + nr]
            for k in range(b):
                h = H[c - first, k]
                a = acc[k]
                for r in range(nr):
                    a[r] -= qc[r] * h
            c += 1
        for k in range(b):
            w = Wt[k]
            for r in range(nr):
                w[r0 + r] = acc[k, r]
            s = 0.0
            for r in range(r0, r0 + nr):  # from W, whose alignment is fixed: the vectorised
                s += w[r] * w[r]  # sum (fastmath) then adds in the same order always
            squares[blk, k] = s
    return squares


@njit(cache=True)
def _norms(squares):
    """Column norms from the per-block squared norms of :func:`subtract_combination`, summed
    in block order."""
    b = squares.shape[1]
    out = np.zeros(b)
    for k in range(b):
        s = 0.0
        for blk in range(squares.shape[0]):
            s += squares[blk, k]
        out[k] = np.sqrt(s)
    return out


@njit(cache=True)
def project_step(Qt, local, Wt, H):
    """The Gram-Schmidt of one Lanczos step, in place on ``W`` (``Wt``: ``b x N``), in one call.

    First ``W -= Q_l (Q_l^T W)`` with ``Q_l = Q[:, local:]`` (the last blocks, which carry the
    recurrence), then one classical pass ``W -= Q (Q^T W)`` over the whole basis (``Qt``:
    ``j x N``); ``H`` (``j x b``) receives the sum of both coefficient sets.  Returns the
    column norms of ``W`` before and after the full pass (for the DGKS test).  Fixed row
    blocks and per-column dot products: the result does not depend on the thread count.
    """
    whole = np.int64(0)  # typed int64 like ``local``, not Literal[int](0): one compile each
    Cl = basis_coefficients(Qt, Wt, local)
    before = _norms(subtract_combination(Qt, Cl, Wt, local))
    C = basis_coefficients(Qt, Wt, whole)
    after = _norms(subtract_combination(Qt, C, Wt, whole))
    j, b = H.shape
    for c in range(j):
        for k in range(b):
            H[c, k] += C[c, k]
            if c >= local:
                H[c, k] += Cl[c - local, k]
    return before, after


@njit(cache=True, fastmath=True)
def orthonormalise_small(Wt, Qnt, R, eta, threshold):
    """``W = Qn R`` by modified Gram-Schmidt over the ``b`` columns of ``W`` (``Wt`` and
    ``Qnt``: ``b x N`` row-major; ``W`` kept).

    Returns ``False`` (``Qn`` and ``R`` then unusable) as soon as a column keeps less than
    ``eta`` of its norm against the previous ones, or at most ``threshold``: nearly dependent
    columns, which need the careful path of the caller.  Otherwise, with ``eta = 1/sqrt(2)``,
    one pass leaves the columns orthonormal to working precision ("twice is enough")."""
    b, N = Wt.shape
    R[:, :] = 0.0
    for i in range(b):
        w = Wt[i]
        qi = Qnt[i]
        s = 0.0
        for r in range(N):
            v = w[r]
            qi[r] = v
            s += v * v
        norm0 = np.sqrt(s)
        for p in range(i):
            qp = Qnt[p]
            h = 0.0
            for r in range(N):
                h += qp[r] * qi[r]
            R[p, i] = h
            for r in range(N):
                qi[r] -= h * qp[r]
        s = 0.0
        for r in range(N):
            s += qi[r] * qi[r]
        norm = np.sqrt(s)
        if norm <= threshold or norm < eta * norm0:
            return False
        R[i, i] = norm
        inv = 1.0 / norm
        for r in range(N):
            qi[r] *= inv
    return True
