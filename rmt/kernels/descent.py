"""Numba kernels of one full-batch gradient-descent step (docs/theory.md section 1.3).

    L(W) = (1/n) sum_i l(y_i, f_i) + (lambda_wd/2) ||W||_F^2,   f_i = sum_j a_j sigma(u_ij),
    grad_{w_j} L = (1/n) sum_i l'(y_i, f_i) a_j sigma'(u_ij) x_i + lambda_wd w_j.

Every kernel works on ``Wt = W^T`` (``m x d``, contiguous) and returns sums over the rows,
without the ``1/n`` and the weight decay, which the caller adds:

* ``loss_grad_*``: ``(sum_i l_i, sum_i (l'_i a (.) sigma'(u_i)) x_i^T)`` in ONE pass over
  ``X``: rows are taken a few at a time, their dot products ``u_i = W^T x_i`` share one loop
  over ``d`` and the gradient update a second loop while the rows are still in cache;
* ``loss_*``: ``sum_i l_i`` only (the forward pass, for a held-out loss).

Rows are split into ``n_chunks`` fixed contiguous chunks (a constant, not the thread count),
each with a private accumulator, summed in chunk order: the result is bit-identical whatever
the number of Numba threads.  :func:`step_kernels` picks by the table of
``rmt/kernels/dispatch.py``: the unrolled kernels of ``_generated/descent_small.py`` (generated
by ``tools/gen_descent_small.py``, ``m <= 4``), ``simd.grad4_c4`` on ``avx2`` for ``m = 4``, or
the generic ones here.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from rmt.kernels import dispatch
from rmt.kernels._generated.descent_small import (
    FASTMATH,
    GRAD_KERNELS,
    row_coefficients,
    row_losses,
)

#: rows per step of the generic kernels
ROWS_PER_STEP = 4

#: widths ``m`` whose loss-and-gradient step runs in the 4-lane explicit-SIMD layout
#: (``simd.grad4_c4``) on each path: the rows of ``dispatch.TABLE`` that name it
LANE_STEP_WIDTHS = {
    path: tuple(
        m for m in (1, 2, 3, 4)
        if dispatch.TABLE.get(("step", path, f"m = {m}"), ("",))[0] == "simd.grad4_c4"
    )
    for path in dispatch.TARGETS
}  # fmt: skip


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _dots(X, i0, nr, Wt, u):
    """``u[q, j] = x_{i0+q} . w_j`` for ``q < nr`` (4 rows share one loop when ``nr == 4``)."""
    m, d = Wt.shape
    for j in range(m):
        w = Wt[j]
        if nr == ROWS_PER_STEP:
            x0, x1, x2, x3 = X[i0], X[i0 + 1], X[i0 + 2], X[i0 + 3]
            s0 = s1 = s2 = s3 = 0.0
            for t in range(d):
                wt = w[t]
                s0 += x0[t] * wt
                s1 += x1[t] * wt
                s2 += x2[t] * wt
                s3 += x3[t] * wt
            u[0, j], u[1, j], u[2, j], u[3, j] = s0, s1, s2, s3
        else:
            for q in range(nr):
                x = X[i0 + q]
                s = 0.0
                for t in range(d):
                    s += x[t] * w[t]
                u[q, j] = s


@njit(cache=True, inline="always", fastmath=FASTMATH)
def _axpy_rows(X, i0, nr, c, acc):
    """``acc_j += sum_{q < nr} c[q, j] x_{i0+q}``."""
    m, d = acc.shape
    for j in range(m):
        g = acc[j]
        if nr == ROWS_PER_STEP:
            x0, x1, x2, x3 = X[i0], X[i0 + 1], X[i0 + 2], X[i0 + 3]
            c0, c1, c2, c3 = c[0, j], c[1, j], c[2, j], c[3, j]
            for t in range(d):
                g[t] += x0[t] * c0 + x1[t] * c1 + x2[t] * c2 + x3[t] * c3
        else:
            for q in range(nr):
                x = X[i0 + q]
                cq = c[q, j]
                for t in range(d):
                    g[t] += x[t] * cq


@njit(cache=True, parallel=True, fastmath=FASTMATH)
def loss_grad_generic(X, Wt, y, a, act_code, loss_code, huber_delta, n_chunks):
    """Fused ``(sum_i l_i, sum_i (l'_i a (.) sigma'(u_i)) x_i^T)`` for any width ``m``."""
    n, d = X.shape
    m = Wt.shape[0]
    partial = np.zeros((n_chunks, m, d))
    partial_loss = np.zeros(n_chunks)
    chunk = (n + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        lo, hi = ch * chunk, min(n, (ch + 1) * chunk)
        u = np.zeros((ROWS_PER_STEP, m))
        c = np.zeros((ROWS_PER_STEP, m))
        total = 0.0
        for i0 in range(lo, hi, ROWS_PER_STEP):
            nr = min(ROWS_PER_STEP, hi - i0)
            _dots(X, i0, nr, Wt, u)
            total += row_coefficients(u, nr, y, i0, a, act_code, loss_code, huber_delta, c)
            _axpy_rows(X, i0, nr, c, partial[ch])
        partial_loss[ch] = total
    out = np.zeros((m, d))
    total = 0.0
    for ch in range(n_chunks):
        out += partial[ch]
        total += partial_loss[ch]
    return total, out


@njit(cache=True, parallel=True, fastmath=FASTMATH)
def loss_generic(X, Wt, y, a, act_code, loss_code, huber_delta, n_chunks):
    """``sum_i l(y_i, f(x_i; W))`` (forward pass only) for any width ``m``."""
    n = X.shape[0]
    m = Wt.shape[0]
    partial_loss = np.zeros(n_chunks)
    chunk = (n + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        lo, hi = ch * chunk, min(n, (ch + 1) * chunk)
        u = np.zeros((ROWS_PER_STEP, m))
        total = 0.0
        for i0 in range(lo, hi, ROWS_PER_STEP):
            nr = min(ROWS_PER_STEP, hi - i0)
            _dots(X, i0, nr, Wt, u)
            total += row_losses(u, nr, y, i0, a, act_code, loss_code, huber_delta)
        partial_loss[ch] = total
    total = 0.0
    for ch in range(n_chunks):
        total += partial_loss[ch]
    return total


def step_kernels(m: int, unrolled: bool = True, target: str | None = None):
    """The kernels of one descent step for width ``m``.

    Parameters
    ----------
    m : int
        Width of the network.
    unrolled : bool
        ``False`` forces the generic kernels (for tests and benchmarks).
    target : str, optional
        SIMD path (``dispatch.TARGETS``); ``dispatch.default_target()`` by default.

    Returns
    -------
    (callable, callable)
        ``(loss_grad_kernel, loss_kernel)``, both taking ``(X, Wt, y, a, act_code,
        loss_code, huber_delta, n_chunks)``: the rows ``step`` and ``loss`` of
        ``dispatch.TABLE``.
    """
    target = dispatch.resolve_target(target)
    if not unrolled:
        return loss_grad_generic, loss_generic
    return dispatch.step_kernel("step", m, target), dispatch.step_kernel("loss", m, target)


def step_candidates(m: int) -> tuple:
    """Every loss-and-gradient kernel that a path may dispatch for width ``m``.

    Returns
    -------
    tuple
        ``(grad_m{m}, simd.grad4_c4)`` for ``m <= 4`` (for tests and for the benchmark that
        compares them side by side), else ``(loss_grad_generic,)``.
    """
    if m not in GRAD_KERNELS:
        return (loss_grad_generic,)
    from rmt.kernels.simd import grad4_c4  # lazy: the SIMD module loads only when asked for

    return (GRAD_KERNELS[m], grad4_c4)
