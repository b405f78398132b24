"""The per-sample responses of the DMFT (``rmt.dynamics.dmft``, docs/theory.md eqs. (D2)-(D3)) by reverse mode.

For one draw ``n`` of the per-sample process, the responses ``G(t, s) = d r^t / d eta^s``
(``m x m``, ``s <= t``) form the block lower-triangular matrix

    G = (I + K J)^{-1},     K[q, p] = (lr / delta) R_w(q, p)  (p < q),   J = diag(J^p),

with ``J^p = d psi / d u`` at step ``p`` of that draw.  Eq. (D2) builds ``G`` a row at a time
forward in ``t``, which needs every earlier row of every draw: ``N m^2 T^2 / 2`` numbers held
through the solve. The same row ``t`` also solves ``lambda (I + K J) = e_t`` backwards in
``p``:

    lambda_t = I,    lambda_p = -(sum_{q = p+1}^{t} lambda_q K[q, p]) J^p,    G(t, p) = lambda_p,

from ``K`` (shared by all draws) and the Jacobians alone. That needs ``O(m^2 t)`` memory per
draw and the same ``m^3 t^2 / 2`` multiply-adds. ``K`` is read once per chunk of draws, which
the innermost loops run over together, so the work is arithmetic, not memory traffic.

:func:`response_row` (any ``m``) and ``response_row_m1`` .. ``_m4`` (the sums by the
explicit-SIMD ``dot_rows`` on ``<4 x double>``), and ``response_row8_m3``, ``_m4`` (on
``<8 x double>``, four times the draws a chunk, for AVX-512; ``rmt.kernels.dispatch.response_kernel``
picks by the table) return ``N R_psi(t, p) =
sum_n J^t_n G_n(t, p)`` for ``p <= t``. The chunks are summed in their fixed order, so the
result does not depend on the number of threads.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from rmt.kernels.elementwise import activation, loss
from rmt.kernels.simd import dot_rows

#: draws per chunk of the generic kernel: the innermost loop (two ``<4 x double>`` on AVX2)
NB = 8
#: the draws are padded to a multiple of this (the chunks of every kernel but the 4-lane
#: ``response_row_m4`` divide it; that one completes a partial last chunk with zero draws)
PAD = 16


@njit(cache=True, parallel=True, fastmath={"contract"})
def response_row(KT, J, t, out):
    """``out[p] = sum_n J[t, :, :, n] @ G_n(t, p)`` for ``p <= t``: ``N R_psi(t, p)``, eq. (D3).

    ``KT[p, k, q m + j]`` is ``K[q, p]_{jk} = (lr / delta) R_w(q, p)_{jk}``: for a fixed
    ``p``, a matrix of ``m`` rows whose columns run over ``(q, j)`` in order.
    ``J[p, i, j, n]`` is the Jacobian of draw ``n`` at step ``p``, draws last, their count a
    multiple of :data:`PAD`; padding draws have ``J = 0`` and add nothing.  ``out``
    (``(t + 1) x m x m``) is overwritten.
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
    _sum_chunks(part, out)


@njit(cache=True)
def _sum_chunks(part, out):
    """``out = sum_c part[c]``, the chunks in their fixed order (thread-count independent)."""
    out[:] = 0.0
    for c in range(part.shape[0]):
        out += part[c]


@njit(cache=True, inline="always")
def _chunk_rows(KT, J, t, part, c, R, NBR, W, L):
    """``part[c] = sum over the draws of chunk c`` of ``J^t lambda_p`` for ``m = R``, the sums
    over ``(q, j)`` by the explicit-SIMD micro-kernel ``dot_rows``: chunks of ``NBR`` draws,
    ``R x W`` accumulators of 4 lanes (``W = R NBR / 4``) in registers, each entry of ``K``
    loaded once per chunk.  ``R``, ``NBR``, ``W`` are compile-time constants: the wrappers
    below pass them as literals inside their ``prange`` loops, so that they stay constants in
    the parallel loop body.  The chunk's ``lambda_q`` are the rows ``q m + j`` of a matrix
    whose columns are ``(i, draw)``: ``lam[q m + j, i NBR + b] = lambda_q[i, j]`` of draw
    ``n0 + b``, and ``U[k, i NBR + b] = (sum_q lambda_q K[q, p])_{ik}``."""
    n0 = c * NBR
    lam = np.zeros(((t + 1) * R, R * NBR))
    U = np.empty((R, R * NBR))
    for i in range(R):
        for b in range(NBR):
            lam[t * R + i, i * NBR + b] = 1.0
    for p in range(t - 1, -1, -1):
        X = KT[p, :, (p + 1) * R : (t + 1) * R]
        dot_rows(X, 0, lam[(p + 1) * R : (t + 1) * R], U, R, W, L)
        for k in range(R):
            for i in range(R):
                for b in range(NBR):
                    s = 0.0
                    for j in range(R):
                        s += U[j, i * NBR + b] * J[p, j, k, n0 + b]
                    lam[p * R + k, i * NBR + b] = -s
    for p in range(t + 1):
        for i in range(R):
            for k in range(R):
                s = 0.0
                for j in range(R):
                    for b in range(NBR):
                        s += J[t, i, j, n0 + b] * lam[p * R + k, j * NBR + b]
                part[c, p, i, k] = s


@njit(cache=True, inline="always")
def _last_chunk(KT, J, t, part, R, NBR, W, L):
    """``part[-1]``: the last chunk of :func:`_chunk_rows` when the draws are not a multiple
    of ``NBR``, its draws copied into a block of ``NBR`` whose others have ``J = 0`` (they add
    nothing)."""
    full = J.shape[3] // NBR
    if full < part.shape[0]:
        block = np.zeros((J.shape[0], R, R, NBR))
        block[:, :, :, : J.shape[3] - full * NBR] = J[:, :, :, full * NBR :]
        _chunk_rows(KT, block, t, part[full:], 0, R, NBR, W, L)


# draws per chunk for each width: R x (R NBR / 4) accumulators, at most 12 of AVX2's 16
# registers (the loop also holds the loaded lambda row and a broadcast); the chunks of 3
# (m = 4) do not divide PAD: the last one is completed by _last_chunk
@njit(cache=True, parallel=True)
def response_row_m1(KT, J, t, out):
    """:func:`response_row` for m = 1: chunks of 16 draws."""
    part = np.zeros((J.shape[3] // 16, t + 1, 1, 1))
    for c in prange(part.shape[0]):
        _chunk_rows(KT, J, t, part, c, 1, 16, 4, 4)
    _sum_chunks(part, out)


@njit(cache=True, parallel=True)
def response_row_m2(KT, J, t, out):
    """:func:`response_row` for m = 2: chunks of 8 draws."""
    part = np.zeros((J.shape[3] // 8, t + 1, 2, 2))
    for c in prange(part.shape[0]):
        _chunk_rows(KT, J, t, part, c, 2, 8, 4, 4)
    _sum_chunks(part, out)


@njit(cache=True, parallel=True)
def response_row_m3(KT, J, t, out):
    """:func:`response_row` for m = 3: chunks of 4 draws."""
    part = np.zeros((J.shape[3] // 4, t + 1, 3, 3))
    for c in prange(part.shape[0]):
        _chunk_rows(KT, J, t, part, c, 3, 4, 3, 4)
    _sum_chunks(part, out)


@njit(cache=True, parallel=True)
def response_row_m4(KT, J, t, out):
    """:func:`response_row` for m = 4: chunks of 3 draws, 4 x 3 accumulators."""
    part = np.zeros((-(-J.shape[3] // 3), t + 1, 4, 4))
    for c in prange(J.shape[3] // 3):
        _chunk_rows(KT, J, t, part, c, 4, 3, 3, 4)
    _last_chunk(KT, J, t, part, 4, 3, 3, 4)
    _sum_chunks(part, out)


# <8 x double> for 32 vector registers: 3 x 6 and 4 x 4 accumulators of 8 lanes
@njit(cache=True, parallel=True)
def response_row8_m3(KT, J, t, out):
    """:func:`response_row` for m = 3 on 8 lanes: chunks of 16 draws, 18 accumulators."""
    part = np.zeros((J.shape[3] // 16, t + 1, 3, 3))
    for c in prange(part.shape[0]):
        _chunk_rows(KT, J, t, part, c, 3, 16, 6, 8)
    _sum_chunks(part, out)


@njit(cache=True, parallel=True)
def response_row8_m4(KT, J, t, out):
    """:func:`response_row` for m = 4 on 8 lanes: chunks of 8 draws, 16 accumulators."""
    part = np.zeros((J.shape[3] // 8, t + 1, 4, 4))
    for c in prange(part.shape[0]):
        _chunk_rows(KT, J, t, part, c, 4, 8, 4, 8)
    _sum_chunks(part, out)


#: draws per chunk of :func:`forward_process` (the innermost loop of its memory term)
NB_FORWARD = 8


@njit(cache=True, inline="always")
def _forward_activation(act, v, w):
    """``(sigma(v), sigma'(v))`` in the forward process: the smoothed ReLU
    ``w softplus(v / w)`` for ``act`` 5 with a width ``w > 0``, else the activation ``act``."""
    if act == 5 and w > 0.0:
        sj = w * (max(v / w, 0.0) + math.log1p(math.exp(-abs(v / w))))
        return sj, 0.5 * (1.0 + math.tanh(0.5 * v / w))
    sj, dsj, _ = activation(act, v)
    return sj, dsj


@njit(cache=True, parallel=True, fastmath={"contract"})
def forward_process(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out):
    """Fresh draws of the per-sample process (D1) at given kernels, forward in time.

    For each draw ``i`` and step ``s = 0 .. T-1``:

        u^s = M(s) z_i + xi_i^s - c sum_{p<s} R_w(s, p) psi^p,
        psi^s = l'(y_i, a^T sigma(u^s)) a * sigma'(u^s),

    and ``out[slot[s], i] = u^s`` for the steps with ``slot[s] >= 0``.

    Parameters
    ----------
    act, loss_code, huber_delta
        The activation and loss codes of :mod:`rmt.kernels.elementwise`, Huber's threshold.
    a : (m,) output weights.
    Rw : (T m, T m) the flat ``R_w``: ``R_w(s, p)_{jl} = Rw[s m + j, p m + l]``.
    M : (T, m, k) the overlaps ``M(s)``.
    Z, Y : (n, k) and (n,) the draws of ``(z, y)``.
    X : (n, T m) the cavity field ``xi^s`` of each draw in columns ``s m .. s m + m - 1``.
    c : float, ``lr / delta``.
    widths : (T, m) the smoothing widths of a smoothed ReLU (``act`` 5), 0 for the plain
        activation.
    slot : (T,) int, the row of ``out`` for each step, or -1.
    out : (n_slots, n, m), written.
    """
    n, k = Z.shape
    m = a.shape[0]
    T = X.shape[1] // m
    n_chunks = (n + NB_FORWARD - 1) // NB_FORWARD
    for ch in prange(n_chunks):
        n0 = ch * NB_FORWARD
        nb = min(NB_FORWARD, n - n0)
        psi = np.zeros((T, m, NB_FORWARD))
        u = np.zeros((m, NB_FORWARD))
        for s in range(T):
            for j in range(m):
                for b in range(NB_FORWARD):
                    u[j, b] = 0.0
                for p in range(s):
                    for q in range(m):
                        r = Rw[s * m + j, p * m + q]
                        for b in range(NB_FORWARD):
                            u[j, b] += r * psi[p, q, b]
            for b in range(nb):
                i = n0 + b
                f = 0.0
                for j in range(m):
                    v = X[i, s * m + j] - c * u[j, b]
                    for e in range(k):
                        v += M[s, j, e] * Z[i, e]
                    u[j, b] = v
                    sj, dsj = _forward_activation(act, v, widths[s, j])
                    f += a[j] * sj
                    psi[s, j, b] = a[j] * dsj
                _, dl, _ = loss(loss_code, Y[i], f, huber_delta)
                for j in range(m):
                    psi[s, j, b] *= dl
                if slot[s] >= 0:
                    for j in range(m):
                        out[slot[s], i, j] = u[j, b]


@njit(cache=True, inline="always")
def _forward_chunk(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out, ch, R,
                   NBR, W, L):  # fmt: skip
    """:func:`forward_process` for the draws of chunk ``ch`` (``NBR`` of them, the last chunk
    possibly fewer) and ``m = R``: the memory term of step ``s`` by the explicit-SIMD
    ``dot_rows`` over the chunk's ``psi^p``, ``p < s`` (rows ``p m + q``, columns the draws;
    ``R x W`` accumulators of ``L`` lanes, ``W = NBR / L``).  Literal ``R``, ``NBR``, ``W``,
    ``L`` as in :func:`_chunk_rows`."""
    n, k = Z.shape
    T = X.shape[1] // R
    n0 = ch * NBR
    nb = min(NBR, n - n0)
    psi = np.zeros((T * R, NBR))
    u = np.zeros((R, NBR))
    for s in range(T):
        if s > 0:
            dot_rows(Rw[s * R : (s + 1) * R, : s * R], 0, psi[: s * R], u, R, W, L)
        for b in range(nb):
            i = n0 + b
            f = 0.0
            for j in range(R):
                v = X[i, s * R + j] - c * u[j, b]
                for e in range(k):
                    v += M[s, j, e] * Z[i, e]
                sj, dsj = _forward_activation(act, v, widths[s, j])
                f += a[j] * sj
                psi[s * R + j, b] = a[j] * dsj
                if slot[s] >= 0:
                    out[slot[s], i, j] = v
            _, dl, _ = loss(loss_code, Y[i], f, huber_delta)
            for j in range(R):
                psi[s * R + j, b] *= dl


# chunks of draws for each width: R x W accumulators of 4 lanes, at most 12 of AVX2's 16
@njit(cache=True, parallel=True)
def forward_process_m1(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out):
    """:func:`forward_process` for m = 1: chunks of 32 draws."""
    for ch in prange(-(-Z.shape[0] // 32)):
        _forward_chunk(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out,
                       ch, 1, 32, 8, 4)  # fmt: skip


@njit(cache=True, parallel=True)
def forward_process_m2(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out):
    """:func:`forward_process` for m = 2: chunks of 16 draws."""
    for ch in prange(-(-Z.shape[0] // 16)):
        _forward_chunk(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out,
                       ch, 2, 16, 4, 4)  # fmt: skip


@njit(cache=True, parallel=True)
def forward_process_m3(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out):
    """:func:`forward_process` for m = 3: chunks of 12 draws."""
    for ch in prange(-(-Z.shape[0] // 12)):
        _forward_chunk(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out,
                       ch, 3, 12, 3, 4)  # fmt: skip


@njit(cache=True, parallel=True)
def forward_process_m4(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out):
    """:func:`forward_process` for m = 4: chunks of 12 draws."""
    for ch in prange(-(-Z.shape[0] // 12)):
        _forward_chunk(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out,
                       ch, 4, 12, 3, 4)  # fmt: skip


@njit(cache=True, parallel=True)
def draw_major(G, out):
    """``out[i, s m + j] = G[s, i, j]``: innovations drawn step by step (``T x N x m``) laid
    out a draw to a row (``N x T m``), the layout of the field's triangular product.  A copy,
    in parallel over the draws."""
    T, N, m = G.shape
    for i in prange(N):
        for s in range(T):
            for j in range(m):
                out[i, s * m + j] = G[s, i, j]


@njit(cache=True, fastmath={"reassoc", "contract"})
def semidefinite_cholesky(C, m, rtol, L):
    """The lower-triangular ``L`` with ``L L^T = C`` for a positive semidefinite ``C``, row
    by row, in place (docs/theory.md 8.6, eq. (D7)).

    ``C`` is the covariance of a field over steps, ``m`` coordinates a step.  A pivot below
    ``rtol`` times the largest variance of its step is set to 0 and its column takes no part
    in later rows.  Row ``i`` reads only ``C[i, :i + 1]`` and the rows before it, each entry a
    dot product in a fixed order, so the rows of a step are the same, to the last bit,
    whatever the number of steps factored (the dots may be vectorised: their order depends
    on their length only).  ``L`` (``b x b``, zero) is overwritten.
    """
    b = C.shape[0]
    active = np.zeros(b, dtype=np.bool_)
    for i in range(b):
        s = i // m
        scale = 0.0
        for j in range(s * m, min((s + 1) * m, b)):
            scale = max(scale, C[j, j])
        for j in range(i):
            if active[j]:
                acc = C[i, j]
                for k in range(j):
                    acc -= L[i, k] * L[j, k]
                L[i, j] = acc / L[j, j]
        piv = C[i, i]
        for k in range(i):
            piv -= L[i, k] * L[i, k]
        active[i] = scale > 0.0 and piv > rtol * scale
        L[i, i] = math.sqrt(piv) if active[i] else 0.0
