"""Activations and losses with their exact derivatives, as Numba kernels.

Activations and losses are passed to kernels as integer codes, so every kernel is a leaf
taking arrays and scalars and can be cached (STYLE.md, Numba anchors).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

ACTIVATIONS = {"tanh": 0, "quadratic": 1, "cubic": 2, "softplus": 3, "erf": 4, "relu": 5}
LOSSES = {"square": 0, "logistic": 1, "huber": 2}

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@njit(cache=True, inline="always")
def _sigmoid(t):
    if t >= 0.0:
        return 1.0 / (1.0 + math.exp(-t))
    e = math.exp(t)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def activation(code, u):
    """Return ``(sigma(u), sigma'(u), sigma''(u))`` for activation ``code``."""
    if code == 0:
        t = math.tanh(u)
        return t, 1.0 - t * t, -2.0 * t * (1.0 - t * t)
    if code == 1:
        return u * u, 2.0 * u, 2.0
    if code == 2:
        return u * u * u, 3.0 * u * u, 6.0 * u
    if code == 3:
        # one exp for both: _sigmoid(u) evaluates the same exp(-|u|) (bit-identical to it)
        e = math.exp(-abs(u))
        s = 1.0 / (1.0 + e) if u >= 0.0 else e / (1.0 + e)
        sp = max(u, 0.0) + math.log1p(e)
        return sp, s, s * (1.0 - s)
    if code == 4:
        g = _TWO_OVER_SQRT_PI * math.exp(-u * u)
        return math.erf(u), g, -2.0 * u * g
    # relu: sigma'' = 0 almost everywhere (the kink at 0 has measure zero)
    if u > 0.0:
        return u, 1.0, 0.0
    return 0.0, 0.0, 0.0


@njit(cache=True, inline="always")
def loss(code, y, f, huber_delta):
    """Return ``(l, dl/df, d2l/df2)`` for loss ``code`` at label ``y`` and output ``f``."""
    if code == 0:
        r = f - y
        return 0.5 * r * r, r, 1.0
    if code == 1:
        t = y * f
        e = math.exp(-abs(t))  # also the exp of _sigmoid(-t) (bit-identical to it)
        ell = max(-t, 0.0) + math.log1p(e)
        s = 1.0 / (1.0 + e) if t <= 0.0 else e / (1.0 + e)
        return ell, -y * s, y * y * s * (1.0 - s)
    r = f - y
    if abs(r) <= huber_delta:
        return 0.5 * r * r, r, 1.0
    sgn = 1.0 if r > 0 else -1.0
    return huber_delta * (abs(r) - 0.5 * huber_delta), huber_delta * sgn, 0.0


@njit(cache=True, inline="always")
def _activation_row(code, U, out_s, out_ds, out_d2s, i):
    """Row ``i`` of :func:`activation_array` (shared with the serial kernel: the same values)."""
    for j in range(U.shape[1]):
        s, ds, d2s = activation(code, U[i, j])
        out_s[i, j] = s
        out_ds[i, j] = ds
        out_d2s[i, j] = d2s


@njit(cache=True, parallel=True)
def activation_array(code, U, out_s, out_ds, out_d2s):
    """Fill ``out_*`` with ``sigma, sigma', sigma''`` evaluated at every entry of 2-D ``U``."""
    for i in prange(U.shape[0]):
        _activation_row(code, U, out_s, out_ds, out_d2s, i)


@njit(cache=True)
def activation_array_serial(code, U, out_s, out_ds, out_d2s):
    """:func:`activation_array` on one thread (the same values): for small arrays, where a
    parallel call waits for the sleeping threads (the kink searches of ``aligned_nodes``: a
    few hundred calls a law on a few thousand points)."""
    for i in range(U.shape[0]):
        _activation_row(code, U, out_s, out_ds, out_d2s, i)


#: entries below which :func:`activation_values` runs the serial kernel
SERIAL_MAX_ENTRIES = 100_000


@njit(cache=True, parallel=True)
def loss_array(code, y, f, huber_delta, out_l, out_dl, out_d2l):
    """Fill ``out_*`` with ``l, l', l''`` at every pair ``(y[i], f[i])``."""
    for i in prange(y.shape[0]):
        a, b, c = loss(code, y[i], f[i], huber_delta)
        out_l[i] = a
        out_dl[i] = b
        out_d2l[i] = c


def activation_values(code: int, U: np.ndarray):
    """``(sigma, sigma', sigma'')`` of a 2-D array, as three new arrays."""
    U = np.ascontiguousarray(U, dtype=np.float64)
    shape = U.shape
    U2 = U.reshape(-1, shape[-1]) if U.ndim > 1 else U.reshape(-1, 1)
    outs = [np.empty_like(U2) for _ in range(3)]
    kernel = activation_array_serial if U2.size < SERIAL_MAX_ENTRIES else activation_array
    kernel(code, U2, *outs)
    return tuple(o.reshape(shape) for o in outs)


def loss_values(code: int, y: np.ndarray, f: np.ndarray, huber_delta: float):
    """``(l, l', l'')`` of 1-D arrays ``y`` and ``f``, as three new arrays."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    f = np.ascontiguousarray(f, dtype=np.float64)
    outs = [np.empty_like(y) for _ in range(3)]
    loss_array(code, y, f, float(huber_delta), *outs)
    return tuple(outs)
