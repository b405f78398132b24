"""Result object and convergence error shared by every eigen-solver."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, kw_only=True)
class EigResult:
    """Extreme eigenpairs of a symmetric operator.

    Attributes
    ----------
    values : ndarray (k,)
        Eigenvalues, sorted ascending.
    vectors : ndarray (N, k)
        Orthonormal eigenvectors; column ``i`` belongs to ``values[i]``.
    residuals : ndarray (k,)
        ``||A v_i - values[i] v_i||`` with ``A v_i`` from products actually made: one extra
        product with the returned vectors, or, for our Lanczos methods, ``(A Q) y_i`` from the
        products of their basis (the same numbers up to rounding, no extra pass).
    n_matvec : int
        Products with ``A`` (one vector counts one; an extra residual product is included).
    n_passes : int
        Calls of the product (a block product counts one; for a Hessian, passes over ``X``).
    converged : ndarray of bool (k,)
        ``residuals <= tol * norm_estimate``; all True on a normal return.
    method : str
        The solver that produced the pairs.
    wall_time : float
        Seconds from the call to the return, residual check included.
    norm_estimate : float
        The estimate of ``||A||_2`` that scales the tolerance (a lower bound for Krylov methods).
    """

    values: np.ndarray
    vectors: np.ndarray
    residuals: np.ndarray
    n_matvec: int
    n_passes: int
    converged: np.ndarray
    method: str
    wall_time: float
    norm_estimate: float

    @property
    def k(self) -> int:
        """Number of pairs."""
        return int(self.values.shape[0])


class NoConvergenceError(RuntimeError):
    """An eigen-solver stopped before ``k`` pairs met the tolerance.

    ``result`` is an :class:`EigResult` holding only the pairs that did converge (possibly
    none), so no unconverged number is ever returned as an answer.
    """

    def __init__(self, message: str, result: EigResult):
        super().__init__(message)
        self.result = result
