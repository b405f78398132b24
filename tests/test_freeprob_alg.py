"""delta_alg (docs/theory.md section 5) against known values and scipy.integrate.quad."""

import numpy as np
import pytest
from scipy import integrate

import rmt


@pytest.mark.parametrize(
    "name, k, expected",
    [
        ("phase_retrieval", None, 0.5),
        ("abs", None, 0.5),  # E[z^2 | |z|] = y^2: E[(z^2-1)^2] = 2
        ("norm2", 2, 1.0),
        ("norm2", 3, 1.5),
        ("norm2", 5, 2.5),
        ("sign_z1z2", None, np.pi**2 / 4),  # G(y) = (2/pi) y [[0,1],[1,0]]
    ],
)
def test_known_values(name, k, expected):
    res = rmt.delta_alg(rmt.MultiIndexModel(name, k=k))
    assert abs(res.value - expected) < 1e-10
    assert float(res) == res.value


@pytest.mark.parametrize("name", ["relu", "linear"])
def test_first_order_targets_are_learned_at_any_delta(name):
    res = rmt.delta_alg(rmt.MultiIndexModel(name, noise=0.2))
    assert res.value == 0.0 and "E[z | y]" in res.reason


def phi(t):
    return np.exp(-t * t / 2) / np.sqrt(2 * np.pi)


def test_z1z2_against_nested_quad():
    """a(y) = E[z1^2 | z1 z2 = y] from its defining integrals, no Bessel functions."""

    def cond(y, p):  # int |t|^(2p-1) phi(t) phi(y/t) dt over t > 0, times 2
        f = lambda t: t ** (2 * p - 1) * phi(t) * phi(y / t)
        return 2 * integrate.quad(f, 0, np.inf, limit=200, epsabs=1e-14)[0]

    def moments(y):
        p, a = cond(y, 0), cond(y, 1) / cond(y, 0)
        return p * np.array([(a - 1) ** 2, y * y])

    m = 2 * np.array(
        integrate.quad_vec(moments, 1e-12, 40, epsabs=1e-11, points=[1e-6, 1e-3, 0.1, 1.0])[0]
    )
    # on symmetric 2x2 M, E[G M G] with G = (a-1) I + y P has eigenvalues
    # E[(a-1)^2] + E[y^2] (M = I or P) and E[(a-1)^2] - E[y^2] (M = diag(1,-1))
    nu1 = m[0] + m[1]
    res = rmt.delta_alg(rmt.MultiIndexModel("z1z2"))
    assert abs(res.value - 1 / nu1) < 1e-6


@pytest.mark.parametrize("noise", [0.3, 1.0])
def test_noisy_phase_retrieval_against_trapezoid_reference(noise):
    """nu1 = E_y[(E[z^2|y] - 1)^2] by the trapezoid rule on fine grids in z and y.

    Both integrands are analytic and decay fast, so the trapezoid rule converges geometrically.
    """
    z = np.linspace(-12, 12, 4001)
    y = np.arange(-12 * noise, 144 + 12 * noise, noise / 25)
    total = 0.0
    for ys in np.array_split(y, 50):
        lik = phi(z)[None, :] * phi((ys[:, None] - z[None, :] ** 2) / noise) / noise
        p = lik.sum(axis=1) * (z[1] - z[0])
        m2 = (lik * z**2).sum(axis=1) * (z[1] - z[0])
        total += np.sum(p * (m2 / np.maximum(p, 1e-300) - 1) ** 2) * (y[1] - y[0])
    res = rmt.delta_alg(rmt.MultiIndexModel("phase_retrieval", noise=noise))
    assert abs(res.value - 1 / total) < 1e-6 * (1 / total)


def test_noisy_sign_target_closed_form():
    """E[s | y] = tanh(y / sigma^2) for y = s + sigma eps: nu1 = (2/pi)^2 E[tanh(y/sigma^2)^2]."""
    s = 0.5

    def f(y):
        p = 0.5 * (phi((y - 1) / s) + phi((y + 1) / s)) / s
        return p * np.tanh(y / s**2) ** 2

    nu1 = (2 / np.pi) ** 2 * integrate.quad(f, -10, 10, limit=200)[0]
    res = rmt.delta_alg(rmt.MultiIndexModel("sign_z1z2", noise=s))
    assert abs(res.value - 1 / nu1) < 1e-6 * (1 / nu1)


def test_delta_alg_rejects_non_models():
    with pytest.raises(TypeError):
        rmt.delta_alg("phase_retrieval")
