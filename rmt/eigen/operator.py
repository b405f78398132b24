"""Uniform access to the three kinds of input: ``rmt.Hessian``, ``LinearOperator``, ndarray."""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from ..hessian import Hessian, symmetric_operator


class CountingOperator:
    """Wraps a symmetric operator, optionally negated, and counts products and passes.

    ``sign = -1`` turns a "largest" problem into a "smallest" one for the solvers.
    """

    def __init__(self, A, sign: float = 1.0):
        self.shape = A.shape
        self.sign = float(sign)
        self.n_matvec = 0
        self.n_passes = 0
        self.dense = A if isinstance(A, np.ndarray) else None
        self.block = isinstance(A, Hessian)
        self._A = A

    def matmat(self, V: np.ndarray) -> np.ndarray:
        """``sign * A V`` for ``V`` of shape ``(N, b)``, in one call of the product."""
        V = np.asarray(V, dtype=np.float64)
        if V.ndim == 1:
            return self.matmat(V[:, None])[:, 0]
        self.n_matvec += V.shape[1]
        self.n_passes += 1
        if self.dense is not None:
            out = self.dense @ V
        else:
            out = np.asarray(self._A.matmat(V), dtype=np.float64).reshape(V.shape)
        if self.sign != 1.0:
            out *= self.sign
        return out

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """``sign * A v`` for a single vector."""
        return self.matmat(np.asarray(v, dtype=np.float64).reshape(-1, 1))[:, 0]

    def as_linear_operator(self) -> LinearOperator:
        """A scipy view that routes every product through the counter."""
        return symmetric_operator(self)


def check_operator(A, rng, name: str = "A"):
    """Validate ``A`` (square, float, symmetric) and return it in a multipliable form.

    Dense input is checked exactly (``||A - A^T||_max <= 1e-12 ||A||_max``); an operator is
    checked by ``|u^T A v - v^T A u|`` on a random pair, which costs two products.
    """
    if isinstance(A, Hessian):
        return A
    if isinstance(A, np.ndarray):
        return _check_dense(A, name)
    if isinstance(A, LinearOperator):
        _check_square(A.shape, name)
        if np.dtype(A.dtype).kind not in "fiu":
            raise TypeError(f"{name} must be a real operator; got dtype {A.dtype}")
        _check_symmetric_operator(A, rng, name)
        return A
    raise TypeError(
        f"{name} must be an rmt.Hessian, a scipy LinearOperator or a dense ndarray; "
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
