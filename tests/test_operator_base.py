"""rmt.operators.base.SymmetricOperator: input checks, product counters, to_dense, the symmetric flag."""

import numpy as np
import pytest
from scipy.sparse.linalg import LinearOperator, aslinearoperator, eigsh

import rmt
from rmt.eigen.inputs import CountingOperator, check_operator
from rmt.operators.base import DENSE_BLOCK, SymmetricOperator

from .conftest import assert_operator_matches_dense


class Symmetric(SymmetricOperator):
    """``A V`` for an explicit symmetric ``A``, recording every call of ``_matmat``."""

    def __init__(self, A):
        self.A = A
        self.calls = []
        super().__init__(A.shape)

    def _matmat(self, V):
        self.calls.append(V.shape)
        return self.A @ V


class Undeclared(Symmetric):
    """The same operator without the declaration: it must be probed like any LinearOperator."""

    symmetric = False


def _symmetric_matrix(N, rng):
    A = rng.standard_normal((N, N))
    return A + A.T


def _hessian(rng, m=3, n=120, d=11, wd=0.2):
    data = rmt.MultiIndexModel("phase_retrieval").sample(n, d, rng=rng)
    W = rng.standard_normal((d, m)) / np.sqrt(d)
    return rmt.Hessian(rmt.TwoLayerNet(m, "softplus", "huber"), data, W, weight_decay=wd)


def test_products_against_the_matrix_from_both_sides(rng):
    A = _symmetric_matrix(40, rng)
    op = Symmetric(A)
    assert_operator_matches_dense(op, A, rng, rtol=1e-13)
    assert isinstance(op, LinearOperator) and op.dtype == np.float64
    assert op.as_linear_operator() is op and op.H is op and op.T is op
    v = rng.standard_normal((40, 1))
    np.testing.assert_allclose(op.matvec(v), A @ v, rtol=1e-13)  # (N, 1) stays (N, 1)
    np.testing.assert_allclose(op.rmatvec(v[:, 0]), A @ v[:, 0], rtol=1e-13)


@pytest.mark.parametrize("make", ["toy", "hessian"])
def test_shape_and_finiteness_errors_say_what_was_expected(make, rng):
    op = Symmetric(_symmetric_matrix(12, rng)) if make == "toy" else _hessian(rng)
    N = op.shape[0]
    with pytest.raises(ValueError, match=rf"v must have shape \({N},\); got \({N + 1},\)"):
        op.matvec(np.ones(N + 1))
    with pytest.raises(ValueError, match=rf"v must have shape \({N},\); got \({N}, 2\)"):
        op.matvec(np.ones((N, 2)))
    with pytest.raises(ValueError, match=rf"V must have shape \({N}, b\); got \({N},\)"):
        op.matmat(np.ones(N))
    with pytest.raises(ValueError, match=rf"V must have shape \({N}, b\); got \(3, {N}\)"):
        op.matmat(np.ones((3, N)))
    bad = np.ones((N, 2))
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="V must be finite"):
        op.matmat(bad)
    with pytest.raises(ValueError, match="v must be finite"):
        op.matvec(np.full(N, np.nan))
    with pytest.raises(TypeError, match="v must be real"):
        op.matvec(np.ones(N, dtype=complex))
    assert (op.n_matvec, op.n_passes) == (0, 0)  # rejected inputs cost nothing


def test_bad_shape_of_the_operator():
    with pytest.raises(ValueError, match=r"shape must be \(N, N\) with N >= 1; got \(3, 4\)"):
        Symmetric(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"got \(0, 0\)"):
        Symmetric(np.ones((0, 0)))


def test_counters_count_each_call_once(rng):
    """Every public route (ours and scipy's) reaches ``_matmat`` once and is counted once."""
    A = _symmetric_matrix(30, rng)
    op = Symmetric(A)
    v, V = rng.standard_normal(30), rng.standard_normal((30, 4))
    routes = [
        lambda: op.matvec(v),
        lambda: op.matmat(V),
        lambda: op @ v,
        lambda: op @ V,
        lambda: op.dot(V),
        lambda: op(v),
        lambda: op.rmatvec(v),
        lambda: op.rmatmat(V),
        lambda: op.H.matmat(V),
        lambda: op.T @ v,
        lambda: aslinearoperator(op).matvec(v),
    ]
    expected_vectors = 0
    for route in routes:
        before = len(op.calls)
        out = route()
        assert len(op.calls) == before + 1
        b = 1 if out.ndim == 1 else out.shape[1]
        expected_vectors += b
        assert (op.n_matvec, op.n_passes) == (expected_vectors, len(op.calls))
    assert op.matmat(np.zeros((30, 0))).shape == (30, 0)  # an empty block: no call
    assert op.n_passes == len(routes)


def test_scipy_eigsh_counts_every_product(rng):
    A = _symmetric_matrix(60, rng)
    op = Symmetric(A)
    values = eigsh(op, k=2, which="SA", tol=1e-12, return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(values), np.linalg.eigvalsh(A)[:2], rtol=1e-10)
    assert op.n_passes == len(op.calls) > 0
    assert op.n_matvec == sum(shape[1] for shape in op.calls)


def test_generic_to_dense_against_the_fast_path(rng):
    """The base ``to_dense`` (products on identity blocks, counted) against the Hessian's
    reference assembly, and against the matrix of a toy operator."""
    H = _hessian(rng)
    N = H.shape[0]
    fast = H.to_dense()
    assert (H.n_matvec, H.n_passes) == (0, 0)
    generic = SymmetricOperator.to_dense(H)
    assert (H.n_matvec, H.n_passes) == (N, -(-N // DENSE_BLOCK))
    np.testing.assert_allclose(generic, fast, rtol=0, atol=1e-13 * np.abs(fast).max())
    A = _symmetric_matrix(DENSE_BLOCK + 5, rng)
    np.testing.assert_array_equal(Symmetric(A).to_dense(), A)


def test_declared_symmetric_operator_costs_no_probe(rng):
    """``check_operator`` trusts ``symmetric = True`` (no products) and still probes anything
    else: an undeclared subclass, a plain scipy operator, which is caught when non-symmetric."""
    H = _hessian(rng)
    assert check_operator(H, rng) is H
    assert H.n_matvec == 0
    A = _symmetric_matrix(25, rng)
    undeclared = Undeclared(A)
    check_operator(undeclared, rng)
    assert undeclared.n_matvec == 2
    calls = []
    flagged = LinearOperator(A.shape, matvec=lambda v: calls.append(1) or A @ v, dtype=float)
    flagged.symmetric = True  # the protocol is the flag, not the class
    check_operator(flagged, rng)
    assert calls == []
    res = rmt.extreme_eigs(flagged, k=2, method="dense")  # no to_dense: products on I
    np.testing.assert_allclose(res.values, np.linalg.eigvalsh(A)[:2], rtol=1e-12)
    nonsym = np.triu(rng.standard_normal((25, 25)))
    with pytest.raises(ValueError, match="symmetric"):
        check_operator(aslinearoperator(nonsym), rng)
    with pytest.raises(ValueError, match="symmetric"):
        check_operator(Undeclared(nonsym), rng)


def test_extreme_eigs_on_a_hessian_counts_only_the_solver(rng):
    H = _hessian(rng)
    values = np.linalg.eigvalsh(H.to_dense())
    res = rmt.extreme_eigs(H, k=3, method="lanczos", tol=1e-10, rng=1)
    np.testing.assert_allclose(res.values, values[:3], rtol=1e-8)
    assert H.n_matvec == res.n_matvec and H.n_passes == res.n_passes
    density = rmt.spectral_density(H, n_probes=3, steps=10, rng=2)
    assert H.n_matvec == res.n_matvec + density.n_matvec


def test_counting_operator_negates_and_assembles(rng):
    A = _symmetric_matrix(20, rng)
    undeclared = Undeclared(A)
    op = CountingOperator(undeclared, sign=-1.0)
    V = rng.standard_normal((20, 3))
    np.testing.assert_allclose(op.matmat(V), -A @ V, rtol=1e-13)
    assert (op.n_matvec, undeclared.n_matvec) == (3, 3)
    np.testing.assert_allclose(op.to_dense(), -A, rtol=0, atol=1e-13 * np.abs(A).max())
    dense = CountingOperator(A, sign=-1.0)
    np.testing.assert_array_equal(dense.to_dense(), -A)
    H = _hessian(rng)
    np.testing.assert_array_equal(CountingOperator(H, sign=-1.0).to_dense(), -H.to_dense())
    assert H.n_matvec == 0  # the reference assembly, no products
