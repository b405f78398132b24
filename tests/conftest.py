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


def assert_same_theory(edges, out, edges0, out0, tol, overlap_tol):
    """Two computations of the same edges and outliers agree: both edges and every outlier's
    value within ``tol``, its overlap with ``Theta*`` within ``overlap_tol``, and the same
    (nonzero) number of outliers."""
    assert abs(edges.lo - edges0.lo) < tol and abs(edges.hi - edges0.hi) < tol
    assert len(out) == len(out0) > 0
    for a, b in zip(out, out0):
        assert abs(a.value - b.value) < tol
        assert abs(a.overlap_theta - b.overlap_theta) < overlap_tol
