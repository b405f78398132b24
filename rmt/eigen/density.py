"""Spectral density by stochastic Lanczos quadrature (SLQ).

For a unit probe ``z``, ``steps`` Lanczos steps give a tridiagonal ``T`` whose eigenvalues
``theta_i`` and squared first eigenvector components ``tau_i`` form the Gauss quadrature of the
measure ``mu_z = sum_l (u_l^T z)^2 delta_{lambda_l}`` (Golub & Meurant, 2010).  Averaging over
probes estimates the empirical spectral measure ``(1/N) sum_l delta_{lambda_l}`` (Ubaru, Chen &
Saad, 2017).  The probes run side by side, so every step costs one block product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh_tridiagonal

from rmt.eigen.inputs import CountingOperator, check_operator
from rmt.kernels.lanczos import gaussian_mixture_density, quadrature_cdf
from rmt.kernels.threads import adaptive_threads
from rmt.validation import check_positive_int


@dataclass(frozen=True, kw_only=True)
class SpectralDensity:
    """SLQ estimate of a spectral measure.

    ``nodes``/``weights`` (flat, weights summing to 1) are the pooled Gauss quadratures of all
    probes; ``density`` is their Gaussian smoothing of width ``width`` on ``grid``.
    """

    nodes: np.ndarray
    weights: np.ndarray
    grid: np.ndarray
    density: np.ndarray
    width: float
    n_matvec: int

    def cdf(self, x) -> np.ndarray:
        """The quadrature CDF ``sum_{theta_i <= x} w_i``."""
        x = np.atleast_1d(np.asarray(x, dtype=np.float64))
        return quadrature_cdf(self.nodes, self.weights, x)


@adaptive_threads
def spectral_density(A, n_probes=10, steps=60, rng=None, n_grid=512, width=None, reorth=True):
    """Spectral density of the symmetric ``A`` by stochastic Lanczos quadrature.

    Parameters
    ----------
    A : rmt.Hessian (or any rmt.operators.base.SymmetricOperator), scipy LinearOperator or ndarray
        Symmetric; an operator whose ``symmetric`` flag is ``True`` costs no probe products.
    n_probes : int
        Rademacher probes (normalised); the estimate's variance falls like ``1/(n_probes N)``.
    steps : int
        Lanczos steps per probe (quadrature nodes per probe), at most ``N``.
    rng : None, int or Generator
    n_grid : int
        Points of the grid for the smoothed density; it spans the nodes plus ``4 width``.
    width : float, optional
        Gaussian smoothing width; default ``(theta_max - theta_min) / steps``.
    reorth : bool
        Full reorthogonalisation of each probe's basis (memory ``n_probes * steps * N``).
        Without it the Gauss rule keeps its moments but may split weights over ghost nodes.

    Returns
    -------
    SpectralDensity
        The pooled quadrature ``nodes``/``weights``, the smoothed ``density`` on ``grid``,
        ``width`` and the number of products.

    Raises
    ------
    ValueError
        For a non-symmetric ``A``, invalid counts or a non-positive ``width``.

    Notes
    -----
    See docs/theory.md section 2.5 (measuring the empirical spectrum).

    Examples
    --------
    A sample covariance (Marchenko-Pastur bulk): the extreme nodes are the extreme eigenvalues
    and the quadrature CDF follows the empirical one of dense ``eigvalsh``:

    >>> import numpy as np
    >>> import rmt
    >>> X = np.random.default_rng(0).standard_normal((800, 200))
    >>> A = X.T @ X / 800
    >>> sd = rmt.spectral_density(A, n_probes=10, steps=40, rng=0)
    >>> ev = np.linalg.eigvalsh(A)
    >>> bool(np.isclose(sd.nodes.min(), ev[0]) and np.isclose(sd.nodes.max(), ev[-1]))
    True
    >>> bool(all(abs(sd.cdf(x)[0] - np.mean(ev <= x)) < 0.02 for x in (0.5, 1.0, 1.5)))
    True
    """
    rng = np.random.default_rng(rng)
    A = check_operator(A, rng)
    N = A.shape[0]
    n_probes = check_positive_int(n_probes, "n_probes")
    steps = min(check_positive_int(steps, "steps"), N)
    n_grid = check_positive_int(n_grid, "n_grid", minimum=2)
    op = CountingOperator(A)
    probes = rng.choice(np.array([-1.0, 1.0]), size=(N, n_probes)) / np.sqrt(N)
    alpha, beta, lengths = _batched_lanczos(op, probes, steps, reorth)
    nodes, weights = [], []
    for p in range(n_probes):
        L = lengths[p]
        theta, S = eigh_tridiagonal(alpha[p, :L], beta[p, : L - 1])
        nodes.append(theta)
        weights.append(S[0] ** 2 / n_probes)
    nodes, weights = np.concatenate(nodes), np.concatenate(weights)
    spread = float(nodes.max() - nodes.min())
    if width is None:
        width = max(spread, np.finfo(float).eps * max(1.0, abs(nodes).max())) / steps
    elif not (np.isfinite(width) and width > 0):
        raise ValueError(f"width must be a finite positive number; got {width!r}")
    grid = np.linspace(nodes.min() - 4 * width, nodes.max() + 4 * width, n_grid)
    density = gaussian_mixture_density(nodes, weights, grid, float(width))
    return SpectralDensity(
        nodes=nodes,
        weights=weights,
        grid=grid,
        density=density,
        width=float(width),
        n_matvec=op.n_matvec,
    )


def _batched_lanczos(op, probes, steps, reorth):
    """Independent Lanczos recurrences for each column of ``probes``, one block product a step.

    Returns ``alpha`` (``P x steps``), ``beta`` (``P x steps``) and each probe's length, which
    is shorter when its Krylov space became invariant (``beta`` below ``1e-12 ||T||``).
    """
    N, P = probes.shape
    alpha = np.zeros((P, steps))
    beta = np.zeros((P, steps))
    lengths = np.full(P, steps)
    basis = np.zeros((P, steps, N)) if reorth else None
    q, q_prev = probes / np.linalg.norm(probes, axis=0), np.zeros((N, P))
    active = np.ones(P, bool)
    for j in range(steps):
        if basis is not None:
            basis[:, j, :] = q.T
        w = op.matmat(q)
        alpha[:, j] = np.einsum("np,np->p", q, w)
        w -= q * alpha[:, j] + q_prev * (beta[:, j - 1] if j else 0.0)
        if basis is not None:
            block = basis[:, : j + 1]  # (P, j+1, N)
            for _ in range(2):
                h = np.matmul(block, w.T[:, :, None])  # (P, j+1, 1)
                w -= np.matmul(block.transpose(0, 2, 1), h)[:, :, 0].T
        beta[:, j] = np.linalg.norm(w, axis=0)
        scale = np.max(np.abs(alpha[:, : j + 1]), axis=1) + np.max(beta[:, : j + 1], axis=1)
        stop = active & (beta[:, j] <= 1e-12 * scale)
        lengths[stop] = j + 1
        active &= ~stop
        if j + 1 == steps or not active.any():
            break
        q_prev, q = (
            q,
            np.where(active, w / np.where(beta[:, j] > 0, beta[:, j], 1.0), 0.0),
        )
    return alpha, beta, lengths
