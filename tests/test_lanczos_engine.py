"""Internals of our (block) Lanczos: Gram-Schmidt with the DGKS second pass, the Numba basis
kernels, and residuals taken from the products already made (no extra pass)."""

import numpy as np
import pytest

import rmt
from rmt.eigen.lanczos import REORTH_ETA, orthonormalise_block, project_out, spectral_radius
from rmt.kernels.lanczos import (
    basis_coefficients,
    orthonormalise_small,
    project_step,
    subtract_combination,
)

from .conftest import ALL_THREADS, numba_threads

EPS = np.finfo(np.float64).eps


def _basis(N, j, rng):
    Q, _ = np.linalg.qr(rng.standard_normal((N, j)))
    return np.asfortranarray(Q)


@pytest.mark.parametrize("b", [1, 2, 3])
def test_basis_kernels_match_blas_and_thread_count(b, rng):
    Q = _basis(2500, 37, rng)  # 2500 rows: three row blocks, the last one partial
    W = np.asfortranarray(rng.standard_normal((2500, b)))
    H = basis_coefficients(Q.T, W.T, 0)  # the kernels take row-major transposes
    np.testing.assert_allclose(H, Q.T @ W, rtol=0, atol=100 * EPS * np.sqrt(2500))
    np.testing.assert_allclose(
        basis_coefficients(Q.T, W.T, 5), Q[:, 5:].T @ W, rtol=0, atol=100 * EPS * np.sqrt(2500)
    )
    got = W.copy(order="F")
    subtract_combination(Q.T, H, got.T, 0)
    np.testing.assert_allclose(got, W - Q @ H, rtol=0, atol=100 * EPS * np.abs(W).max())
    got = W.copy(order="F")
    subtract_combination(Q.T, H[5:], got.T, 5)
    np.testing.assert_allclose(got, W - Q[:, 5:] @ H[5:], rtol=0, atol=100 * EPS * np.abs(W).max())
    with numba_threads(1):
        one = basis_coefficients(Q.T, W.T, 0)
    with numba_threads(ALL_THREADS):
        np.testing.assert_array_equal(basis_coefficients(Q.T, W.T, 0), one)


def test_project_step_matches_numpy_and_thread_count(rng):
    """The fused step: local projection, then one pass over the whole basis, coefficients
    summed into ``H``, norms before and after the full pass; as numpy does it, and the same
    bits on one thread."""
    N, j, b, local = 2500, 21, 2, 17
    Q = _basis(N, j, rng)
    W = np.asfortranarray(rng.standard_normal((N, b)) + Q @ rng.standard_normal((j, b)))
    near = Q[:, local:]
    hl = near.T @ W
    mid = W - near @ hl
    hf = Q.T @ mid
    ref = mid - Q @ hf
    H0 = rng.standard_normal((j, b))  # H is added to, not overwritten
    H, got = H0.copy(), W.copy(order="F")
    with numba_threads(ALL_THREADS):
        before, after = project_step(Q.T, local, got.T, H)
    scale = np.abs(W).max()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e3 * EPS * scale)
    expected = H0 + hf
    expected[local:] += hl
    np.testing.assert_allclose(H, expected, rtol=0, atol=1e3 * EPS * scale)
    np.testing.assert_allclose(before, np.linalg.norm(mid, axis=0), rtol=1e-13)
    np.testing.assert_allclose(after, np.linalg.norm(ref, axis=0), rtol=1e-13)
    with numba_threads(1):
        one, H1 = W.copy(order="F"), H0.copy()
        norms1 = project_step(Q.T, local, one.T, H1)
    np.testing.assert_array_equal(one, got)
    np.testing.assert_array_equal(H1, H)
    np.testing.assert_array_equal(np.array(norms1), np.array((before, after)))


@pytest.mark.parametrize("b", [1, 2, 3])
def test_small_orthonormalisation_is_a_qr(b, rng):
    W = np.asfortranarray(rng.standard_normal((1500, b)))
    Qn, R = np.zeros((1500, b), order="F"), np.full((b, b), np.nan)
    assert orthonormalise_small(W.T, Qn.T, R, REORTH_ETA, 1e-12)
    np.testing.assert_allclose(Qn @ R, W, rtol=0, atol=100 * EPS * np.abs(W).max())
    np.testing.assert_allclose(Qn.T @ Qn, np.eye(b), rtol=0, atol=100 * EPS)
    assert np.all(np.diag(R) > 0) and np.all(np.tril(R, -1) == 0)
    np.testing.assert_allclose(np.abs(np.diag(R)), np.abs(np.diag(np.linalg.qr(W)[1])), 1e-12)


def test_small_orthonormalisation_declines_nearly_dependent_columns(rng):
    """Columns that cancel below ``REORTH_ETA`` of their norm, or below the threshold, are left
    to the careful path (``False``); the engine still returns an orthonormal block."""
    w = rng.standard_normal(1500)
    W = np.asfortranarray(np.column_stack([w, w + 1e-3 * rng.standard_normal(1500)]))
    Qn, R = np.zeros((1500, 2), order="F"), np.zeros((2, 2))
    assert not orthonormalise_small(W.T, Qn.T, R, REORTH_ETA, 0.0)
    assert not orthonormalise_small(
        np.asfortranarray(W[:, :1]).T, Qn[:, :1].T, R[:1, :1], REORTH_ETA, 1e3
    )
    basis = _basis(1500, 5, rng)
    W -= basis @ (basis.T @ W)
    out = np.zeros((1500, 2), order="F")
    R, exhausted = orthonormalise_block(W, basis, 1e-13, rng, out)
    assert not exhausted
    np.testing.assert_allclose(out.T @ out, np.eye(2), rtol=0, atol=100 * EPS)
    assert np.abs(basis.T @ out).max() <= 100 * EPS
    np.testing.assert_allclose(out @ R, W, rtol=0, atol=1e3 * EPS * np.abs(W).max())


def test_one_pass_when_little_cancels(rng):
    """A block mostly outside the basis: one pass leaves it orthogonal to working precision."""
    Q = _basis(3000, 20, rng)
    W = np.asfortranarray(rng.standard_normal((3000, 2)))
    H, out, twice = project_out(W.copy(order="F"), Q, 16)
    assert not twice
    assert np.abs(Q.T @ out).max() <= 50 * EPS * np.linalg.norm(out, axis=0).min()
    np.testing.assert_allclose(out + Q @ H, W, rtol=0, atol=1e3 * EPS * np.abs(W).max())


def test_second_pass_when_a_column_nearly_cancels(rng):
    """A block almost in the span of the basis: one pass would leave components along it far
    above working precision relative to what remains; the DGKS test must run a second pass."""
    Q = _basis(3000, 20, rng)
    inside = Q @ rng.standard_normal((20, 2))
    W = inside + 1e-9 * rng.standard_normal((3000, 2))
    one = W - Q @ (Q.T @ W)  # what a single pass leaves
    rest = np.linalg.norm(one, axis=0)
    assert np.abs(Q.T @ one).max() > 1e3 * EPS * rest.min()  # the case needs the second pass
    assert np.all(rest < REORTH_ETA * np.linalg.norm(W, axis=0))
    H, out, twice = project_out(np.asfortranarray(W), Q, 18)
    assert twice
    assert np.abs(Q.T @ out).max() <= 50 * EPS * np.linalg.norm(out, axis=0).min()
    np.testing.assert_allclose(Q @ H, W - out, rtol=0, atol=1e3 * EPS * np.abs(W).max())


@pytest.mark.parametrize("method", ["lanczos", "block_lanczos"])
def test_residuals_from_kept_products_are_true_residuals(method, rng):
    """Our methods take ``A V`` from the products of their basis: the residuals they report
    must equal ``||A v - lambda v||`` recomputed with the dense matrix, without an extra pass."""
    data = rmt.MultiIndexModel("phase_retrieval").sample(600, 150, rng=5)
    W = np.random.default_rng(6).standard_normal((150, 4)) / np.sqrt(150)
    H = rmt.Hessian(rmt.TwoLayerNet(4, "tanh", "square"), data, W)
    dense = H.to_dense()
    anorm = np.abs(np.linalg.eigvalsh(dense)).max()
    for which in ("smallest", "largest"):
        res = rmt.extreme_eigs(H, k=4, which=which, method=method, tol=1e-10, rng=2)
        true = np.linalg.norm(dense @ res.vectors - res.vectors * res.values, axis=0)
        np.testing.assert_allclose(res.residuals, true, rtol=0, atol=1e3 * EPS * anorm)
        # passes: one per step of the engine, none for the check (ARPACK pays one)
        b = 1 if method == "lanczos" else 2
        assert res.n_matvec == b * res.n_passes


def test_without_kept_products_the_check_costs_one_product(monkeypatch, rng):
    """Above ``PRODUCTS_BUDGET`` the engine keeps no ``A Q``: same pairs, one more pass."""
    import rmt.eigen.lanczos as engine

    A = np.diag(np.linspace(-2.0, 2.0, 300))
    kept = rmt.extreme_eigs(A, k=3, method="block_lanczos", tol=1e-10, rng=1)
    monkeypatch.setattr(engine, "PRODUCTS_BUDGET", 0)
    paid = rmt.extreme_eigs(A, k=3, method="block_lanczos", tol=1e-10, rng=1)
    np.testing.assert_array_equal(paid.values, kept.values)
    assert paid.n_passes == kept.n_passes + 1 and paid.n_matvec == kept.n_matvec + 3
    true = np.linalg.norm(A @ paid.vectors - paid.vectors * paid.values, axis=0)
    np.testing.assert_allclose(paid.residuals, true, rtol=0, atol=1e3 * EPS * 2.0)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_spectral_radius_of_the_diagonal_block(size, rng):
    for _ in range(20):
        M = rng.standard_normal((size, size))
        M = M + M.T
        np.testing.assert_allclose(
            spectral_radius(M), np.abs(np.linalg.eigvalsh(M)).max(), rtol=1e-14
        )
    assert spectral_radius(np.diag([0.5, -3.0, 1.0])[:size, :size]) == [0.5, 3.0, 3.0][size - 1]
