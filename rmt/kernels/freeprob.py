"""Numba kernels of the operator-valued Marchenko-Pastur equation (docs/theory.md sections 3-4).

For nodes ``(zhat_i, D_i)`` with weights ``w_i`` and a symmetric ``G`` (real or complex),

    F_i = D_i (I + G D_i / delta)^{-1} = (I + D_i G / delta)^{-1} D_i      (symmetric).

Symmetric ``m x m`` matrices are handled through their upper-triangular entries ``(ia[p], ib[p])``;
the basis matrix of entry ``p`` is ``e_a e_b^T + e_b e_a^T`` (``a != b``) or ``e_a e_a^T``.
All kernels are leaves taking arrays and scalars, so they are cached.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _pivot(M, c):
    """``(row, |entry|)`` of the largest entry of column ``c`` of ``M`` on or below the diagonal."""
    piv = c
    best = abs(M[c, c])
    for r in range(c + 1, M.shape[0]):
        if abs(M[r, c]) > best:
            best = abs(M[r, c])
            piv = r
    return piv, best


@njit(cache=True)
def _solve_in_place(M, B):
    """Overwrite ``B`` with ``M^{-1} B`` (Gaussian elimination, partial pivoting; ``M`` is lost).

    Returns ``False`` when a pivot is exactly zero.
    """
    m = M.shape[0]
    for c in range(m):
        piv, best = _pivot(M, c)
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


@njit(cache=True, inline="always")
def _node_F2(D, i, G, inv_delta, F):
    """``m = 2``: ``F = adj(M) D / det(M)`` with ``M = I + D G / delta``."""
    d00, d01, d11 = D[i, 0, 0], D[i, 0, 1], D[i, 1, 1]
    m00 = 1.0 + (d00 * G[0, 0] + d01 * G[1, 0]) * inv_delta
    m01 = (d00 * G[0, 1] + d01 * G[1, 1]) * inv_delta
    m10 = (d01 * G[0, 0] + d11 * G[1, 0]) * inv_delta
    m11 = 1.0 + (d01 * G[0, 1] + d11 * G[1, 1]) * inv_delta
    det = m00 * m11 - m01 * m10
    if det == 0.0:
        return False
    inv = 1.0 / det
    f00 = (m11 * d00 - m01 * d01) * inv
    f01 = (m11 * d01 - m01 * d11) * inv
    f10 = (-m10 * d00 + m00 * d01) * inv
    f11 = (-m10 * d01 + m00 * d11) * inv
    F[0, 0] = f00
    F[1, 1] = f11
    F[0, 1] = 0.5 * (f01 + f10)
    F[1, 0] = F[0, 1]
    return True


@njit(cache=True, inline="always")
def _node_F(D, i, G, inv_delta, M, F):
    """``F = (I + D_i G / delta)^{-1} D_i``, symmetrised; returns False on a singular system.

    Closed forms for ``m = 1, 2`` (the common cases), Gaussian elimination above.
    """
    m = G.shape[0]
    if m == 1:
        den = 1.0 + D[i, 0, 0] * G[0, 0] * inv_delta
        if den == 0.0:
            return False
        F[0, 0] = D[i, 0, 0] / den
        return True
    if m == 2:
        return _node_F2(D, i, G, inv_delta, F)
    Di = D[i]
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
def _moments_m2(D, w, G, inv_delta, with_jac, EF, JF):
    """``mp_moments`` for ``m = 2`` with scalar accumulators (symmetric pairs 00, 01, 11)."""
    F = np.empty((2, 2), dtype=G.dtype)
    z = 0.0 * G[0, 0]
    e00, e01, e11 = z, z, z
    s0, s1, s2, s3, s4, s5 = z, z, z, z, z, z
    bad = 0
    for i in range(D.shape[0]):
        if not _node_F2(D, i, G, inv_delta, F):
            bad += 1
            continue
        wi = w[i]
        f00, f01, f11 = F[0, 0], F[0, 1], F[1, 1]
        e00 += wi * f00
        e01 += wi * f01
        e11 += wi * f11
        if with_jac:
            s0 += wi * f00 * f00
            s1 += wi * f00 * f01
            s2 += wi * f01 * f01
            s3 += wi * f00 * f11
            s4 += wi * f01 * f11
            s5 += wi * f11 * f11
    EF[0, 0] += e00
    EF[0, 1] += e01
    EF[1, 0] += e01
    EF[1, 1] += e11
    if with_jac:
        JF[0, 0] += s0
        JF[0, 1] += 2.0 * s1
        JF[0, 2] += s2
        JF[1, 0] += s1
        JF[1, 1] += s3 + s2
        JF[1, 2] += s4
        JF[2, 0] += s2
        JF[2, 1] += 2.0 * s4
        JF[2, 2] += s5
    return bad


@njit(cache=True, inline="always")
def _vech_pair(A, a, b, c, d):
    """``(A E_cd A)[a, b]`` for the symmetric unit ``E_cd`` of the ``vech`` coordinates:
    ``A[a, c] A[d, b] + A[a, d] A[c, b]``, the second term only off the diagonal (``c != d``)."""
    v = A[a, c] * A[d, b]
    if c != d:
        v += A[a, d] * A[c, b]
    return v


@njit(cache=True)
def mp_moments(D, w, G, inv_delta, ia, ib, with_jac, EF, JF):
    """Accumulate ``EF = E[F]`` and, if ``with_jac``, ``JF[p, q] = E[(F E_q F)[ia_p, ib_p]]``.

    ``EF`` and ``JF`` must be zeroed by the caller and have the dtype of ``G``.
    Returns the number of nodes whose system was singular (then the sums are invalid).
    """
    N, m, _ = D.shape
    if m == 2:
        return _moments_m2(D, w, G, inv_delta, with_jac, EF, JF)
    p = ia.shape[0]
    M = np.empty((m, m), dtype=G.dtype)
    F = np.empty((m, m), dtype=G.dtype)
    bad = 0
    for i in range(N):
        if not _node_F(D, i, G, inv_delta, M, F):
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
                    JF[P, Q] += wi * _vech_pair(F, a, b, ia[Q], ib[Q])
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
        if not _node_F(D, i, G, inv_delta, M, F):
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
def _min_pd_pivot_small(D, L, scale):
    """``min_pd_pivot`` for ``m <= 2`` in closed form (pivots ``c00`` and ``det C / c00``)."""
    N, m, _ = D.shape
    best = np.inf
    if m == 1:
        l2 = L[0, 0] * L[0, 0] * scale
        for i in range(N):
            piv = 1.0 + l2 * D[i, 0, 0]
            if piv <= 0.0:
                return -1.0
            best = min(best, piv)
        return best
    l00, l10, l11 = L[0, 0], L[1, 0], L[1, 1]
    for i in range(N):
        d00, d01, d11 = D[i, 0, 0], D[i, 0, 1], D[i, 1, 1]
        # C = I + scale * L^T D L with L lower triangular
        t00 = d00 * l00 + d01 * l10
        t10 = d01 * l00 + d11 * l10
        t01 = d01 * l11
        t11 = d11 * l11
        c00 = 1.0 + scale * (l00 * t00 + l10 * t10)
        c01 = scale * (l00 * t01 + l10 * t11)
        c11 = 1.0 + scale * (l11 * t11)
        if c00 <= 0.0:
            return -1.0
        piv = c11 - c01 * c01 / c00
        if piv <= 0.0:
            return -1.0
        best = min(best, c00, piv)
    return best


@njit(cache=True)
def min_pd_pivot(D, L, scale):
    """Smallest Cholesky pivot over nodes of ``I + scale * L^T D_i L``; ``-1`` if one is not PD.

    With ``s G = L L^T`` (``s = +-1``) and ``scale = s / delta``, all pivots positive means every
    ``I + G D_i / delta`` has positive spectrum: the real branch has not crossed a pole.
    """
    N, m, _ = D.shape
    if m <= 2:
        return _min_pd_pivot_small(D, L, scale)
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
            best = min(best, piv)
            r = np.sqrt(piv)
            C[c, c] = r
            for a in range(c + 1, m):
                s = C[a, c]
                for t in range(c):
                    s -= C[a, t] * C[c, t]
                C[a, c] = s / r
    return best


@njit(cache=True)
def mp_residual(EF, JF, G, zeta, inv_delta, ia, ib, R, J):
    """Residual and Jacobian of (MP) from the moments (docs/theory.md section 3), in one call.

    ``R = vech(-zeta I + EF - G^{-1})`` and ``J = -JF / delta + (X -> G^{-1} X G^{-1})`` in
    symmetric coordinates.  Returns ``(ok, scale, max |G^{-1}|)`` with
    ``scale = 1 + |zeta| + max |G^{-1}| + max |EF|``; ``ok`` is False when ``G`` is singular or
    ``EF`` is not finite (then ``R`` and ``J`` are not valid).
    """
    m = G.shape[0]
    p = ia.shape[0]
    M = np.empty((m, m), dtype=G.dtype)
    Ginv = np.zeros((m, m), dtype=G.dtype)
    for a in range(m):
        Ginv[a, a] = 1.0
        for b in range(m):
            M[a, b] = G[a, b]
    if not _solve_in_place(M, Ginv):
        return False, 1.0, 0.0
    ginv_max = 0.0
    ef_max = 0.0
    for a in range(m):
        for b in range(m):
            if not np.isfinite(EF[a, b]):
                return False, 1.0, 0.0
            ginv_max = max(ginv_max, abs(Ginv[a, b]))
            ef_max = max(ef_max, abs(EF[a, b]))
    for P in range(p):
        a = ia[P]
        b = ib[P]
        R[P] = EF[a, b] - Ginv[a, b] - (zeta if a == b else 0.0)
        for Q in range(p):
            J[P, Q] = _vech_pair(Ginv, a, b, ia[Q], ib[Q]) - JF[P, Q] * inv_delta
    return True, 1.0 + abs(zeta) + ginv_max + ef_max, ginv_max


@njit(cache=True)
def lu_solve_checked(A, b, x):
    """``x = A^{-1} b`` for a small real square ``A`` by Gaussian elimination with partial
    pivoting (``A`` and ``b`` are not changed).  Returns the ratio of the smallest to the largest
    pivot magnitude (0 when a pivot is exactly zero; then ``x`` is not valid): the caller falls
    back to a truncated least-squares solve when it is small."""
    n = A.shape[0]
    M = np.empty((n, n))
    for r in range(n):
        x[r] = b[r]
        for c in range(n):
            M[r, c] = A[r, c]
    small, large = np.inf, 0.0
    for c in range(n):
        piv, best = _pivot(M, c)
        if best == 0.0:
            return 0.0
        small, large = min(small, best), max(large, best)
        if piv != c:
            for t in range(n):
                M[c, t], M[piv, t] = M[piv, t], M[c, t]
            x[c], x[piv] = x[piv], x[c]
        inv = 1.0 / M[c, c]
        for r in range(c + 1, n):
            f = M[r, c] * inv
            if f != 0.0:
                for t in range(c + 1, n):
                    M[r, t] -= f * M[c, t]
                x[r] -= f * x[c]
    for r in range(n - 1, -1, -1):
        s = x[r]
        for t in range(r + 1, n):
            s -= M[r, t] * x[t]
        x[r] = s / M[r, r]
    return small / large


@njit(cache=True, inline="always")
def _scalar_node(T, w, i, g):
    """Node ``i`` of an ``m = 1`` law at ``g = s / delta``: ``(F, w F, w F^2, past a pole)``."""
    den = 1.0 + T[i] * g
    f = T[i] / den
    wf = w[i] * f
    return f, wf, wf * f, den <= 0.0


@njit(cache=True)
def scalar_moments(T, w, s, inv_delta, out):
    """``m = 1`` (docs/theory.md 3.4): ``out[k-1] = E[F^k]`` for ``k = 1, 2, 3`` with
    ``F = T / (1 + T s / delta)`` over the nodes ``T`` of weights ``w``, in one pass.  Returns the
    number of nodes with ``1 + T s / delta <= 0`` (past a pole: ``out`` is then not valid)."""
    g = s * inv_delta
    e1 = 0.0
    e2 = 0.0
    e3 = 0.0
    bad = 0
    for i in range(T.shape[0]):
        f, wf, wf2, past = _scalar_node(T, w, i, g)
        bad += past
        e1 += wf
        e2 += wf2
        e3 += wf2 * f
    out[0] = e1
    out[1] = e2
    out[2] = e3
    return bad


@njit(cache=True)
def scalar_spike_sums(T, w, Z, s, inv_delta, S1, S2, out):
    """``m = 1``: ``S1[q, r] = E[z_q z_r F]``, ``S2[q, r] = E[z_q z_r F^2]`` (the spike matrices
    of docs/theory.md section 4 at ``G = s``, ``G' = 1``), ``out = (E[F], E[F^2])``, in one pass
    over the nodes ``(T_i, Z_i)``.  Returns the number of nodes past a pole (as
    :func:`scalar_moments`).  With two spike coordinates (``Theta*`` and ``W``, the sweep laws)
    the sums stay in registers; otherwise they accumulate in ``S1``, ``S2``."""
    K = Z.shape[1]
    g = s * inv_delta
    e1 = 0.0
    e2 = 0.0
    bad = 0
    if K == 2:
        a00 = a01 = a11 = 0.0
        b00 = b01 = b11 = 0.0
        for i in range(T.shape[0]):
            _, wf, wf2, past = _scalar_node(T, w, i, g)
            bad += past
            e1 += wf
            e2 += wf2
            z0 = Z[i, 0]
            z1 = Z[i, 1]
            a00 += z0 * z0 * wf
            b00 += z0 * z0 * wf2
            a01 += z0 * z1 * wf
            b01 += z0 * z1 * wf2
            a11 += z1 * z1 * wf
            b11 += z1 * z1 * wf2
        S1[0, 0], S1[0, 1], S1[1, 0], S1[1, 1] = a00, a01, a01, a11
        S2[0, 0], S2[0, 1], S2[1, 0], S2[1, 1] = b00, b01, b01, b11
    else:
        S1[:, :] = 0.0
        S2[:, :] = 0.0
        for i in range(T.shape[0]):
            _, wf, wf2, past = _scalar_node(T, w, i, g)
            bad += past
            e1 += wf
            e2 += wf2
            for q in range(K):
                zq = Z[i, q]
                for r in range(q, K):
                    zz = zq * Z[i, r]
                    S1[q, r] += zz * wf
                    S2[q, r] += zz * wf2
        for q in range(K):
            for r in range(q + 1, K):
                S1[r, q] = S1[q, r]
                S2[r, q] = S2[q, r]
    out[0] = e1
    out[1] = e2
    return bad
