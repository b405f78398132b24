"""Numba kernels of the operator-valued Marchenko-Pastur equation (THEORY.md sections 3-4).

For nodes ``(zhat_i, D_i)`` with weights ``w_i`` and a symmetric ``G`` (real or complex),

    F_i = D_i (I + G D_i / delta)^{-1} = (I + D_i G / delta)^{-1} D_i      (symmetric).

Symmetric ``m x m`` matrices are handled through their upper-triangular entries ``(ia[p], ib[p])``;
the basis matrix of entry ``p`` is ``e_a e_b^T + e_b e_a^T`` (``a != b``) or ``e_a e_a^T``.
All kernels are leaves taking arrays and scalars, so they are cached.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _solve_in_place(M, B):
    """Overwrite ``B`` with ``M^{-1} B`` (Gaussian elimination, partial pivoting; ``M`` is lost).

    Returns ``False`` when a pivot is exactly zero.
    """
    m = M.shape[0]
    for c in range(m):
        piv = c
        best = abs(M[c, c])
        for r in range(c + 1, m):
            if abs(M[r, c]) > best:
                best = abs(M[r, c])
                piv = r
        if best == 0.0:
            return False
        if piv != c:
            for t in range(m):
                M[c, t], M[piv, t] = M[piv, t], M[c, t]
                B[c, t], B[piv, t] = B[piv, t], B[c, t]
        inv = 1.0 / M[c, c]
        for r in range(m):
            if r != c and M[r, c] != 0.0:
                fac = M[r, c] * inv
                for t in range(c, m):
                    M[r, t] -= fac * M[c, t]
                for t in range(m):
                    B[r, t] -= fac * B[c, t]
    for c in range(m):
        inv = 1.0 / M[c, c]
        for t in range(m):
            B[c, t] *= inv
    return True


@njit(cache=True)
def _node_F(Di, G, inv_delta, M, F):
    """``F = (I + D_i G / delta)^{-1} D_i``, symmetrised; returns False on a singular system."""
    m = G.shape[0]
    for a in range(m):
        for b in range(m):
            s = 0.0 * G[0, 0]
            for c in range(m):
                s += Di[a, c] * G[c, b]
            M[a, b] = s * inv_delta + (1.0 if a == b else 0.0)
            F[a, b] = Di[a, b]
    ok = _solve_in_place(M, F)
    for a in range(m):
        for b in range(a + 1, m):
            v = 0.5 * (F[a, b] + F[b, a])
            F[a, b] = v
            F[b, a] = v
    return ok


@njit(cache=True)
def mp_moments(D, w, G, inv_delta, ia, ib, with_jac, EF, JF):
    """Accumulate ``EF = E[F]`` and, if ``with_jac``, ``JF[p, q] = E[(F E_q F)[ia_p, ib_p]]``.

    ``EF`` and ``JF`` must be zeroed by the caller and have the dtype of ``G``.
    Returns the number of nodes whose system was singular (then the sums are invalid).
    """
    N, m, _ = D.shape
    p = ia.shape[0]
    M = np.empty((m, m), dtype=G.dtype)
    F = np.empty((m, m), dtype=G.dtype)
    bad = 0
    for i in range(N):
        if not _node_F(D[i], G, inv_delta, M, F):
            bad += 1
            continue
        wi = w[i]
        for a in range(m):
            for b in range(m):
                EF[a, b] += wi * F[a, b]
        if with_jac:
            for P in range(p):
                a = ia[P]
                b = ib[P]
                for Q in range(p):
                    c = ia[Q]
                    d = ib[Q]
                    v = F[a, c] * F[d, b]
                    if c != d:
                        v += F[a, d] * F[c, b]
                    JF[P, Q] += wi * v
    return bad


@njit(cache=True)
def spike_moments(D, w, zhat, G, Gp, inv_delta, ES, ESp):
    """``ES = E[kron(zhat zhat^T, F)]`` and ``ESp = E[kron(zhat zhat^T, F Gp F)]`` (real ``G``).

    Index ``(q, l) -> q*m + l`` is the row-major vectorisation of ``A`` in ``R^{K x m}``.
    """
    N, m, _ = D.shape
    K = zhat.shape[1]
    M = np.empty((m, m))
    F = np.empty((m, m))
    T = np.empty((m, m))
    FGF = np.empty((m, m))
    bad = 0
    for i in range(N):
        if not _node_F(D[i], G, inv_delta, M, F):
            bad += 1
            continue
        for a in range(m):
            for b in range(m):
                s = 0.0
                for c in range(m):
                    s += Gp[a, c] * F[c, b]
                T[a, b] = s
        for a in range(m):
            for b in range(m):
                s = 0.0
                for c in range(m):
                    s += F[a, c] * T[c, b]
                FGF[a, b] = s
        wi = w[i]
        for q1 in range(K):
            for q2 in range(K):
                zz = wi * zhat[i, q1] * zhat[i, q2]
                for a in range(m):
                    for b in range(m):
                        ES[q1 * m + a, q2 * m + b] += zz * F[a, b]
                        ESp[q1 * m + a, q2 * m + b] += zz * FGF[a, b]
    return bad


@njit(cache=True)
def min_pd_pivot(D, L, scale):
    """Smallest Cholesky pivot over nodes of ``I + scale * L^T D_i L``; ``-1`` if one is not PD.

    With ``s G = L L^T`` (``s = +-1``) and ``scale = s / delta``, all pivots positive means every
    ``I + G D_i / delta`` has positive spectrum: the real branch has not crossed a pole.
    """
    N, m, _ = D.shape
    C = np.empty((m, m))
    T = np.empty((m, m))
    best = np.inf
    for i in range(N):
        for a in range(m):
            for b in range(m):
                s = 0.0
                for c in range(m):
                    s += D[i, a, c] * L[c, b]
                T[a, b] = s
        for a in range(m):
            for b in range(m):
                s = 0.0
                for c in range(m):
                    s += L[c, a] * T[c, b]
                C[a, b] = scale * s + (1.0 if a == b else 0.0)
        for c in range(m):
            piv = C[c, c]
            for t in range(c):
                piv -= C[c, t] * C[c, t]
            if piv <= 0.0:
                return -1.0
            if piv < best:
                best = piv
            r = np.sqrt(piv)
            C[c, c] = r
            for a in range(c + 1, m):
                s = C[a, c]
                for t in range(c):
                    s -= C[a, t] * C[c, t]
                C[a, c] = s / r
    return best
