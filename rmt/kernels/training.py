"""Numba kernel of the loss and gradient for full-batch gradient descent (docs/theory.md section 1).

    L(W) = (1/n) sum_i l(y_i, f_i) + (lambda_wd/2) ||W||_F^2,   f_i = sum_j a_j sigma(u_ij),
    grad_{w_j} L = (1/n) sum_i l'(y_i, f_i) a_j sigma'(u_ij) x_i + lambda_wd w_j.

The kernel works on ``Wt = W^T`` (``m x d``, contiguous) and returns ``sum_i l_i`` and the
transposed gradient sum ``sum_i (l'_i a (.) sigma'(u_i)) x_i^T`` without the ``1/n`` and the
weight decay, which the caller adds.  Each row ``x_i`` is used twice while it is in cache:
once for ``u_i = W^T x_i`` and once for the accumulation, so ``X`` is read once per step.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .elementwise import activation, loss


@njit(cache=True, inline="always")
def _row_loss_grad(x, Wt, y, a, act_code, loss_code, huber_delta, u, g, acc):
    """Add row ``x``'s gradient to ``acc`` (``m x d``) and return its loss ``l(y, f)``."""
    m, d = Wt.shape
    for j in range(m):
        s = 0.0
        wrow = Wt[j]
        for t in range(d):
            s += x[t] * wrow[t]
        u[j] = s
    f = 0.0
    for j in range(m):
        sj, dsj, _ = activation(act_code, u[j])
        f += a[j] * sj
        g[j] = a[j] * dsj
    ell, dl, _ = loss(loss_code, y, f, huber_delta)
    for j in range(m):
        gj = dl * g[j]
        if gj != 0.0:
            arow = acc[j]
            for t in range(d):
                arow[t] += gj * x[t]
    return ell


@njit(cache=True, parallel=True)
def loss_grad_fused(X, Wt, y, a, act_code, loss_code, huber_delta, n_chunks):
    """Fused ``(sum_i l_i, sum_i (l'_i a (.) sigma'(u_i)) x_i^T)`` over the rows of ``X``.

    ``Wt`` is ``W^T`` (``m x d``).  Rows are split into ``n_chunks`` contiguous chunks, each with
    a private accumulator, reduced at the end.  Returns ``(loss_sum, grad_t)``, ``grad_t`` of
    shape ``(m, d)``; divide both by ``n`` and add weight decay outside.
    """
    n, d = X.shape
    m = Wt.shape[0]
    partial = np.zeros((n_chunks, m, d))
    partial_loss = np.zeros(n_chunks)
    chunk = (n + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        lo = ch * chunk
        hi = min(n, lo + chunk)
        u = np.empty(m)
        g = np.empty(m)
        acc = partial[ch]
        s = 0.0
        for i in range(lo, hi):
            s += _row_loss_grad(X[i], Wt, y[i], a, act_code, loss_code, huber_delta, u, g, acc)
        partial_loss[ch] = s
    out = np.zeros((m, d))
    total = 0.0
    for ch in range(n_chunks):
        out += partial[ch]
        total += partial_loss[ch]
    return total, out
