"""Samplers of the two classical spiked ensembles, to check BBP transitions end to end.

Their limits are in ``rmt.freeprob.closed_forms``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmt.validation import check_nonneg_float, check_positive_int


@dataclass(frozen=True)
class SpikedSample:
    """A symmetric matrix with its planted unit spike direction ``v``."""

    matrix: np.ndarray
    spike: np.ndarray


def _unit_vector(d, rng):
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v)


def spiked_wishart(n, d, spike, rng=None) -> SpikedSample:
    """Sample covariance ``(1/n) X^T X`` with rows ``x_i ~ N(0, I_d + spike v v^T)``.

    In the limit ``d/n -> gamma`` the top eigenvalue follows
    ``closed_forms.spiked_covariance_outlier(spike, gamma)``.
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d")
    ell = check_nonneg_float(spike, "spike")
    rng = np.random.default_rng(rng)
    v = _unit_vector(d, rng)
    G = rng.standard_normal((n, d))
    # x = g + (sqrt(1+l) - 1) (v^T g) v has covariance I + l v v^T
    X = G + (np.sqrt(1.0 + ell) - 1.0) * np.outer(G @ v, v)
    return SpikedSample(X.T @ X / n, v)


def spiked_wigner(d, theta, rng=None) -> SpikedSample:
    """``theta v v^T + W`` with ``W`` from the GOE scaled so its spectrum fills ``[-2, 2]``.

    The top eigenvalue follows ``closed_forms.spiked_wigner_outlier(theta)``.
    """
    d = check_positive_int(d, "d")
    theta = check_nonneg_float(theta, "theta")
    rng = np.random.default_rng(rng)
    v = _unit_vector(d, rng)
    A = rng.standard_normal((d, d))
    W = (A + A.T) / np.sqrt(2.0 * d)
    return SpikedSample(W + theta * np.outer(v, v), v)
