"""Uniform access to the kinds of input: a ``SymmetricOperator``, a ``LinearOperator``, an
ndarray or a scipy sparse matrix (checked for symmetry exactly, multiplied in its sparse form).

An operator that declares ``symmetric = True`` (every :class:`rmt.operators.base.SymmetricOperator`:
``rmt.Hessian``, ``rmt.StreamingHessian``, ``rmt.DistributedHessian``) is trusted, and its
``to_dense()``, when it has one, is its fast assembly; any other scipy ``LinearOperator`` is
probed for symmetry on a random pair of vectors.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from scipy.sparse.linalg import LinearOperator

from rmt.operators.base import SymmetricOperator


def declares_symmetric(A) -> bool:
    """Whether ``A`` declares itself symmetric (``A.symmetric is True``): then it is trusted
    without probe products."""
    return getattr(A, "symmetric", False) is True


class CountingOperator(SymmetricOperator):
    """``sign * A`` for a checked symmetric ``A``, counting its own products and passes.

    ``sign = -1`` turns a "largest" problem into a "smallest" one for the solvers.  ``A`` is
    what :func:`check_operator` returned: a float64 ndarray, an operator that declares itself
    symmetric, or a probed scipy ``LinearOperator``.
    """

    def __init__(self, A, sign: float = 1.0):
        super().__init__(A.shape)
        self.sign = float(sign)
        self.dense = A if isinstance(A, np.ndarray) else None
        self._A = A

    def _matmat(self, V: np.ndarray) -> np.ndarray:
        if self.dense is not None:
            out = self.dense @ V
        else:
            out = np.asarray(self._A.matmat(V), dtype=np.float64).reshape(V.shape)
        return out if self.sign == 1.0 else self.sign * out

    def to_dense(self) -> np.ndarray:
        """The dense matrix of ``sign * A``: the array itself, ``A.to_dense()`` for an operator
        that declares itself symmetric, else products on the identity, symmetrised."""
        if self.dense is not None:
            return self.sign * self.dense
        if declares_symmetric(self._A) and callable(getattr(self._A, "to_dense", None)):
            return self.sign * np.asarray(self._A.to_dense(), dtype=np.float64)
        dense = super().to_dense()
        return 0.5 * (dense + dense.T)


class SparseSymmetric(SymmetricOperator):
    """A checked symmetric scipy sparse matrix (CSR, float64) as a :class:`SymmetricOperator`;
    ``to_dense()`` is ``toarray()``."""

    def __init__(self, A):
        super().__init__(A.shape)
        self.matrix = scipy.sparse.csr_matrix(A, dtype=np.float64)

    def _matmat(self, V):
        return np.asarray(self.matrix @ V)

    def to_dense(self) -> np.ndarray:
        return self.matrix.toarray()


def check_operator(A, rng, name: str = "A"):
    """Validate ``A`` (square, real, symmetric) and return it in a multipliable form.

    Dense input is checked exactly (``||A - A^T||_max <= 1e-12 ||A||_max``).  An operator whose
    ``symmetric`` flag is ``True`` is trusted (no products); any other ``LinearOperator`` is
    checked by ``|u^T A v - v^T A u|`` on a random pair, which costs two products.
    """
    if isinstance(A, np.ndarray):
        return _check_dense(A, name)
    if scipy.sparse.issparse(A):
        return _check_sparse(A, name)
    if isinstance(A, LinearOperator):
        _check_square(A.shape, name)
        if np.dtype(A.dtype).kind not in "fiu":
            raise TypeError(f"{name} must be a real operator; got dtype {A.dtype}")
        if not declares_symmetric(A):
            _check_symmetric_operator(A, rng, name)
        return A
    raise TypeError(
        f"{name} must be an rmt.Hessian, a scipy LinearOperator, a scipy sparse matrix or a "
        "dense ndarray; "
        f"got {type(A).__name__}"
    )


def _check_square(shape, name):
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
        raise ValueError(f"{name} must be a non-empty square matrix; got shape {tuple(shape)}")


def _check_dense(A, name):
    if A.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real array; got dtype {A.dtype}")
    _check_square(A.shape, name)
    A = np.ascontiguousarray(A, dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must be finite")
    scale = float(np.max(np.abs(A))) if A.size else 0.0
    asym = float(np.max(np.abs(A - A.T)))
    if asym > 1e-12 * max(scale, np.finfo(float).tiny):
        raise ValueError(
            f"{name} must be symmetric; max |A - A^T| = {asym:.3e} against max |A| = {scale:.3e}"
        )
    return A


def _check_sparse(A, name):
    """A scipy sparse matrix: real, square, finite and exactly symmetric (up to 1e-12 of its
    largest entry, as for dense input)."""
    if A.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real sparse matrix; got dtype {A.dtype}")
    _check_square(A.shape, name)
    A = scipy.sparse.csr_matrix(A, dtype=np.float64)
    if not np.all(np.isfinite(A.data)):
        raise ValueError(f"{name} must be finite")
    scale = float(np.max(np.abs(A.data), initial=0.0))
    diff = (A - A.T).tocsr()
    asym = float(np.max(np.abs(diff.data), initial=0.0))
    if asym > 1e-12 * max(scale, np.finfo(float).tiny):
        raise ValueError(
            f"{name} must be symmetric; max |A - A^T| = {asym:.3e} against max |A| = {scale:.3e}"
        )
    return SparseSymmetric(A)


def _check_symmetric_operator(A, rng, name):
    N = A.shape[0]
    u = rng.standard_normal(N)
    v = rng.standard_normal(N)
    Au = np.asarray(A.matvec(u), dtype=np.float64).ravel()
    Av = np.asarray(A.matvec(v), dtype=np.float64).ravel()
    left, right = float(v @ Au), float(u @ Av)
    scale = np.linalg.norm(Au) * np.linalg.norm(v) + np.linalg.norm(Av) * np.linalg.norm(u)
    if abs(left - right) > 1e-10 * max(scale, np.finfo(float).tiny):
        raise ValueError(
            f"{name} must be symmetric; v^T A u = {left:.6e} but u^T A v = {right:.6e}"
        )
