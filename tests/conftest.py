"""Seeded fixtures and the shared comparison helper against dense references."""

import contextlib
import os

import numba
import numpy as np
import pytest

#: the BLAS limit of a pytest-xdist worker (kept referenced for the session)
_WORKER_BLAS = []


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs two workers, one per core) each worker runs
    Numba's kernels and BLAS on one thread.  Two workers of two threads each oversubscribe the
    cores, and a parallel kernel then waits at its barriers for a thread that is not running
    (on a 2-core Zen 3 a learning test took 207 s against 16 s in a serial run).  Tests that
    compare thread counts set both themselves (:func:`numba_threads` with 1 and
    :data:`ALL_THREADS`: ``NUMBA_NUM_THREADS`` stays the machine's core count)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return
    from threadpoolctl import threadpool_limits

    import rmt

    rmt.configure_threads(numba_threads=1)
    _WORKER_BLAS.append(threadpool_limits(limits=1))


EPS = np.finfo(np.float64).eps

#: the thread count that thread-invariance tests compare with one thread: all of Numba's
#: (the machine's cores), whatever a worker runs on by default
ALL_THREADS = numba.config.NUMBA_NUM_THREADS


@contextlib.contextmanager
def numba_threads(n):
    """Numba's thread count set to ``n`` inside the block, and restored after it; the library's
    calls run on ``n`` threads too (``rmt.set_num_threads``: no automatic choice from the load,
    which would run them on fewer when another process is busy)."""
    import rmt

    before = numba.get_num_threads()
    numba.set_num_threads(n)
    fixed = rmt.set_num_threads(n)
    try:
        yield
    finally:
        rmt.set_num_threads(fixed)
        numba.set_num_threads(before)


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
