"""Serial curvature blocks ``D_i`` for small batches (docs/theory.md section 2).

``rmt.kernels.hessian.curvature_blocks`` is ``parallel=True``: on a loaded machine each call
waits for the OpenMP threads (about 10 ms, against 0.4 ms idle), which dominates the adaptive
quadrature of a law (about 170 calls on a few thousand nodes).  This kernel does the same
arithmetic, in the same order, on one thread, so its blocks are bit-identical to those of the
parallel kernel; ``TwoLayerNet.curvature`` picks it below ``SERIAL_MAX_ROWS`` rows.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .elementwise import activation, loss

#: rows below which the serial kernel is used (a parallel call costs about 10 ms under load; the
#: serial kernel does about 20-40 ns a row for m <= 4)
SERIAL_MAX_ROWS = 100_000


@njit(cache=True)
def curvature_rows(U, y, a, act_code, loss_code, huber_delta, D, f_out, dl_out, start, stop):
    """Rows ``start <= i < stop``: ``D_i[j,k] = l'' a_j a_k s'(u_ij) s'(u_ik) + [j=k] l' a_j
    s''(u_ij)``, with ``f_i`` and ``l'(y_i, f_i)``.  Shared by the serial and the parallel
    kernel, so their blocks are bit-identical.  A range, not a row: a call per row paid the
    reference counts of its nine array arguments and (in the parallel kernel) three scratch
    allocations per row, 10-25x the arithmetic for m = 1 (2026-12-02, 170 ns against 7-15 ns
    a row)."""
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
