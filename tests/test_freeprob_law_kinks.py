"""Closed-form kinks of the aligned m = 1 laws (``rmt.freeprob.law._kink_positions``).

References: the activation kernels themselves (the inverse is a round trip), the grid search
with Illinois steps (``rmt.freeprob.nodes.kink_roots``, checked against brentq in
``test_freeprob_quadrature.py``) on the network's kink functions, and the aligned law built
with that search in place of the closed form.
"""

from __future__ import annotations

import numpy as np
import pytest

import rmt
from rmt.freeprob import law as law_module
from rmt.freeprob.law import MONOTONE, inverse_activation
from rmt.freeprob.nodes import kink_roots

CASES = [
    ("softplus", "phase_retrieval", 0.49, 0.0),
    ("tanh", "phase_retrieval", 4.0, 0.0),
    ("erf", "phase_retrieval", 1.0, 0.3),
    ("relu", "abs", 1.0, -0.4),
    ("cubic", "phase_retrieval", 0.25, 0.0),
    ("tanh", "relu", 2.0, 0.5),
]


@pytest.mark.parametrize("act", MONOTONE)
def test_inverse_activation_undoes_the_activation(act):
    net = rmt.TwoLayerNet(1, act)
    u = np.linspace(-4.0, 4.0, 161)
    if act == "relu":
        u = u[u > 0]
    v, dv = (a[:, 0] for a in net.sigma(u[:, None])[:2])
    # the rounding of v, carried to u by 1 / sigma'(u) (erf at |u| = 4: 1e-10)
    with np.errstate(divide="ignore"):  # the cubic's slope at 0
        carried = 4.0 * np.finfo(float).eps * np.maximum(1.0, np.abs(v)) / dv
        tol = 1e-12 * (1.0 + np.abs(u)) + carried
    assert np.all(np.abs(inverse_activation(act, v) - u) <= np.nan_to_num(tol, posinf=1e-5))
    outside = {"tanh": [1.0, -1.5], "erf": [1.0, 2.0], "softplus": [0.0, -1.0], "relu": [0.0]}
    assert np.all(np.isnan(inverse_activation(act, outside.get(act, []))))


def _setup(act, target, Q, M):
    net = rmt.TwoLayerNet(1, act, "huber", huber_delta=1.0)
    model = rmt.MultiIndexModel(target)
    c = np.sqrt(Q - M * M)
    roots = law_module._kink_positions(net, M, c, model, 0)

    def kinks(pts):
        return net.kinks(M * pts[:, :1] + c * pts[:, 1:2], model.link(pts[:, :1]))

    return net, c, roots, kinks


@pytest.mark.parametrize("act, target, Q, M", CASES)
def test_closed_form_kinks_match_the_grid_search(act, target, Q, M):
    net, c, roots, kinks = _setup(act, target, Q, M)
    z = np.linspace(-5.0, 5.0, 41)
    owner, t = roots(z)
    g_owner, g_t = kink_roots(kinks, z, c)
    assert g_owner.size > 0
    # every zero of the grid search is a closed-form zero; the closed form may find more
    # (two zeros within one grid step), each a sign change of the kink functions
    for j in range(z.size):
        mine, grid = np.sort(t[owner == j]), np.sort(g_t[g_owner == j])
        for r in grid:
            gap = np.min(np.abs(mine - r))
            if gap > 1e-11 * max(1.0, abs(r)):
                # a flat zero (cubic: a u^3 at u = 0) where the kink function rounds to 0 away
                # from the root, and the grid search closed its bracket there
                assert np.max(np.abs(kinks(np.array([[z[j], r]])))) <= 1e-14 and gap < 1e-4
        for r in mine:
            others = np.abs(mine - r)[np.abs(mine - r) > 0]
            # past the rounding of a flat zero, short of the next zero
            h = min(1e-4, 0.5 * others.min()) if others.size else 1e-4
            pts = np.array([[z[j], r - h], [z[j], r + h]])
            v = kinks(pts)
            assert np.any(np.sign(v[0]) != np.sign(v[1]))


@pytest.mark.parametrize("act, target, Q, M", CASES[:4])
def test_aligned_law_with_closed_form_kinks_equals_the_grid_search_law(
    act, target, Q, M, monkeypatch
):
    net = rmt.TwoLayerNet(1, act, "huber", huber_delta=1.0)
    model = rmt.MultiIndexModel(target)
    args = (model, net, np.array([[Q]]), np.array([[M]]))
    fast = rmt.SpikeLaw.from_network(*args, nodes="aligned")
    monkeypatch.setattr(law_module, "_kink_positions", lambda *a: None)
    slow = rmt.SpikeLaw.from_network(*args, nodes="aligned")
    for L in (fast, slow):
        assert L.kind == "aligned"
    z_f, t_f, D_f = fast.zhat[:, 0], fast.zhat[:, 1], fast.D[:, 0, 0]
    z_s, t_s, D_s = slow.zhat[:, 0], slow.zhat[:, 1], slow.D[:, 0, 0]
    for f, s in ((D_f, D_s), (z_f**2 * D_f, z_s**2 * D_s), (t_f**2 * D_f, t_s**2 * D_s)):
        a, b = fast.expect(f), slow.expect(s)
        assert abs(a - b) <= 1e-12 * max(abs(b), 1e-3)
