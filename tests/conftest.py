"""Seeded fixtures and the shared comparison helper against dense references."""

import numpy as np
import pytest

EPS = np.finfo(np.float64).eps


def rel_tol(multiple: float) -> float:
    """A tolerance as a multiple of float64 machine epsilon (STYLE.md, scipy anchor)."""
    return multiple * EPS


def assert_operator_matches_dense(op, dense, rng, rtol=1e-10, n_vectors=3):
    """Check ``op`` against an independently built dense matrix, from both sides.

    Multiplies by vectors and by a block, and compares ``v^T (A w)`` with ``(A v)^T w``.
    """
    N = dense.shape[0]
    assert op.shape == dense.shape
    scale = np.linalg.norm(dense, 2)
    V = rng.standard_normal((N, n_vectors))
    for c in range(n_vectors):
        got = op.matvec(V[:, c])
        np.testing.assert_allclose(got, dense @ V[:, c], rtol=0, atol=rtol * scale * np.sqrt(N))
    got = op.matmat(V)
    np.testing.assert_allclose(got, dense @ V, rtol=0, atol=rtol * scale * np.sqrt(N))
    left = V[:, 0] @ op.matvec(V[:, 1])
    right = op.matvec(V[:, 0]) @ V[:, 1]
    assert abs(left - right) <= rtol * scale * N


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
