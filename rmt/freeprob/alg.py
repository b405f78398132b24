"""The algorithmic threshold ``delta_alg`` (docs/theory.md section 5).

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
from scipy.special import gammaln, k0e, k1e

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


def _panel_rule(edges, density, order=8):
    """Composite Gauss-Legendre nodes on ``edges`` with weights ``density(x) dx``."""
    x, w = np.polynomial.legendre.leggauss(order)
    half, mid = np.diff(edges) / 2, (edges[1:] + edges[:-1]) / 2
    pts = (mid[:, None] + half[:, None] * x).ravel()
    return pts, (half[:, None] * w).ravel() * density(pts)


def _label_edges(top, width):
    return np.linspace(0.0, top, int(np.ceil(top / width)) + 1)


def _radial_rule(k, width):
    """``r = |z|`` for ``z ~ N(0, I_k)``, with panels fine enough that ``r^2 / k`` moves by at most
    ``width`` per panel (so a noise kernel of that width in the label is resolved)."""
    top = (k + 60.0 + 12.0 * np.sqrt(2.0 * k)) / k
    r_edges = np.sqrt(k * _label_edges(top, width))
    log_c = (1 - k / 2) * np.log(2.0) - gammaln(k / 2)

    def density(r):
        return np.exp(log_c + (k - 1) * np.log(np.maximum(r, 1e-300)) - r * r / 2)

    r, w = _panel_rule(r_edges, density)
    return r, w / w.sum()


def _latent_z1z2(width):
    """``t = z1 z2`` with density ``K0(|t|)/pi``: graded panels near the log singularity at 0."""
    edges = np.concatenate(
        [
            [0.0],
            np.geomspace(1e-12, 1.0, 40),
            1.0 + _label_edges(39.0, min(width, 0.5))[1:],
        ]
    )
    r, wr = _panel_rule(edges, lambda x: k0e(x) * np.exp(-x) / np.pi)
    t = np.concatenate([-r[::-1], r])
    wt = np.concatenate([wr[::-1], wr])
    return t, wt / wt.sum()


def _latent_rule(model: MultiIndexModel):
    """``(weights, y(t), Gamma(t))`` for a registry target; ``Gamma`` has shape ``(N, k, k)``.

    Panels are fine enough in the label ``y(t)`` to resolve a noise kernel of width ``noise``.
    """
    name, k = model.name, model.k
    width = 0.25 if model.noise == 0 else min(0.25, model.noise / 4)
    if name == "phase_retrieval":
        r, w = _radial_rule(1, width)
        return w, r * r, (r * r - 1.0)[:, None, None]
    if name == "abs":
        r, w = _panel_rule(
            _label_edges(13.0, width),
            lambda x: 2 * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
        )
        return w / w.sum(), r, (r * r - 1.0)[:, None, None]
    if name == "norm2":
        r, w = _radial_rule(k, width)  # E[z z^T | |z| = r] = (r^2 / k) I
        y = r * r / k
        return w, y, (y - 1.0)[:, None, None] * np.eye(k)
    P = np.array([[0.0, 1.0], [1.0, 0.0]])
    if name == "z1z2":
        t, w = _latent_z1z2(width)
        r = np.maximum(np.abs(t), 1e-300)
        a = r * k1e(r) / k0e(r)  # E[z1^2 | z1 z2 = t]
        return w, t, (a - 1.0)[:, None, None] * np.eye(2) + t[:, None, None] * P
    if name == "sign_z1z2":
        t = np.array([-1.0, 1.0])
        return np.array([0.5, 0.5]), t, t[:, None, None] * (2.0 / np.pi) * P
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
        yy = y[s : s + 2000]
        lik = t_w[None, :] * np.exp(-0.5 * ((yy[:, None] - y_t[None, :]) / noise) ** 2)
        lik /= noise * np.sqrt(2.0 * np.pi)
        p = lik.sum(axis=1)
        dens[s : s + 2000] = p
        out[s : s + 2000] = (
            np.einsum("yn,nij->yij", lik, Gam) / np.maximum(p, 1e-300)[:, None, None]
        )
    return out, dens


def delta_alg(model) -> DeltaAlg:
    """``delta_alg`` of a registry target, noiseless or noisy (docs/theory.md section 5).

    Targets not even in ``z`` (``relu``, ``linear``) have ``E[z | y] != 0``: the direction is
    learned at any ``delta`` and the result is ``0`` with that reason.
    """
    if not isinstance(model, MultiIndexModel) or not model.is_registry:
        raise TypeError("model must be an rmt.MultiIndexModel with a registry target")
    if not model.even:
        return DeltaAlg(
            0.0,
            np.inf,
            np.zeros((model.k, model.k)),
            "E[z | y] != 0: the direction is learned at any delta",
        )
    w, y_t, Gam = _latent_rule(model)
    if model.noise == 0.0:
        Gs, weights = Gam, w
    else:
        s = model.noise
        lo, hi = y_t.min() - 12 * s, y_t.max() + 12 * s
        y, wy = _panel_rule(
            np.linspace(lo, hi, int(np.ceil((hi - lo) / (0.25 * s))) + 1), np.ones_like
        )
        Gs, p = _posterior_G(w, y_t, Gam, s, y)
        weights = wy * p
    L, B = _operator(Gs, weights)
    vals, vecs = np.linalg.eigh(0.5 * (L + L.T))
    nu1 = float(vals[-1])
    direction = np.tensordot(vecs[:, -1], B, axes=(0, 0))
    if nu1 <= 0:
        return DeltaAlg(np.inf, nu1, direction, "nu_1 = 0: no direction is learned")
    return DeltaAlg(1.0 / nu1, nu1, direction)
