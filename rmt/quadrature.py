"""Expectations over standard Gaussian vectors: tensor Gauss-Hermite and Monte Carlo nodes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import roots_hermitenorm

from ._validation import check_positive_int


@dataclass(frozen=True)
class GaussianNodes:
    """Weighted nodes for ``E[f(g)]``, ``g ~ N(0, I_K)``: ``sum_i weights[i] f(points[i])``.

    ``kind`` is ``"quadrature"`` or ``"monte_carlo"``.  The weights sum to one.
    """

    points: np.ndarray
    weights: np.ndarray
    kind: str

    def expect(self, values: np.ndarray) -> np.ndarray:
        """Weighted mean over the first axis of ``values``."""
        return np.tensordot(self.weights, values, axes=(0, 0))


def gauss_hermite(K: int, order: int = 40) -> GaussianNodes:
    """Tensor Gauss-Hermite nodes (probabilists' weight) for ``N(0, I_K)``: ``order**K`` points."""
    K = check_positive_int(K, "K")
    order = check_positive_int(order, "order")
    # Golub-Welsch (scipy): numpy's hermegauss overflows above order ~300
    x, w = roots_hermitenorm(order)
    w = w / w.sum()
    grids = np.meshgrid(*([x] * K), indexing="ij")
    wgrids = np.meshgrid(*([w] * K), indexing="ij")
    points = np.stack([g.ravel() for g in grids], axis=1)
    weights = np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)
    return GaussianNodes(points, weights, "quadrature")


def monte_carlo(K: int, n: int, rng=None) -> GaussianNodes:
    """``n`` i.i.d. standard Gaussian draws in ``R^K`` with equal weights."""
    K = check_positive_int(K, "K")
    n = check_positive_int(n, "n")
    rng = np.random.default_rng(rng)
    return GaussianNodes(rng.standard_normal((n, K)), np.full(n, 1.0 / n), "monte_carlo")
