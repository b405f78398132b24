"""The Hessian law from fresh draws of the per-sample process (``rmt.dynamics.dmft.resampled_laws``,
docs/theory.md 8.10).

- Fed the solve's own draws and cavity field, the forward process (Numba kernel and numpy)
  gives the solve's pre-activations at every step, to rounding: the same equation (D1).  So do
  the width kernels of every SIMD path, for widths 1 to 5 and draws that fill no whole chunk.
- The draws made in blocks: the law of a step does not depend on the later steps asked with
  it (its innovations are drawn first), whole blocks or not.
- The blocks drawn side by side on two threads: the laws of one thread, to the last bit.
- Fresh draws sample the same law as the solve's own: the mean curvature block and the spike
  moments agree within their Monte Carlo errors.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import rmt
import rmt.dynamics.dmft as dm
from rmt.kernels.dispatch import TARGETS, forward_kernel
from rmt.kernels.dmft import draw_major, forward_process


def _solve(activation, steps=30, n=300, delta=2.6, m=2):
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(m, activation=activation, loss="huber")
    res = rmt.dmft_gd(model, net, delta, 0.5, steps, 0.01, n_samples=n, n_test=100, rng=3)
    assert res.converged
    return model, net, res


def _inputs(res, net, t):
    m = res.M.shape[1]
    b = (t + 1) * m
    X = np.concatenate([res.xi[s] for s in range(t + 1)], axis=1)
    Rw = np.ascontiguousarray(res.R_w[: t + 1, : t + 1].transpose(0, 2, 1, 3)).reshape(b, b)
    widths = np.zeros((t + 1, m))
    if net.activation == "relu":
        widths = dm.RELU_SMOOTHING * np.array([res.u[s].std(axis=0) for s in range(t + 1)])
    return X, Rw, np.ascontiguousarray(res.M[: t + 1]), widths


@pytest.mark.parametrize("activation", ["softplus", "relu", "tanh"])
def test_the_forward_process_of_the_solves_own_field_is_the_solve(activation):
    model, net, res = _solve(activation)
    t = res.steps - 1
    X, Rw, M, widths = _inputs(res, net, t)
    slot = np.arange(t + 1)
    c = res.lr / res.delta
    U = np.empty((t + 1,) + res.u.shape[1:])
    forward_process(net.act_code, net.loss_code, 1.0, np.asarray(net.a, float), Rw, M, res.z,
                    res.y, X, c, widths, slot, U)  # fmt: skip
    U2 = np.empty_like(U)
    dm._forward_numpy(net, Rw, M, res.z, res.y, X, c, widths, slot, U2)
    scale = np.abs(res.u[: t + 1]).max()
    np.testing.assert_allclose(U, res.u[: t + 1], rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(U2, res.u[: t + 1], rtol=0, atol=1e-13 * scale)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
def test_the_width_kernels_run_the_solves_own_field_to_the_solve(m):
    """301 draws: no whole number of chunks (32, 16, 12 draws) for any width."""
    model, net, res = _solve("softplus", steps=25, n=301, m=m)
    t = res.steps - 1
    X, Rw, M, widths = _inputs(res, net, t)
    slot = np.full(t + 1, -1)
    slot[[3, t]] = [0, 1]
    scale = np.abs(res.u[: t + 1]).max()
    for path in TARGETS:
        rmt.kernels.dispatch._width_kernel.cache_clear()
        U = np.full((2,) + res.u.shape[1:], np.nan)
        forward_kernel(m, path)(net.act_code, net.loss_code, 1.0, np.asarray(net.a, float), Rw,
                                M, res.z, res.y, X, res.lr / res.delta, widths, slot, U)  # fmt: skip
        np.testing.assert_allclose(U, res.u[[3, t]], rtol=0, atol=1e-13 * scale, err_msg=path)


def test_the_laws_do_not_depend_on_the_block_or_the_other_steps(monkeypatch):
    """Draws in blocks of 100, 250 of them: the law of step 10 asked alone is the law of step 10
    asked with step 20, to rounding (the field's triangular product in another order)."""
    model, net, res = _solve("softplus", steps=25, n=200)
    monkeypatch.setattr(dm, "LAW_BLOCK", 100)
    both = dm.resampled_laws(res, model, net, [10, 20], 250, np.random.default_rng(4))
    alone = dm.resampled_laws(res, model, net, [10], 250, np.random.default_rng(4))[10]
    assert alone.D.shape[0] == 250
    np.testing.assert_allclose(
        alone.zhat, both[10].zhat, rtol=0, atol=1e-12 * np.abs(alone.zhat).max()
    )
    np.testing.assert_allclose(alone.D, both[10].D, rtol=0, atol=1e-12 * np.abs(alone.D).max())
    assert not np.allclose(both[10].D, both[20].D)


def test_fresh_draws_sample_the_law_of_the_solves_own_draws():
    """At the plateau region of phase retrieval (step 120, ``delta = 2.6``): the mean curvature
    block, the second moments of the spike coordinates and the spike moments
    ``E[zhat zhat^T (x) D]`` of the law from 40 000 fresh draws against those of the solve's
    4000 own draws, within 5 standard errors of their difference."""
    model, net, res = _solve("softplus", steps=121, n=4000)
    t = 120
    law = dm.resampled_laws(res, model, net, [t], 40_000, np.random.default_rng(1))[t]
    own = dm.dmft_law(res, net, t)
    U_own = res.u[t]
    D_own = net.curvature(U_own, res.y)

    def moments(zhat, D):  # D, zhat^2 and E[zhat zhat^T (x) D], the law's spike moments
        zz = np.einsum("na,nb->nab", zhat, zhat).reshape(len(zhat), -1)
        flat = D.reshape(len(D), -1)
        return [flat, zhat**2, np.einsum("na,nk->nak", zz, flat).reshape(len(D), -1)]

    for a, b in zip(moments(own.zhat, D_own), moments(law.zhat, law.D)):
        diff = a.mean(axis=0) - b.mean(axis=0)
        se = np.sqrt(a.var(axis=0) / len(a) + b.var(axis=0) / len(b))
        assert np.all(np.abs(diff) <= 5 * se), (diff, se)


def test_resampled_laws_refuse_bad_steps():
    model, net, res = _solve("softplus", steps=5, n=64)
    with pytest.raises(ValueError, match="times must be steps"):
        dm.resampled_laws(res, model, net, [5], 100, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_draws"):
        dm.resampled_laws(res, model, net, [2], 1, np.random.default_rng(0))


def test_the_smoothed_curve_is_the_centred_moving_average():
    """:func:`rmt.dynamics.dmft.smoothed_curve` against the direct windowed means, and a prefix of a
    curve gives the prefix of its smoothed curve (what the online rule relies on)."""
    x = np.random.default_rng(0).standard_normal(40).cumsum()
    h = 6
    want = [x[t - min(h, t) : t + min(h, t) + 1].mean() for t in range(40 - h)]
    np.testing.assert_allclose(dm.smoothed_curve(x, h), want, rtol=1e-13)
    np.testing.assert_array_equal(dm.smoothed_curve(x[:30], h), dm.smoothed_curve(x, h)[:24])
    assert dm.smoothed_curve(x[:5], h).size == 0


def test_draw_major_is_the_transpose_of_the_step_major_draws():
    G = np.random.default_rng(2).standard_normal((7, 13, 3))
    out = np.empty((13, 21))
    draw_major(G, out)
    np.testing.assert_array_equal(out, G.transpose(1, 0, 2).reshape(13, 21))


def test_the_laws_do_not_depend_on_the_threads_that_draw_them(monkeypatch):
    """Blocks drawn side by side on two threads or one after the other on one: the same draws,
    so the same laws to the last bit."""
    model, net, res = _solve("softplus", steps=25, n=200)
    monkeypatch.setattr(dm, "LAW_BLOCK", 100)
    laws = []
    before = numba.get_num_threads()
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            laws.append(dm.resampled_laws(res, model, net, [10, 20], 450, np.random.default_rng(4)))
    finally:
        numba.set_num_threads(before)
    for t in (10, 20):
        np.testing.assert_array_equal(laws[0][t].zhat, laws[1][t].zhat)
        np.testing.assert_array_equal(laws[0][t].D, laws[1][t].D)


def test_a_hessian_without_its_right_edge_has_the_same_margins():
    """``hessian_at_step(right_edge=False)``: the left edge, the outliers and both margins of
    the full computation to the last bit; the right edge not computed."""
    model, net, res = _solve("softplus", steps=121, n=1000)
    law = dm.resampled_laws(res, model, net, [120], 4000, np.random.default_rng(1))[120]
    full = dm.hessian_at_step(res, net, 120, law=law)
    left = dm.hessian_at_step(res, net, 120, law=law, right_edge=False)
    assert full.converged and left.converged
    assert np.isfinite(full.edge_hi) and np.isnan(left.edge_hi)
    assert (left.edge_lo, left.theta_margin, left.learning_margin) == (
        full.edge_lo, full.theta_margin, full.learning_margin,
    )  # fmt: skip
    np.testing.assert_array_equal(left.outliers, full.outliers)
