"""The per-sample responses of the DMFT (``rmt.dmft``, docs/dmft.md eqs. (D2)-(D3)) by reverse mode.

For one draw ``n`` of the per-sample process, the responses ``G(t, s) = d r^t / d eta^s``
(``m x m``, ``s <= t``) form the block lower-triangular matrix

    G = (I + K J)^{-1},     K[q, p] = (lr / delta) R_w(q, p)  (p < q),   J = diag(J^p),

with ``J^p = d psi / d u`` at step ``p`` of that draw.  Eq. (D2) builds ``G`` a row at a time
forward in ``t``, which needs every earlier row of every draw: ``N m^2 T^2 / 2`` numbers held
through the solve. The same row ``t`` also solves ``lambda (I + K J) = e_t`` backwards in
``p``:

    lambda_t = I,    lambda_p = -(sum_{q = p+1}^{t} lambda_q K[q, p]) J^p,    G(t, p) = lambda_p,

from ``K`` (shared by all draws) and the Jacobians alone. That needs ``O(m^2 t)`` memory per
draw and the same ``m^3 t^2 / 2`` multiply-adds. ``K`` is read once per chunk of ``NB`` draws,
which the innermost loop runs over together, so the work is arithmetic, not memory traffic.

:func:`response_row` returns ``R_psi(t, p) = E_n[J^t_n G_n(t, p)]`` for ``p <= t``. The chunks
are summed in their fixed order, so the result does not depend on the number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._generated.dmft_small import RESPONSE_ROWS

#: draws per chunk of the generic kernel: the innermost loop (two ``<4 x double>`` on AVX2)
NB = 8
#: the draws are padded to a multiple of this (every kernel's chunk divides it)
PAD = 16


@njit(cache=True, parallel=True, fastmath={"contract"})
def response_row(KT, J, t, out):
    """``out[p] = sum_n J[t, :, :, n] @ G_n(t, p)`` for ``p <= t``: ``N R_psi(t, p)``, eq. (D3).

    ``KT[p, k, q m + j]`` is ``K[q, p]_{jk} = (lr / delta) R_w(q, p)_{jk}``: for a fixed ``p``,
    a matrix of ``m`` rows whose columns run over ``(q, j)`` in order. ``J[p, i, j, n]`` is the Jacobian
    of draw ``n`` at step ``p``, draws last, their count a multiple of :data:`PAD`; padding
    draws have ``J = 0`` and add nothing. ``out`` (``(t + 1) x m x m``) is overwritten.
    """
    m = J.shape[1]
    n_chunks = J.shape[3] // NB
    part = np.zeros((n_chunks, t + 1, m, m))
    for c in prange(n_chunks):
        n0 = c * NB
        lam = np.zeros((t + 1, m, m, NB))
        acc = np.empty((m, m, NB))
        for i in range(m):
            for b in range(NB):
                lam[t, i, i, b] = 1.0
        for p in range(t - 1, -1, -1):
            acc[:] = 0.0
            for q in range(p + 1, t + 1):
                for j in range(m):
                    for k in range(m):
                        kv = KT[p, k, q * m + j]
                        for i in range(m):
                            for b in range(NB):
                                acc[i, k, b] += lam[q, i, j, b] * kv
            for i in range(m):
                for k in range(m):
                    for b in range(NB):
                        s = 0.0
                        for j in range(m):
                            s += acc[i, j, b] * J[p, j, k, n0 + b]
                        lam[p, i, k, b] = -s
        # the row of R_psi: sum over the chunk of J^t lambda_p
        for p in range(t + 1):
            for i in range(m):
                for k in range(m):
                    s = 0.0
                    for j in range(m):
                        for b in range(NB):
                            s += J[t, i, j, n0 + b] * lam[p, j, k, b]
                    part[c, p, i, k] = s
    out[:] = 0.0
    for c in range(n_chunks):
        for p in range(t + 1):
            for i in range(m):
                for k in range(m):
                    out[p, i, k] += part[c, p, i, k]


def response_kernel(m: int):
    """The response-row kernel for width ``m``: unrolled for ``m <= 4``
    (``_generated/dmft_small.py``), else :func:`response_row`."""
    return RESPONSE_ROWS.get(m, response_row)
