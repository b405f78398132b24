"""Closed-form laws used as references (docs/theory.md sections 3-4).

- Marchenko-Pastur: the limit spectrum of ``(1/n) X^T X``, ``X`` of shape ``n x d`` with
  i.i.d. ``N(0, 1)`` entries and ``delta = n/d`` (Marchenko & Pastur 1967).  This is the
  operator-valued equation (MP) of docs/theory.md section 3 with ``D = 1``.
- Spiked covariance (Baik, Ben Arous & Peche 2005; Paul 2007): rows ``x ~ N(0, I + l v v^T)``,
  aspect ratio ``gamma = d/n``; the top eigenvalue separates for ``l > sqrt(gamma)``.
- Spiked Wigner (Peche 2006; Benaych-Georges & Nadakuditi 2011): ``theta v v^T + W`` with ``W``
  a GOE matrix normalised to the semicircle on ``[-2, 2]``; it separates for ``theta > 1``.
"""

from __future__ import annotations

import numpy as np

from rmt.validation import check_positive_float


def mp_edges(delta):
    """Edges ``(1 -+ delta^{-1/2})^2`` of the continuous part of Marchenko-Pastur."""
    delta = check_positive_float(delta, "delta")
    r = 1.0 / np.sqrt(delta)
    return (1.0 - r) ** 2, (1.0 + r) ** 2


def mp_atom(delta):
    """Mass ``max(0, 1 - delta)`` of the atom at 0 (``n < d``)."""
    delta = check_positive_float(delta, "delta")
    return max(0.0, 1.0 - delta)


def mp_density(x, delta):
    """Density of the continuous part, ``sqrt((b-x)(x-a)) / (2 pi gamma x)`` with ``gamma = 1/delta``.

    It integrates to ``1 - mp_atom(delta)``.
    """
    delta = check_positive_float(delta, "delta")
    x = np.asarray(x, dtype=np.float64)
    lo, hi = mp_edges(delta)
    gamma = 1.0 / delta
    inside = (x > lo) & (x < hi)
    out = np.zeros_like(x)
    xi = x[inside]
    out[inside] = np.sqrt((hi - xi) * (xi - lo)) / (2.0 * np.pi * gamma * xi)
    return out


def mp_cdf(x, delta, n_grid=20001):
    """Distribution function of Marchenko-Pastur (atom included), by Simpson-free exact substitution.

    Uses ``x = c + r cos(t)`` on the support so that the integrand is smooth.
    """
    delta = check_positive_float(delta, "delta")
    lo, hi = mp_edges(delta)
    c, r = 0.5 * (lo + hi), 0.5 * (hi - lo)
    t = np.linspace(np.pi, 0.0, n_grid)
    xs = c + r * np.cos(t)
    # dx = -r sin(t) dt and sqrt((hi-x)(x-lo)) = r sin(t)
    integrand = (r * np.sin(t)) ** 2 / (2.0 * np.pi * xs / delta)
    increments = 0.5 * (integrand[1:] + integrand[:-1]) * np.abs(np.diff(t))
    cdf_grid = np.concatenate([[0.0], np.cumsum(increments)])
    x = np.asarray(x, dtype=np.float64)
    out = np.interp(x, xs, cdf_grid, left=0.0, right=cdf_grid[-1])
    return out + mp_atom(delta) * (x >= 0)


def spiked_covariance_outlier(spike, gamma):
    """Top eigenvalue ``(1+l)(1+gamma/l)`` and squared overlap ``(1-gamma/l^2)/(1+gamma/l)``.

    Returns ``(value, overlap)``; below the threshold ``l <= sqrt(gamma)`` there is no outlier
    and the result is the bulk edge ``(1+sqrt(gamma))^2`` with overlap 0.
    """
    ell = check_positive_float(spike, "spike")
    gamma = check_positive_float(gamma, "gamma")
    if ell <= np.sqrt(gamma):
        return (1.0 + np.sqrt(gamma)) ** 2, 0.0
    return (1.0 + ell) * (1.0 + gamma / ell), (1.0 - gamma / ell**2) / (1.0 + gamma / ell)


def spiked_wigner_outlier(theta):
    """Top eigenvalue ``theta + 1/theta`` and squared overlap ``1 - 1/theta^2``.

    Below the threshold ``theta <= 1`` the result is the edge 2 with overlap 0.
    """
    theta = check_positive_float(theta, "theta")
    if theta <= 1.0:
        return 2.0, 0.0
    return theta + 1.0 / theta, 1.0 - 1.0 / theta**2


def semicircle_density(x):
    """Wigner semicircle ``sqrt(4 - x^2) / (2 pi)`` on ``[-2, 2]``."""
    x = np.asarray(x, dtype=np.float64)
    return np.sqrt(np.clip(4.0 - x * x, 0.0, None)) / (2.0 * np.pi)
