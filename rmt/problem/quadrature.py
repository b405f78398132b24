"""Expectations over standard Gaussian vectors: tensor Gauss-Hermite, Monte Carlo and randomised
quasi-Monte Carlo (scrambled Sobol) nodes."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri, roots_hermitenorm
from scipy.stats import qmc

from rmt.validation import check_positive_int


@dataclass(frozen=True)
class GaussianNodes:
    """Weighted nodes for ``E[f(g)]``, ``g ~ N(0, I_K)``: ``sum_i weights[i] f(points[i])``.

    ``kind`` is ``"quadrature"``, ``"monte_carlo"`` or ``"qmc"``.  The weights sum to one.
    ``replicates``: for ``"qmc"``, the number of independently scrambled blocks, stored one after
    the other (equal sizes); their spread is the error estimate (``standard_error``).
    """

    points: np.ndarray
    weights: np.ndarray
    kind: str
    replicates: int = 1

    def block_means(self, values: np.ndarray) -> np.ndarray:
        """Mean of ``values`` (first axis: nodes) over each of the ``replicates`` blocks."""
        R = self.replicates
        v = np.asarray(values).reshape(R, values.shape[0] // R, -1)
        w = self.weights.reshape(R, -1)
        return np.einsum("rn,rnj->rj", w, v) / w.sum(axis=1)[:, None]

    def standard_error(self, values: np.ndarray) -> np.ndarray | None:
        """Standard error of each column of ``expect(values)`` (``values``: nodes first, any
        trailing shape flattened): from the spread of the replicate means for ``"qmc"`` (the
        scrambles are independent, so the means are i.i.d. and unbiased), ``std / sqrt(n)``
        for ``"monte_carlo"``; ``None`` for deterministic nodes."""
        flat = np.asarray(values).reshape(values.shape[0], -1)
        if self.kind == "qmc":
            return self.block_means(flat).std(axis=0, ddof=1) / np.sqrt(self.replicates)
        if self.kind == "monte_carlo":
            return flat.std(axis=0) / np.sqrt(flat.shape[0])
        return None

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


#: randomised QMC: total nodes and independently scrambled replicates (``sobol``); their
#: accuracy against i.i.d. draws is in docs/theory.md section 3.9 (benchmarks/RESULTS.md)
QMC_NODES, QMC_REPLICATES = 32_768, 8

# scipy renamed Sobol's ``seed`` to ``rng`` (1.15); pass the generator under the name it takes
_SOBOL_RNG = "rng" if "rng" in inspect.signature(qmc.Sobol).parameters else "seed"


def sobol(K: int, n: int = QMC_NODES, rng=None, replicates: int = QMC_REPLICATES) -> GaussianNodes:
    """Randomised quasi-Monte Carlo nodes for ``N(0, I_K)``: ``replicates`` independently
    (Owen-) scrambled Sobol point sets of ``n / replicates`` points each (a power of two), mapped
    through the Gaussian quantile; equal weights.  Unbiased like Monte Carlo, with an error
    that falls faster than ``n^{-1/2}`` on integrands of bounded variation; the spread of the
    replicate means estimates it (``GaussianNodes.standard_error``)."""
    K = check_positive_int(K, "K")
    n = check_positive_int(n, "n")
    replicates = check_positive_int(replicates, "replicates")
    per = n // replicates
    if per * replicates != n or per & (per - 1):
        raise ValueError(
            f"n / replicates must be a power of two (Sobol nets); got n = {n}, "
            f"replicates = {replicates}"
        )
    if replicates < 2:
        raise ValueError("replicates must be at least 2: their spread is the error estimate")
    seeds = np.random.default_rng(rng).spawn(replicates)
    blocks = [
        qmc.Sobol(K, scramble=True, **{_SOBOL_RNG: g}).random_base2(per.bit_length() - 1)
        for g in seeds
    ]
    u = np.concatenate(blocks)
    # a scrambled point is never exactly 0 or 1 in exact arithmetic; keep the quantile finite
    tiny = np.ldexp(1.0, -60)
    points = ndtri(np.clip(u, tiny, 1.0 - tiny))
    return GaussianNodes(points, np.full(n, 1.0 / n), "qmc", replicates)
