"""The DMFT response rows by reverse mode (``rmt.kernels.dmft``) against direct references.

- The kernels (the generic one, the ``dot_rows`` ones on 4 lanes for m = 1..4 and on 8 lanes
  for m = 3, 4, and the one the table picks on each path) against the definition:
  for each draw, the dense block lower-triangular ``G = (I + K J)^{-1}`` by ``numpy.linalg.solve``,
  and ``sum_n J^t_n G_n(t, p)``.
- The solver (``rmt.dmft_gd``) against the forward recursion (D2) of docs/theory.md, run here in
  numpy on the solve's own pre-activations and ``R_w``: ``R_psi`` must be the mean of
  ``J^t d r^t / d eta^s`` that (D2) builds a row at a time.
"""

from __future__ import annotations

import numpy as np
import pytest

import rmt
from rmt.dynamics.dmft import _psi, dmft_gd
from rmt.kernels import dmft as dmft_kernels
from rmt.kernels.dispatch import TARGETS, response_kernel
from rmt.kernels.dmft import PAD, response_row


def _dense_reference(KT, J, t, n_real):
    """``sum_n J[t, :, :, n] G_n(t, p)`` with ``G_n = (I + K J_n)^{-1}`` formed densely."""
    m = J.shape[1]
    size = (t + 1) * m
    K = np.zeros((size, size))
    for q in range(t + 1):
        for p in range(q):  # K[q, p]_{jk} = KT[p, k, q m + j]
            K[q * m : (q + 1) * m, p * m : (p + 1) * m] = KT[p, :, q * m : (q + 1) * m].T
    out = np.zeros((t + 1, m, m))
    for n in range(n_real):
        Jn = np.zeros((size, size))
        for p in range(t + 1):
            Jn[p * m : (p + 1) * m, p * m : (p + 1) * m] = J[p, :, :, n]
        G = np.linalg.solve(np.eye(size) + K @ Jn, np.eye(size))
        row = G[t * m : (t + 1) * m]
        for p in range(t + 1):
            out[p] += J[t, :, :, n] @ row[:, p * m : (p + 1) * m]
    return out


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("t", [0, 1, 9])
@pytest.mark.parametrize("n_real", [37, 70])
def test_response_rows_match_the_dense_inverse(m, t, n_real):
    """Every response kernel against the dense inverse, on draws padded to 48 and 80: chunks
    of 10 (m = 2) end partial on 48, chunks of 3 (m = 4) on 80."""
    rng = np.random.default_rng(10 * m + t + n_real)
    # n_real draws padded below to a multiple of PAD with zero Jacobians
    n_pad = -(-n_real // PAD) * PAD
    KT = np.zeros((t + 2, m, (t + 2) * m))
    KT[:] = 0.3 * rng.standard_normal(KT.shape)
    J = np.zeros((t + 2, m, m, n_pad))
    A = rng.standard_normal((t + 2, m, m, n_real))
    J[..., :n_real] = 0.5 * (A + np.swapaxes(A, 1, 2))  # symmetric, like d psi / d u
    want = _dense_reference(KT, J, t, n_real)
    kernels = {response_row, *(response_kernel(m, path) for path in TARGETS)}
    kernels |= {getattr(dmft_kernels, f"response_row{w}_m{m}", response_row) for w in ("", "8")}
    for kernel in kernels:
        out = np.full((t + 1, m, m), np.nan)
        kernel(KT, J, t, out)
        np.testing.assert_allclose(out, want, rtol=1e-11, atol=1e-11 * np.abs(want).max())


@pytest.mark.parametrize("m", [2, 3])
def test_solver_responses_match_the_forward_recursion(m):
    """R_psi of a solve against (D2) run forward in numpy on the solve's own path."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(m, activation="softplus", loss="huber")
    delta, lr, T, N = 1.5, 0.5, 12, 50
    res = dmft_gd(model, net, delta, lr, T, 0.3, n_samples=N, n_test=100, rng=3)
    assert res.converged
    Js = [np.moveaxis(_psi(net, res.u[t], res.y)[2], 2, 0) for t in range(T)]  # (N, m, m)
    rows = {}  # rows[t][s]: d r^t / d eta^s, (N, m, m)
    for t in range(T):
        rows[t] = {}
        for s in range(t + 1):
            g = np.broadcast_to(np.eye(m), (N, m, m)).copy() if s == t else np.zeros((N, m, m))
            for p in range(s, t):
                g -= (lr / delta) * np.einsum("ij,njk->nik", res.R_w[t, p], Js[p] @ rows[p][s])
            rows[t][s] = g
        want = np.array([np.mean(Js[t] @ rows[t][s], axis=0) for s in range(t + 1)])
        np.testing.assert_allclose(res.R_psi[t, : t + 1], want, rtol=1e-10, atol=1e-13)


def test_progress_bar_changes_nothing_but_stderr(capsys):
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    quiet = dmft_gd(model, net, 2.0, 0.5, 8, 0.1, n_samples=40, n_test=100)
    capsys.readouterr()
    shown = dmft_gd(model, net, 2.0, 0.5, 8, 0.1, n_samples=40, n_test=100, progress=True)
    assert "DMFT steps" in capsys.readouterr().err
    np.testing.assert_array_equal(quiet.train_loss, shown.train_loss)
    np.testing.assert_array_equal(quiet.R_psi, shown.R_psi)


def test_the_semidefinite_cholesky_factors_exactly_and_its_rows_do_not_depend_on_the_size():
    """:func:`rmt.kernels.dmft.semidefinite_cholesky` against LAPACK's Cholesky on a positive
    definite covariance (to 1e-12); on a rank-deficient one (rank 7 of 12, m = 2) it keeps 7
    pivots and ``L L^T = C`` to 1e-12; and the factor of a leading block is the leading block
    of the factor, bit for bit (the law's field of a step does not depend on later steps)."""
    from rmt.dynamics.dmft import PIVOT_RTOL
    from rmt.kernels.dmft import semidefinite_cholesky

    rng = np.random.default_rng(5)
    A = rng.standard_normal((40, 50))
    C = A @ A.T / 50
    L = np.zeros_like(C)
    semidefinite_cholesky(C, 2, PIVOT_RTOL, L)
    np.testing.assert_allclose(L, np.linalg.cholesky(C), rtol=0, atol=1e-12)
    head = np.zeros((18, 18))
    semidefinite_cholesky(np.ascontiguousarray(C[:18, :18]), 2, PIVOT_RTOL, head)
    np.testing.assert_array_equal(head, L[:18, :18])
    B = rng.standard_normal((12, 7))
    S = B @ B.T
    Ls = np.zeros_like(S)
    semidefinite_cholesky(S, 2, PIVOT_RTOL, Ls)
    assert np.count_nonzero(np.diag(Ls)) == 7
    np.testing.assert_allclose(Ls @ Ls.T, S, rtol=0, atol=1e-12 * np.abs(S).max())
