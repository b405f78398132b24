"""Passes over the two halves of a law's nodes, on two threads (docs/theory.md 3.6, 3.7, 4.3).

A pass over the nodes of an ``m = 2..4`` sweep law (32k nodes) is the unit of the theory's cost
(``moments_m4`` and ``pivot_m4``, a few hundred passes a point of the m = 4 sweep).  Its two halves, stored as
two contiguous copies (``rmt.freeprob.mp._LawNodes``), run on two threads and their sums are
added in a fixed order: the result does not depend on the number of threads (on one thread the
halves run one after the other).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from rmt.kernels._generated.freeprob_small import (
    moments_m2,
    moments_m3,
    moments_m4,
    pivot_m2,
    pivot_m3,
    pivot_m4,
    spike_nodes_m1,
    spike_nodes_m2,
    spike_nodes_m3,
    spike_nodes_m4,
)


@njit(cache=True, parallel=True)
def moments_halves(m, D0, D1, w0, w1, G, inv_delta, with_jac, EF, JF):
    """``MOMENTS[m]`` (``m = 2, 3, 4``, real ``G``) over the nodes ``(D0, w0)`` and ``(D1, w1)``
    (``vech D`` node-last, each contiguous): adds ``E[F]`` to ``EF`` and, with ``with_jac``, the
    Jacobian moments to ``JF``, the first half's sums before the second's.  Returns the number
    of singular nodes."""
    p = JF.shape[0]
    EFs = np.zeros((2, m, m))
    JFs = np.zeros((2, p, p))
    bad = np.zeros(2, np.int64)
    for h in prange(2):
        D = D0 if h == 0 else D1
        w = w0 if h == 0 else w1
        if m == 2:
            bad[h] = moments_m2(D, w, G, inv_delta, with_jac, EFs[h], JFs[h])
        elif m == 3:
            bad[h] = moments_m3(D, w, G, inv_delta, with_jac, EFs[h], JFs[h])
        else:
            bad[h] = moments_m4(D, w, G, inv_delta, with_jac, EFs[h], JFs[h])
    for h in range(2):
        EF += EFs[h]
        JF += JFs[h]
    return bad[0] + bad[1]


@njit(cache=True, parallel=True)
def min_pivot_halves(m, D0, D1, L, scale):
    """The smallest Cholesky pivot of ``I + scale L^T D_i L`` over the nodes of both halves
    (``PIVOTS[m]``, ``m = 2, 3, 4``), or ``-1.0`` when a node has a pivot ``<= 0``."""
    lows = np.empty(2)
    bad = np.zeros(2, np.int64)
    for h in prange(2):
        D = D0 if h == 0 else D1
        out = np.empty(D.shape[1])
        if m == 2:
            bad[h] = pivot_m2(D, L, scale, out)
        elif m == 3:
            bad[h] = pivot_m3(D, L, scale, out)
        else:
            bad[h] = pivot_m4(D, L, scale, out)
        lows[h] = out.min()
    if bad[0] + bad[1] > 0:
        return -1.0
    return min(lows[0], lows[1])


@njit(cache=True, fastmath={"reassoc", "contract"})
def _block_sums(blocks, ZZ, b, p, Y):
    """``Y[q, c] += sum_j ZZ[b, q, j] blocks[b, p + c, j]``: the weighted sums of one block's
    ``vech F`` and ``vech F G' F`` (``c < 2 p``) by the weight rows ``w zhat_q zhat_r``."""
    for q in range(ZZ.shape[1]):
        for c in range(2 * p):
            s = 0.0
            for j in range(ZZ.shape[2]):
                s += ZZ[b, q, j] * blocks[b, p + c, j]
            Y[q, c] += s


@njit(cache=True, parallel=True)
def spike_sums_halves(m, W, blocks, ZZ, G, Gp, inv_delta, Y):
    """The spike sums of ``MPSystem._spike_matrices_unrolled`` for many weight rows: per block of
    the workspace ``W`` (``blocks`` is its ``n_blocks x 3p x SPIKE_BLOCK`` view), ``SPIKE_NODES[m]``
    and then the block's weighted sums (:func:`_block_sums`) while it is in cache; the first and
    the second half of the blocks on two threads, added in that order into ``Y`` (``pairs x 2p``).
    Returns the number of singular nodes."""
    nb, rows, B = blocks.shape
    p = rows // 3
    half = (nb + 1) // 2
    Yh = np.zeros((2, ZZ.shape[1], 2 * p))
    bad = np.zeros(2, np.int64)
    for h in prange(2):
        lo = 0 if h == 0 else half
        hi = half if h == 0 else nb
        for b in range(lo, hi):
            Wb = W[b * rows * B : (b + 1) * rows * B]
            if m == 1:
                bad[h] += spike_nodes_m1(Wb, 1, G, Gp, inv_delta)
            elif m == 2:
                bad[h] += spike_nodes_m2(Wb, 1, G, Gp, inv_delta)
            elif m == 3:
                bad[h] += spike_nodes_m3(Wb, 1, G, Gp, inv_delta)
            else:
                bad[h] += spike_nodes_m4(Wb, 1, G, Gp, inv_delta)
            _block_sums(blocks, ZZ, b, p, Yh[h])
    Y[:, :] = Yh[0] + Yh[1]
    return bad[0] + bad[1]


@njit(cache=True)
def fill_spike_workspace(Dv, w, zhat, qa, qb, W, ZZ):
    """Fill the block workspace of :func:`spike_sums_halves` for the nodes ``(Dv, w, zhat)``
    (``Dv``: ``vech D`` node-last): in block ``b`` of ``W`` (``3p`` rows of ``B`` nodes), rows
    ``0 .. p-1`` get ``vech D`` of nodes ``b B .. b B + B - 1``; ``ZZ[b, k, j]`` gets the weight
    row ``w zhat_qa[k] zhat_qb[k]`` of node ``b B + j``.  Nodes past the last (the padding of the
    last block) get ``D = 0`` and weight 0.  The output rows ``p .. 3p-1`` are left as they are:
    the node kernel writes all of them before they are read."""
    p, N = Dv.shape
    n_blocks, pairs, B = ZZ.shape
    rows = 3 * p
    for b in range(n_blocks):
        base = b * rows * B
        for u in range(p):
            for j in range(B):
                i = b * B + j
                W[base + u * B + j] = Dv[u, i] if i < N else 0.0
        for k in range(pairs):
            for j in range(B):
                i = b * B + j
                ZZ[b, k, j] = w[i] * zhat[i, qa[k]] * zhat[i, qb[k]] if i < N else 0.0
