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

from rmt.problem.models import MultiIndexModel
from rmt.validation import check_positive_int


@dataclass(kw_only=True)
class DeltaAlg:
    """``value = 1/nu1`` (``0`` when ``E[z|y] != 0``: learned at any delta, see ``reason``)."""

    value: float
    nu1: float
    direction: np.ndarray
    reason: str = ""
    converged: bool = True
    stderr: float = 0.0

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


def delta_alg(model, *, n_mc=1_000_000, bins=None, rng=0) -> DeltaAlg:
    """``delta_alg`` of a target, noiseless or noisy (docs/theory.md section 5).

    Targets not even in ``z`` (``relu``, ``linear``, a callable with ``model.even`` False) have
    ``E[z | y] != 0``: the direction is learned at any ``delta`` and the result is ``0`` with
    that reason.  A registry target uses its latent rule (quadrature, to about 1e-8); ``n_mc``,
    ``bins`` and ``rng`` are then unused.

    A callable target ``g(z, rng)`` uses :func:`binned_operator`: ``n_mc`` draws of ``(z, y)``
    (seed ``rng``, 0 by default, so the answer is reproducible), ``G(y)`` estimated per bin of
    equal mass in ``y`` (``bins``, default ``n_mc // 500``; equal labels are never split, so an
    atom of ``y`` is one bin), and ``E_y[G M G]`` by an unbiased pair estimator within bins.
    ``stderr`` is the Monte Carlo standard error of ``nu_1`` (linearised); the error of
    ``value`` is about ``value * stderr / nu_1``, plus a binning bias that makes ``nu_1`` low by
    the within-bin variance of ``G`` (its size at the defaults: benchmarks/RESULTS.md).
    ``delta_alg`` depends on ``y`` only through
    the sigma-algebra it generates, so ``tanh(z)^2`` gives the same bins, and value, as ``z^2``.

    Parameters
    ----------
    model : MultiIndexModel
        The target (registry or callable, with or without label noise).
    n_mc : int
        Draws of ``(z, y)`` for a callable target.
    bins : int, optional
        Bins of equal mass in ``y`` for a callable target (default ``n_mc // 500``).
    rng : int or Generator
        Seed of the draws for a callable target.

    Returns
    -------
    DeltaAlg
        ``value = 1 / nu1``, ``nu1``, the leading ``direction`` (``k x k``), ``stderr`` and,
        when the value is ``0`` or ``inf``, the ``reason``.

    Raises
    ------
    TypeError
        When ``model`` is not an :class:`rmt.MultiIndexModel`.

    Examples
    --------
    Phase retrieval has ``delta_alg = 1/2`` (docs/theory.md section 5.2); a target that is not
    even is learned at any ``delta``:

    >>> import rmt
    >>> round(rmt.delta_alg(rmt.MultiIndexModel("phase_retrieval")).value, 6)
    0.5
    >>> rmt.delta_alg(rmt.MultiIndexModel("relu")).value
    0.0
    """
    if not isinstance(model, MultiIndexModel):
        raise TypeError(f"model must be an rmt.MultiIndexModel; got {type(model).__name__}")
    if not model.even:
        return DeltaAlg(
            value=0.0,
            nu1=np.inf,
            direction=np.zeros((model.k, model.k)),
            reason="E[z | y] != 0: the direction is learned at any delta",
        )
    if not model.is_registry:
        return _delta_alg_sampled(model, n_mc, bins, rng)
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
        return DeltaAlg(
            value=np.inf, nu1=nu1, direction=direction, reason="nu_1 = 0: no direction is learned"
        )
    return DeltaAlg(value=1.0 / nu1, nu1=nu1, direction=direction)


def binned_operator(y, z, bins):
    """Matrix of ``M -> E_y[G(y) M G(y)]``, ``G(y) = E[z z^T - I | y]``, from samples.

    Samples ``(y_i, z_i)`` are put in ``bins`` bins of equal count in ``y`` (all samples with
    the same label in one bin), ``G`` is the bin mean of ``A_i = z_i z_i^T - I``, and
    ``G M G`` is estimated without the bias of squared noisy means by the pair (U-) statistic
    ``(S M S - sum_i A_i M A_i) / (n_b (n_b - 1))`` with ``S = sum_i A_i`` over the bin.
    Returns ``(L, B, bin, G, A)``: ``L`` in the orthonormal basis ``B`` of symmetric matrices,
    and per sample (sorted by ``y``) its bin and ``A_i``, per bin ``G``.  Bins with a single
    sample contribute nothing (their mass is ``1 / n``).
    """
    n, k = z.shape
    order = np.argsort(y, kind="stable")
    ys = y[order]
    cuts = ys[np.linspace(0, n, bins + 1).astype(int)[1:-1]]
    label_bin = np.searchsorted(np.unique(cuts), ys, side="right")
    _, label_bin = np.unique(label_bin, return_inverse=True)
    nb = np.bincount(label_bin)
    A = np.einsum("ni,nj->nij", z[order], z[order]) - np.eye(k)
    S = np.zeros((nb.size, k, k))
    np.add.at(S, label_bin, A)
    Bf = _sym_basis(k).reshape(-1, k * k)
    coef = np.where(nb >= 2, 1.0 / (n * np.maximum(nb - 1, 1)), 0.0)
    # tr(B_p X B_q X) = vec(B_p)^T (X kron X) vec(B_q) for symmetric X
    Sf, Af = S.reshape(-1, k * k), A.reshape(n, k * k)
    kron = _weighted_kron(coef, Sf) - _weighted_kron(coef[label_bin], Af)
    L = Bf @ kron @ Bf.T
    G = S / np.maximum(nb, 1)[:, None, None]
    return L, _sym_basis(k), label_bin, G, A


def _weighted_kron(w, Xf):
    """``sum_n w_n X_n kron X_n`` for row-flattened ``X_n`` (``k^2 x k^2``)."""
    k = int(round(np.sqrt(Xf.shape[1])))
    outer = (Xf * w[:, None]).T @ Xf  # [(a,b),(c,d)] = sum w X_ab X_cd
    return outer.reshape(k, k, k, k).transpose(0, 2, 1, 3).reshape(k * k, k * k)


def _delta_alg_sampled(model, n_mc, bins, rng) -> DeltaAlg:
    """``delta_alg`` of a callable target by :func:`binned_operator` on ``n_mc`` samples."""
    n_mc = check_positive_int(n_mc, "n_mc", minimum=1000)
    bins = max(1, n_mc // 500) if bins is None else check_positive_int(bins, "bins")
    gen = np.random.default_rng(rng)
    z = gen.standard_normal((n_mc, model.k))
    y = model.labels(z, gen)
    L, B, bin_of, G, A = binned_operator(y, z, bins)
    vals, vecs = np.linalg.eigh(0.5 * (L + L.T))
    nu1 = float(vals[-1])
    V = np.tensordot(vecs[:, -1], B, axes=(0, 0))
    # influence of one sample on nu1 = <V, E[G V G]>: 2 <V G_b V, A_i> - <V G_b V, G_b>
    GV = np.einsum("bij,jk,bkl->bil", G, V, G)  # G_b V G_b
    VGV = np.einsum("ij,bjk,kl->bil", V, G, V)  # V G_b V
    psi = 2.0 * np.einsum("nij,nij->n", VGV[bin_of], A) - np.einsum("bij,ij->b", GV, V)[bin_of]
    stderr = float(np.std(psi) / np.sqrt(n_mc))
    note = f"binned Monte Carlo: {n_mc} samples, {G.shape[0]} bins in y, stderr(nu_1) {stderr:.2g}"
    if nu1 <= 2.0 * stderr:
        return DeltaAlg(
            value=np.inf,
            nu1=nu1,
            direction=V,
            reason=f"nu_1 = 0 within its error: no direction; {note}",
            converged=True,
            stderr=stderr,
        )
    return DeltaAlg(
        value=1.0 / nu1, nu1=nu1, direction=V, reason=note, converged=True, stderr=stderr
    )
