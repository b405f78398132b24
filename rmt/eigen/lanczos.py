"""Thick-restart (block) Lanczos with full reorthogonalisation, ours.

One engine serves both methods: ``block=1`` is the single-vector thick-restart Lanczos of
Wu & Simon (TRLan, 2000); ``block=b>1`` is its block form, where each step multiplies ``b``
vectors in one product (for an ``rmt.Hessian``: one pass over ``X``, docs/theory.md section 2).

The basis ``Q`` and the projected matrix ``S = Q^T A Q`` are kept explicitly, as in the
Krylov-Schur method (Stewart, 2001): after a restart ``S`` is diagonal (the kept Ritz values)
plus the coupling to the residual block, and the next steps fill it in.  Every new block is
orthogonalised against the whole basis by classical Gram-Schmidt, with a second pass whenever
the first one cancelled much of a column (the criterion of Daniel, Gragg, Kaufman & Stewart,
1976: "twice is enough"), so no ghost copies appear.  The raw products ``A Q`` are kept beside
``Q``: the Ritz vectors' products ``A V = (A Q) Y`` then give true residuals without another
product.  All eigenvalues sought are the *smallest* ones: callers negate the operator for the
largest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmt.kernels.lanczos import (
    basis_coefficients,
    orthonormalise_small,
    project_step,
    subtract_combination,
)

EPS = np.finfo(np.float64).eps
#: a Gram-Schmidt pass is repeated when it leaves less than this fraction of a column's norm
REORTH_ETA = 1.0 / np.sqrt(2.0)
#: the products ``A Q`` are kept when they take at most this many bytes (beyond, the caller
#: pays one product for the residuals instead of doubling the memory of a huge basis)
PRODUCTS_BUDGET = 2**30


@dataclass(frozen=True, kw_only=True)
class KrylovOutcome:
    """What the engine found: the wanted Ritz pairs (and ``products = A vectors``, from the
    products already made; ``None`` when ``A Q`` was not kept), their estimated residuals, and
    status."""

    values: np.ndarray
    vectors: np.ndarray
    products: np.ndarray
    residual_estimates: np.ndarray
    converged: np.ndarray
    norm_estimate: float
    restarts: int


def thick_restart_lanczos(op, k, block, ncv, tol, max_restarts, rng, keep=None):
    """The ``k`` smallest eigenpairs of the symmetric ``op`` by thick-restart block Lanczos.

    ``ncv`` is the largest basis size; ``keep`` the number of Ritz vectors kept at a restart
    (default halfway between ``k`` and ``ncv``).  After every step the Ritz pairs of ``S`` are
    checked (cheap: ``S`` is at most ``ncv x ncv``).  A pair counts as converged when its
    residual ``||R Y_last||`` (equal to ``||A y - theta y||`` up to rounding, thanks to the
    full reorthogonalisation) is at most ``tol * ||A||_est`` with ``||A||_est`` the largest
    ``|theta|`` seen.  Returns a :class:`KrylovOutcome`; never raises on non-convergence.
    """
    N = op.shape[0]
    Q = np.zeros((N, ncv + block), order="F")  # columns contiguous: BLAS-3 on Q[:, :j]
    keep_products = N * ncv * 8 <= PRODUCTS_BUDGET
    AQ = np.zeros((N, ncv), order="F") if keep_products else None  # AQ[:, :j] = A Q[:, :j]
    S = np.zeros((ncv, ncv))
    Q[:, :block] = _orthonormal_columns(rng.standard_normal((N, block)))
    j, anorm, restarts = 0, 0.0, 0
    while True:
        j, R, anorm, exhausted = _lanczos_step(op, Q, AQ, S, j, block, anorm, rng)
        if j >= N or exhausted:
            return _exhausted_outcome(Q, AQ, S, j, k, anorm, restarts)
        if j < k and j + block <= ncv:
            continue
        theta, Y = np.linalg.eigh(S[:j, :j])
        anorm = max(anorm, float(np.max(np.abs(theta))))
        res = np.linalg.norm(R @ Y[j - block : j, :], axis=0)
        order = np.argsort(theta, kind="stable")
        want = order[: min(k, j)]
        conv = res[want] <= tol * anorm
        last = j + block > ncv and restarts == max_restarts
        if (len(want) == k and np.all(conv)) or last:
            vectors, products = Q[:, :j] @ Y[:, want], _combine(AQ, slice(0, j), Y[:, want])
            return KrylovOutcome(
                values=theta[want],
                vectors=vectors,
                products=products,
                residual_estimates=res[want],
                converged=conv,
                norm_estimate=anorm,
                restarts=restarts,
            )
        if j + block > ncv:
            j = _restart(Q, AQ, S, R, theta, Y, order, j, k, ncv, block, keep)
            restarts += 1


def _exhausted_outcome(Q, AQ, S, j, k, anorm, restart):
    """The basis spans an invariant subspace: Ritz pairs on its non-zero columns are exact."""
    live = np.flatnonzero(np.any(Q[:, :j], axis=0))
    theta, Y = np.linalg.eigh(S[np.ix_(live, live)])
    anorm = max(anorm, float(np.max(np.abs(theta))))
    want = np.argsort(theta, kind="stable")[:k]
    vectors, products = Q[:, live] @ Y[:, want], _combine(AQ, live, Y[:, want])
    zeros, ok = np.zeros(len(want)), np.ones(len(want), bool)
    return KrylovOutcome(
        values=theta[want],
        vectors=vectors,
        products=products,
        residual_estimates=zeros,
        converged=ok,
        norm_estimate=anorm,
        restarts=restart,
    )


def _combine(AQ, columns, Y):
    """``AQ[:, columns] @ Y``, or ``None`` when the products were not kept."""
    return None if AQ is None else AQ[:, columns] @ Y


def _restart(Q, AQ, S, R, theta, Y, order, j, k, ncv, block, keep):
    """Compress the basis to ``p`` Ritz vectors plus the residual block; return ``p``."""
    if keep is None:
        keep = (k + ncv) // 2
    p = int(min(max(keep, k), j - block, ncv - 2 * block))
    p = max(p, 0)
    kept = order[:p]
    Q[:, :p] = Q[:, :j] @ Y[:, kept]
    if AQ is not None:
        AQ[:, :p] = AQ[:, :j] @ Y[:, kept]
    Q[:, p : p + block] = Q[:, j : j + block]
    S[:] = 0.0
    S[np.arange(p), np.arange(p)] = theta[kept]
    coupling = R @ Y[j - block : j, kept]
    S[p : p + block, :p] = coupling
    S[:p, p : p + block] = coupling.T
    return p


def _lanczos_step(op, Q, AQ, S, j, block, anorm, rng):
    """One block step: multiply ``Q[:, j:j+block]`` (kept in ``AQ``), orthogonalise, fill ``S``.

    Returns the new basis size ``j + block``, the coupling ``R`` (``block x block``) of the
    new residual block ``Q[:, j+block : j+2 block]`` to the last one, the norm estimate, and
    whether the space is exhausted (a zero column in the new block).
    """
    # columns contiguous, as the basis kernels read them
    W = np.asfortranarray(op.matmat(Q[:, j : j + block]))
    if AQ is not None:
        AQ[:, j : j + block] = W
    basis = Q[:, : j + block]
    H, W, _ = project_out(W, basis, max(0, j - block))
    diag = 0.5 * (H[j:] + H[j:].T)
    S[: j + block, j : j + block] = H
    S[j : j + block, :j] = H[:j].T
    S[j : j + block, j : j + block] = diag
    anorm = max(anorm, spectral_radius(diag))
    Qn = Q[:, j + block : j + 2 * block]
    R, exhausted = orthonormalise_block(W, basis, 1e-13 * anorm, rng, Qn)
    return j + block, R, anorm, exhausted


def spectral_radius(M):
    """Largest ``|eigenvalue|`` of the small symmetric ``M`` (closed form up to 2 x 2, which
    saves a LAPACK call in every step)."""
    if M.shape[0] == 1:
        return abs(float(M[0, 0]))
    if M.shape[0] == 2:
        mean, half = 0.5 * (M[0, 0] + M[1, 1]), 0.5 * (M[0, 0] - M[1, 1])
        return abs(float(mean)) + float(np.hypot(half, M[0, 1]))
    return float(np.max(np.abs(np.linalg.eigvalsh(M))))


def project_out(W, basis, local):
    """``W - basis (basis^T W)`` by classical Gram-Schmidt, in place; returns the coefficients,
    ``W`` and whether a second pass over the whole basis ran.

    The columns from ``local`` on (the last two blocks, which carry the recurrence) are
    projected out first, which is cheap; then one pass over the whole basis, and a second
    only when that pass left some column with less than ``REORTH_ETA`` of its norm (DGKS):
    then rounding in the first pass may have left components along ``basis`` at a level the
    cancellation amplified; otherwise one pass already leaves ``W`` orthogonal to ``basis``
    to working precision.
    """
    H = np.zeros((basis.shape[1], W.shape[1]))
    before, after = project_step(basis.T, local, W.T, H)  # the kernels read row-major views
    twice = bool(np.any(after < REORTH_ETA * before))
    if twice:
        H += _gram_schmidt_pass(basis, W)
    return H, W, twice


def _gram_schmidt_pass(basis, W):
    """One classical Gram-Schmidt pass, in place: ``W -= basis C`` with ``C = basis^T W``."""
    C = basis_coefficients(basis.T, W.T, 0)
    subtract_combination(basis.T, C, W.T, 0)
    return C


def orthonormalise_block(W, basis, threshold, rng, out):
    """``W = Qn R`` with ``Qn`` orthonormal and orthogonal to ``basis``, written into ``out``;
    returns ``R`` and whether the space is exhausted (a zero column in ``Qn``).

    ``W`` arrives already orthogonalised against ``basis``.  The fast path is one modified
    Gram-Schmidt over the block's columns (a Numba kernel).  When it divides a column down by
    more than ``1 / REORTH_ETA`` (the columns of the block nearly dependent), a Householder QR
    ``Q_1 R_1`` is projected against ``basis`` once more and re-factored, ``R = R_2 R_1``
    ("twice is enough" across the block boundary).  When a diagonal entry of ``R_1`` is at most
    ``threshold`` (rank deficiency: deflation) it falls back to
    :func:`_orthonormalise_columns`, which replaces deflated columns.
    """
    R = np.zeros((W.shape[1], W.shape[1]))
    if orthonormalise_small(W.T, out.T, R, REORTH_ETA, threshold):
        return R, False
    Q1, R1 = _thin_qr(W)
    diag = np.abs(np.diag(R1))
    if np.min(diag) <= threshold:
        Qn, R = _orthonormalise_columns(W, basis, threshold, rng)
    elif np.all(diag >= REORTH_ETA * np.linalg.norm(W, axis=0)):
        Qn, R = Q1, R1
    else:
        Q1 -= basis @ (basis.T @ Q1)
        Qn, R2 = _thin_qr(Q1)
        R = R2 @ R1
    out[:] = Qn
    return R, not np.all(np.any(Qn, axis=0))


def _thin_qr(W):
    """Reduced QR of ``W``; for one column a norm (no LAPACK call, it runs every step)."""
    if W.shape[1] == 1:
        r = float(np.linalg.norm(W))
        return (W / r if r > 0 else W), np.array([[r]])
    return np.linalg.qr(W)


def _orthonormalise_columns(W, basis, threshold, rng):
    """Column-by-column form of :func:`orthonormalise_block` (Gram-Schmidt twice).

    A column whose remainder is at most ``threshold`` is deflated: its row of ``R`` is zero
    and it is replaced by a random direction orthogonal to everything so far, or by zero
    when the space is exhausted.
    """
    N, b = W.shape
    Qn = np.zeros((N, b))
    R = np.zeros((b, b))
    for i in range(b):
        w = W[:, i].copy()
        for _ in range(2):
            c = Qn[:, :i].T @ w
            w -= Qn[:, :i] @ c
            R[:i, i] += c
            w -= basis @ (basis.T @ w)
        r = float(np.linalg.norm(w))
        if r > threshold:
            Qn[:, i] = w / r
            R[i, i] = r
        else:
            Qn[:, i] = _random_orthogonal(basis, Qn[:, :i], rng)
    return Qn, R


def _random_orthogonal(basis, extra, rng):
    """A unit vector orthogonal to the columns of ``basis`` and ``extra``; zero if none is left."""
    w = rng.standard_normal(basis.shape[0])
    for _ in range(3):
        w -= basis @ (basis.T @ w)
        w -= extra @ (extra.T @ w)
    r = float(np.linalg.norm(w))
    if r <= 1e-8 * np.sqrt(basis.shape[0]):
        return np.zeros_like(w)
    return w / r


def _orthonormal_columns(V):
    """Orthonormal basis of the columns of ``V`` (reduced QR)."""
    Qv, _ = np.linalg.qr(V)
    return Qv


def estimate_norm(op, rng, steps=12):
    """A lower estimate of ``||A||_2``: the largest ``|theta|`` of ``steps`` Lanczos steps."""
    N = op.shape[0]
    steps = min(steps, N)
    out = thick_restart_lanczos(op, 1, 1, steps, 0.0, 0, rng)
    return out.norm_estimate
