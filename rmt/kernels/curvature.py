"""Serial curvature blocks ``D_i`` for small batches (docs/theory.md section 2).

``rmt.kernels.hessian.curvature_blocks`` is ``parallel=True``: on a loaded machine each call
waits for the OpenMP threads, which dominates the adaptive quadrature of a law (a few hundred
calls on a few thousand nodes).  This kernel does the same
arithmetic, in the same order, on one thread, so its blocks are bit-identical to those of the
parallel kernel; ``TwoLayerNet.curvature`` picks it below ``SERIAL_MAX_ROWS`` rows.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from rmt.kernels.elementwise import activation, loss

#: rows below which the serial kernel is used (below it, waking the threads of a parallel call
#: costs more than the rows)
SERIAL_MAX_ROWS = 100_000


@njit(cache=True)
def curvature_rows(U, y, a, act_code, loss_code, huber_delta, D, f_out, dl_out, start, stop):
    """Rows ``start <= i < stop``: ``D_i[j,k] = l'' a_j a_k s'(u_ij) s'(u_ik) + [j=k] l' a_j
    s''(u_ij)``, with ``f_i`` and ``l'(y_i, f_i)``.  Shared by the serial and the parallel
    kernel, so their blocks are bit-identical.  A range, not a row: a call per row paid the
    reference counts of its nine array arguments and (in the parallel kernel) three scratch
    allocations per row, several times the arithmetic for small ``m``."""
    m = U.shape[1]
    s = np.empty(m)
    ds = np.empty(m)
    d2s = np.empty(m)
    for i in range(start, stop):
        f = 0.0
        for j in range(m):
            s[j], ds[j], d2s[j] = activation(act_code, U[i, j])
            f += a[j] * s[j]
        _, dl, d2l = loss(loss_code, y[i], f, huber_delta)
        f_out[i] = f
        dl_out[i] = dl
        for j in range(m):
            gj = a[j] * ds[j]
            for k in range(j, m):
                v = d2l * gj * a[k] * ds[k]
                D[i, j, k] = v
                D[i, k, j] = v
            D[i, j, j] += dl * a[j] * d2s[j]


@njit(cache=True)
def curvature_blocks_serial(U, y, a, act_code, loss_code, huber_delta, D, f_out, dl_out):
    """The curvature blocks of ``curvature_blocks``, row by row on one thread."""
    curvature_rows(U, y, a, act_code, loss_code, huber_delta, D, f_out, dl_out, 0, U.shape[0])


@njit(cache=True)
def gershgorin_bounds(D, lower, upper, size):
    """Gershgorin bounds of the symmetric blocks ``D`` (``N x m x m``): ``lower[i]`` and
    ``upper[i]`` bound the eigenvalues of ``D_i``, ``size[i]`` is its largest absolute row sum.
    Returns the smallest and the largest diagonal entry over all blocks."""
    n, m = D.shape[0], D.shape[1]
    dmin, dmax = np.inf, -np.inf
    for i in range(n):
        lo, hi, sz = np.inf, -np.inf, 0.0
        for j in range(m):
            r = 0.0
            for k in range(m):
                if k != j:
                    r += abs(D[i, j, k])
            c = D[i, j, j]
            lo = min(lo, c - r)
            hi = max(hi, c + r)
            sz = max(sz, abs(c) + r)
            dmin = min(dmin, c)
            dmax = max(dmax, c)
        lower[i], upper[i], size[i] = lo, hi, sz
    return dmin, dmax


#: cyclic Jacobi sweeps allowed per batch (4 x 4 blocks converge in 3-5, quadratically)
JACOBI_SWEEPS = 30
#: blocks diagonalised side by side: each rotation is a vector loop over the batch
JACOBI_BATCH = 32


@njit(cache=True, error_model="numpy")
def _jacobi_batch(W, tol, cs, ss, m):
    """Diagonalise the symmetric blocks ``W[:, :, b]`` in place by cyclic Jacobi rotations; their
    diagonals are then the eigenvalues (unsorted), to about ``m eps max|W_b|``.

    The blocks of the batch rotate together, so every loop over ``b`` is a vector loop (4x
    fewer cycles than block by block: the divisions and roots of one rotation are a chain of
    latencies).  A rotation zeroes ``W[p, q, b]`` exactly.  An entry at most ``tol[b]``
    (``1e-2 eps`` times the largest entry of the block) is not rotated, and the sweeps stop
    when no entry of the batch exceeds its tolerance: what is left moves no eigenvalue by more
    than ``m tol[b]`` (Weyl).  ``t``, the smaller root of ``t^2 + 2 theta t - 1 = 0``, is 0
    where ``theta^2`` overflows (``|W[p, q]| < 1e-154 |W[q, q] - W[p, p]|``, so zeroing it moves
    the eigenvalues by far less than the rounding)."""
    nb = W.shape[2]
    for _ in range(JACOBI_SWEEPS):
        off = 0.0
        for p in range(m):
            for q in range(p + 1, m):
                for b in range(nb):
                    off = max(off, abs(W[p, q, b]) - tol[b])
        if off <= 0.0:
            return
        for p in range(m):
            for q in range(p + 1, m):
                for b in range(nb):
                    apq = W[p, q, b]
                    theta = (W[q, q, b] - W[p, p, b]) / (2.0 * apq)
                    t = 1.0 / (abs(theta) + np.sqrt(theta * theta + 1.0))
                    t = -t if theta < 0.0 else t
                    t = t if abs(apq) > tol[b] and t == t else 0.0
                    c = 1.0 / np.sqrt(t * t + 1.0)
                    cs[b] = c
                    ss[b] = t * c
                    W[p, p, b] -= t * apq
                    W[q, q, b] += t * apq
                    W[p, q, b] = 0.0
                    W[q, p, b] = 0.0
                for r in range(m):
                    if r != p and r != q:
                        for b in range(nb):
                            arp, arq = W[r, p, b], W[r, q, b]
                            W[r, p, b] = cs[b] * arp - ss[b] * arq
                            W[r, q, b] = ss[b] * arp + cs[b] * arq
                        for b in range(nb):
                            W[p, r, b] = W[r, p, b]
                            W[q, r, b] = W[r, q, b]


@njit(cache=True)
def _block_eigenvalues_rows(D, out, start, stop):
    """Blocks ``start <= i < stop`` of ``block_eigenvalues``, a batch at a time (the last batch
    padded with copies of its last block)."""
    m, nb = D.shape[1], JACOBI_BATCH
    W = np.empty((m, m, nb))
    tol, cs, ss = np.empty(nb), np.empty(nb), np.empty(nb)
    for b0 in range(start, stop, nb):
        used = min(nb, stop - b0)
        for b in range(nb):
            i = b0 + min(b, used - 1)
            big = 0.0
            for p in range(m):
                for q in range(m):
                    W[p, q, b] = D[i, p, q]
                    big = max(big, abs(D[i, p, q]))
            tol[b] = 2.220446049250313e-18 * big
        _jacobi_batch(W, tol, cs, ss, m)
        for b in range(used):
            i = b0 + b
            for p in range(m):  # insertion sort of the diagonal
                v = W[p, p, b]
                k = p
                while k > 0 and out[i, k - 1] > v:
                    out[i, k] = out[i, k - 1]
                    k -= 1
                out[i, k] = v


#: blocks per parallel chunk of ``block_eigenvalues``; fewer than two chunks run on one thread
#: (a parallel call waits for the sleeping threads to wake: benchmarks/RESULTS.md)
EIG_CHUNK = 8192


@njit(cache=True, parallel=True)
def _block_eigenvalues_parallel(D, out):
    n = D.shape[0]
    chunks = (n + EIG_CHUNK - 1) // EIG_CHUNK
    for c in prange(chunks):
        _block_eigenvalues_rows(D, out, c * EIG_CHUNK, min(n, (c + 1) * EIG_CHUNK))


def block_eigenvalues(D, out):
    """Eigenvalues, ascending, of every symmetric block ``D_i`` (``N x m x m``, C-contiguous
    float64) into ``out`` (``N x m``), by cyclic Jacobi on batches of blocks.  As accurate as
    LAPACK (``m eps max|D_i|``), and faster than numpy's batched ``eigvalsh``, which calls
    LAPACK block by block (benchmarks/RESULTS.md)."""
    if D.shape[0] >= 2 * EIG_CHUNK:
        _block_eigenvalues_parallel(D, out)
    elif D.shape[0] > 0:
        _block_eigenvalues_rows(D, out, 0, D.shape[0])
