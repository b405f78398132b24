"""Numba kernels of the first-layer Hessian (docs/theory.md section 2).

    H = (1/n) sum_i D_i (x) x_i x_i^T + lambda_wd I,
    D_i[j,k] = l'' a_j a_k s'(u_ij) s'(u_ik) + [j=k] l' a_j s''(u_ij).

Vectors are neuron-major: ``v.reshape(m, d)[j]`` is the direction of ``w_j``.  A block of ``b``
vectors is stored as ``Vt`` of shape ``(b*m, d)``: row ``c*m + j`` is neuron ``j`` of vector ``c``.

``X`` may be float64 or float32 (float32 storage); ``D``, ``Vt`` and every accumulator are
float64, so a float32 entry of ``X`` is widened before it is multiplied (Numba compiles one
specialisation per dtype; the mixed float32 x float64 products are float64) and no arithmetic
is done in float32.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from rmt.kernels.curvature import curvature_rows
from rmt.kernels.dispatch import hvp_kernel

ROWS_PER_STEP = 4
#: rows kept in cache while the vectors of a block sweep them (16 rows of d=4000: 512 kB)
PANEL_ROWS = 16


#: rows per task of ``curvature_blocks`` (each task one call of ``curvature_rows``)
CURVATURE_CHUNK = 1024


@njit(cache=True, parallel=True)
def curvature_blocks(U, y, a, act_code, loss_code, huber_delta, D, f_out, dl_out):
    """Per-sample curvature blocks ``D_i`` from the pre-activations ``U = X W`` (``n x m``).

    Also writes the network output ``f_i`` and ``l'(y_i, f_i)``.
    """
    n = U.shape[0]
    for c in prange((n + CURVATURE_CHUNK - 1) // CURVATURE_CHUNK):
        start = c * CURVATURE_CHUNK
        stop = min(start + CURVATURE_CHUNK, n)
        curvature_rows(U, y, a, act_code, loss_code, huber_delta, D, f_out, dl_out, start, stop)


@njit(cache=True, parallel=True, fastmath=True)
def _preactivations_kernel(X, Wt, U):
    """``U = X Wt^T`` row by row (``Wt`` is ``m x d``), accumulated in float64 whatever the
    dtype of ``X`` (each entry is widened to float64 before the product)."""
    n, d = X.shape
    m = Wt.shape[0]
    for i in prange(n):
        x = X[i]
        for j in range(m):
            w = Wt[j]
            s = 0.0
            for t in range(d):
                s += np.float64(x[t]) * w[t]
            U[i, j] = s


def preactivations(X, W) -> np.ndarray:
    """``U = X W`` (``n x m``, float64) for the curvature blocks.

    A float64 ``X`` goes to BLAS (``X @ W``, as before); a float32 ``X`` (float32 storage) to
    a Numba kernel that reads float32 rows and accumulates in float64, so that no float64 copy
    of ``X`` is made (numpy's mixed-dtype ``X @ W`` would cast all of ``X`` first).
    """
    if X.dtype == np.float32:
        U = np.empty((X.shape[0], W.shape[1]))
        _preactivations_kernel(X, np.ascontiguousarray(np.asarray(W, dtype=np.float64).T), U)
        return U
    return X @ W


@njit(cache=True, inline="always")
def dots4(X, i0, vrow, d):
    """``(x_{i0+q} . v)`` for ``q = 0..3``: four dot products of the rows ``i0..i0+3`` of ``X``
    with ``vrow`` (length ``d``) in one loop over ``d``, four accumulators.

    Each entry of ``vrow`` is loaded once for four products.  Shared by the generic product
    (:func:`hvp_fused`) and the Lanczos basis projections (``lanczos.basis_coefficients``).
    """
    x0 = X[i0]
    x1 = X[i0 + 1]
    x2 = X[i0 + 2]
    x3 = X[i0 + 3]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for t in range(d):
        w = vrow[t]
        s0 += x0[t] * w
        s1 += x1[t] * w
        s2 += x2[t] * w
        s3 += x3[t] * w
    return s0, s1, s2, s3


@njit(cache=True, inline="always")
def _rows_step(X, D, Vt, acc, i0, i1, m, blk, u, r):
    """Add ``sum_{i0<=i<i1} x_i r_i^T`` to the rows of ``acc`` of vector ``blk``.

    ``r_i = (x_i^T V) D_i`` with ``V`` the rows ``blk*m .. blk*m+m-1`` of ``Vt``; ``u`` and
    ``r`` are ``ROWS_PER_STEP x m`` scratch arrays.
    """
    d = X.shape[1]
    nr = i1 - i0
    c0 = blk * m
    for j in range(m):
        vrow = Vt[c0 + j]
        if nr == ROWS_PER_STEP:
            u[0, j], u[1, j], u[2, j], u[3, j] = dots4(X, i0, vrow, d)
        else:
            for q in range(nr):
                xrow = X[i0 + q]
                s = 0.0
                for t in range(d):
                    s += xrow[t] * vrow[t]
                u[q, j] = s
    for q in range(nr):
        Di = D[i0 + q]
        for k in range(m):
            s = 0.0
            for j in range(m):
                s += u[q, j] * Di[j, k]
            r[q, k] = s
    for k in range(m):
        arow = acc[c0 + k]
        if nr == ROWS_PER_STEP:
            x0 = X[i0]
            x1 = X[i0 + 1]
            x2 = X[i0 + 2]
            x3 = X[i0 + 3]
            r0 = r[0, k]
            r1 = r[1, k]
            r2 = r[2, k]
            r3 = r[3, k]
            for t in range(d):
                arow[t] += x0[t] * r0 + x1[t] * r1 + x2[t] * r2 + x3[t] * r3
        else:
            for q in range(nr):
                xrow = X[i0 + q]
                rq = r[q, k]
                for t in range(d):
                    arow[t] += xrow[t] * rq


@njit(cache=True, parallel=True, fastmath=True)
def hvp_fused(X, D, Vt, n_chunks):
    """Fused Hessian-vector product without the ``1/n`` and weight decay: ``sum_i x_i r_i^T``.

    Generic in ``m`` and in the block size ``b = Vt.shape[0] // m``; each row of ``X`` is read
    from memory once per call.  Rows are split into ``n_chunks`` contiguous chunks, each with a
    private accumulator, reduced at the end.  Within a chunk, rows come in panels of
    ``PANEL_ROWS`` that stay in cache while the ``b`` vectors sweep them, each vector taking
    ``ROWS_PER_STEP`` rows at a time.  Returns an array of the shape of ``Vt``.
    """
    n = X.shape[0]
    m = D.shape[1]
    c_tot, d = Vt.shape
    b = c_tot // m
    partial = np.zeros((n_chunks, c_tot, d))
    chunk = (n + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        lo = ch * chunk
        hi = min(n, lo + chunk)
        acc = partial[ch]
        u = np.zeros((ROWS_PER_STEP, m))
        r = np.zeros((ROWS_PER_STEP, m))
        for p0 in range(lo, hi, PANEL_ROWS):
            p1 = min(hi, p0 + PANEL_ROWS)
            for blk in range(b):
                i = p0
                while i < p1:
                    i1 = min(p1, i + ROWS_PER_STEP)
                    _rows_step(X, D, Vt, acc, i, i1, m, blk, u, r)
                    i = i1
    out = np.zeros((c_tot, d))
    for ch in range(n_chunks):
        out += partial[ch]
    return out


@njit(cache=True, parallel=True)
def dense_hessian(X, D, weight_decay):
    """Dense ``(m d) x (m d)`` Hessian by ``m(m+1)/2`` weighted Gram matrices (reference only)."""
    n, d = X.shape
    m = D.shape[1]
    H = np.zeros((m * d, m * d))
    for j in range(m):
        for k in range(j, m):
            w = np.empty(n)
            for i in range(n):
                w[i] = D[i, j, k] / n
            for t in prange(d):
                row = np.zeros(d)
                for i in range(n):
                    c = X[i, t] * w[i]
                    if c != 0.0:
                        xi = X[i]
                        for s in range(d):
                            row[s] += c * xi[s]
                for s in range(d):
                    H[j * d + t, k * d + s] = row[s]
    for j in range(m):
        for k in range(j, m):
            for t in prange(d):
                for s in range(d):
                    if k > j:
                        H[k * d + s, j * d + t] = H[j * d + t, k * d + s]
                    elif s > t:
                        v = 0.5 * (H[j * d + t, j * d + s] + H[j * d + s, j * d + t])
                        H[j * d + t, j * d + s] = v
                        H[j * d + s, j * d + t] = v
    for p in range(m * d):
        H[p, p] += weight_decay
    return H


def fused_product(X, D, Vt, n_chunks: int) -> np.ndarray:
    """Hessian product without the ``1/n`` and the weight decay, by the kernel of the table.

    Parameters
    ----------
    X : ndarray, shape (n, d), float64 or float32
    D : ndarray, shape (n, m, m)
        Curvature blocks ``D_i``.
    Vt : ndarray, shape (b m, d)
        A block of ``b`` vectors, row ``c m + j`` neuron ``j`` of vector ``c``.
    n_chunks : int
        Fixed row chunks (:func:`default_chunks`).

    Returns
    -------
    ndarray, shape (b m, d)
        ``sum_i x_i r_i^T``, ``r_i = (x_i^T V) D_i``, by ``dispatch.hvp_kernel``.
    """
    kernel = hvp_kernel(D.shape[1], Vt.shape[0], dtype=X.dtype)
    return kernel(X, D, Vt, n_chunks)


ROW_CHUNKS = 8


def default_chunks() -> int:
    """Number of row chunks for the fused products: a constant, not the thread count.

    The chunks are summed in a fixed order, so products (and everything built on them: sweeps
    run serially or on Dask workers with one thread each) are bit-identical whatever the number
    of Numba threads.  Up to ``ROW_CHUNKS`` threads share the work.
    """
    return ROW_CHUNKS
