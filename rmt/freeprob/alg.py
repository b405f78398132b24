"""The algorithmic threshold ``delta_alg`` (THEORY.md section 5).

With ``G(y) = E[z z^T - I_k | y]`` (when ``E[z | y] = 0``),

    delta_alg = 1 / nu_1,     nu_1 = top eigenvalue of  M -> E_y[ G(y) M G(y) ]  on symmetric M.

Every registry target is described by a latent scalar ``t`` that is sufficient for the label:
``y = g(t) + noise * eps`` and ``Gamma(t) = E[z z^T - I | t]`` is known in closed form.  Then
``G(y) = E[Gamma(t) | y]``: for a noiseless link ``G(y) = Gamma(t)``; with noise, the posterior of
``t`` given ``y`` is computed by quadrature over ``t`` and the outer expectation over ``y`` by
composite Gauss-Legendre on a grid finer than the noise scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import k0e, k1e, roots_genlaguerre

from ..models import MultiIndexModel


@dataclass
class DeltaAlg:
    """``value = 1/nu1`` (``0`` when ``E[z|y] != 0``: learned at any delta, see ``reason``)."""

    value: float
    nu1: float
    direction: np.ndarray
    reason: str = ""
    converged: bool = True

    def __float__(self):
        return float(self.value)


def _gauss_legendre(lo, hi, n_panels, order):
    x, w = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(lo, hi, n_panels + 1)
    half, mid = np.diff(edges) / 2, (edges[1:] + edges[:-1]) / 2
    return (mid[:, None] + half[:, None] * x).ravel(), (half[:, None] * w).ravel()


def _latent_z(order=160):
    t, w = np.polynomial.hermite_e.hermegauss(order)
    return t, w / w.sum()


def _latent_z1z2():
    """``t = z1 z2`` with density ``K0(|t|)/pi``: graded panels in ``|t|`` near the log singularity."""
    edges = np.concatenate([[0.0], np.geomspace(1e-12, 1.0, 40), np.linspace(1.0, 60.0, 120)[1:]])
    x, w = np.polynomial.legendre.leggauss(12)
    half, mid = np.diff(edges) / 2, (edges[1:] + edges[:-1]) / 2
    r = (mid[:, None] + half[:, None] * x).ravel()
    wr = (half[:, None] * w).ravel() * k0e(r) * np.exp(-r) / np.pi
    t = np.concatenate([-r[::-1], r])
    wt = np.concatenate([wr[::-1], wr])
    return t, wt / wt.sum()


def _latent_rule(model: MultiIndexModel):
    """``(t, weights, y(t), Gamma(t))`` for a registry target; ``Gamma`` has shape ``(N, k, k)``."""
    name, k = model.name, model.k
    if name in ("phase_retrieval", "abs"):
        t, w = _latent_z()
        y = t * t if name == "phase_retrieval" else np.abs(t)
        return t, w, y, (t * t - 1.0)[:, None, None]
    if name == "norm2":
        x, w = roots_genlaguerre(120, k / 2.0 - 1.0)  # t = |z|^2 = 2x ~ chi^2_k
        t = 2.0 * x
        return t, w / w.sum(), t / k, (t / k - 1.0)[:, None, None] * np.eye(k)
    P = np.array([[0.0, 1.0], [1.0, 0.0]])
    if name == "z1z2":
        t, w = _latent_z1z2()
        r = np.maximum(np.abs(t), 1e-300)
        a = r * k1e(r) / k0e(r)  # E[z1^2 | z1 z2 = t]
        return t, w, t, (a - 1.0)[:, None, None] * np.eye(2) + t[:, None, None] * P
    if name == "sign_z1z2":
        t = np.array([-1.0, 1.0])
        return t, np.array([0.5, 0.5]), t, t[:, None, None] * (2.0 / np.pi) * P
    raise ValueError(f"no latent rule for target {name!r}")


def _sym_basis(k):
    basis = []
    for a in range(k):
        for b in range(a, k):
            B = np.zeros((k, k))
            B[a, b] = B[b, a] = 1.0 if a == b else 1.0 / np.sqrt(2.0)
            basis.append(B)
    return np.array(basis)


def _operator(Gs, weights):
    """Matrix of ``M -> E[G M G]`` in an orthonormal basis of symmetric matrices."""
    B = _sym_basis(Gs.shape[1])
    GBG = np.einsum("nij,qjk,nkl->nqil", Gs, B, Gs)
    return np.einsum("n,pil,nqil->pq", weights, B, GBG), B


def _posterior_G(t_w, y_t, Gam, noise, y):
    """``E[Gamma(t) | y]`` and ``p(y)`` on a grid of ``y``, in chunks."""
    out, dens = np.empty((y.size,) + Gam.shape[1:]), np.empty(y.size)
    for s in range(0, y.size, 2000):
        yy = y[s:s + 2000]
        lik = t_w[None, :] * np.exp(-0.5 * ((yy[:, None] - y_t[None, :]) / noise) ** 2)
        lik /= noise * np.sqrt(2.0 * np.pi)
        p = lik.sum(axis=1)
        dens[s:s + 2000] = p
        out[s:s + 2000] = np.einsum("yn,nij->yij", lik, Gam) / np.maximum(p, 1e-300)[:, None, None]
    return out, dens


def delta_alg(model) -> DeltaAlg:
    """``delta_alg`` of a registry target, noiseless or noisy (THEORY.md section 5).

    Targets not even in ``z`` (``relu``, ``linear``) have ``E[z | y] != 0``: the direction is
    learned at any ``delta`` and the result is ``0`` with that reason.
    """
    if not isinstance(model, MultiIndexModel) or model._target is None:
        raise TypeError("model must be an rmt.MultiIndexModel with a registry target")
    if not model.even:
        return DeltaAlg(0.0, np.inf, np.zeros((model.k, model.k)),
                        "E[z | y] != 0: the direction is learned at any delta")
    t, w, y_t, Gam = _latent_rule(model)
    if model.noise == 0.0:
        Gs, weights = Gam, w
    else:
        s = model.noise
        lo, hi = y_t.min() - 12 * s, y_t.max() + 12 * s
        y, wy = _gauss_legendre(lo, hi, int(np.ceil((hi - lo) / (0.25 * s))), 8)
        Gs, p = _posterior_G(w, y_t, Gam, s, y)
        weights = wy * p
    L, B = _operator(Gs, weights)
    vals, vecs = np.linalg.eigh(0.5 * (L + L.T))
    nu1 = float(vals[-1])
    direction = np.tensordot(vecs[:, -1], B, axes=(0, 0))
    if nu1 <= 0:
        return DeltaAlg(np.inf, nu1, direction, "nu_1 = 0: no direction is learned")
    return DeltaAlg(1.0 / nu1, nu1, direction)
