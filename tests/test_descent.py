"""Gradient-descent engine, its kernels and the phase rule (docs/theory.md sections 1.3 and 7)."""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import rmt
from rmt.dynamics.descent import PlateauRule, gradient_descent, segment_phases
from rmt.dynamics.escape import escape_step
from rmt.kernels._generated.descent_small import GRAD_KERNELS
from rmt.kernels.descent import LANE_STEP_WIDTHS, step_candidates, step_kernels
from rmt.kernels.elementwise import ACTIVATIONS, LOSSES
from rmt.kernels.hessian import default_chunks
from rmt.kernels.simd import SIMD_TARGET, grad4_c4

from .conftest import ALL_THREADS, numba_threads

ROOT = Path(__file__).resolve().parents[1]


def _kernel_call(kernel, net, data, W):
    return kernel(
        data.X,
        np.ascontiguousarray(W.T),
        data.y,
        net.a,
        net.act_code,
        net.loss_code,
        net.huber_delta,
        default_chunks(),
    )


def _problem(rng, act, loss, m, n=203, d=17):
    target = "sign_z1z2" if loss == "logistic" else "phase_retrieval"
    data = rmt.MultiIndexModel(target).sample(n, d, rng=rng)
    net = rmt.TwoLayerNet(m, act, loss, a=rng.standard_normal(m), huber_delta=0.7)
    return net, data, rng.standard_normal((d, m)) / 3


# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("unrolled", [True, False])
def test_kernels_match_numpy_reference(rng, m, unrolled):
    """Every activation and loss, against TwoLayerNet.loss_and_grad, to 1e-12 relative."""
    grad_kernel, loss_kernel = step_kernels(m, unrolled=unrolled)
    for act in ACTIVATIONS:
        for loss in LOSSES:
            net, data, W = _problem(rng, act, loss, m)
            total, G = _kernel_call(grad_kernel, net, data, W)
            forward = _kernel_call(loss_kernel, net, data, W)
            ref_value, ref_grad = net.loss_and_grad(data, W)
            assert abs(total / data.n - ref_value) <= 1e-12 * max(1.0, abs(ref_value)), (act, loss)
            assert abs(forward / data.n - ref_value) <= 1e-12 * max(1.0, abs(ref_value))
            err = np.abs(G.T / data.n - ref_grad).max()
            assert err <= 1e-12 * max(1e-3, np.abs(ref_grad).max()), (act, loss, err)


def _path_case(target, m):
    """``(target, m)``, ``slow`` where CI would compile a kernel that this CPU does not
    dispatch and that no other CI test checks: the avx512 step of m = 4 (``grad_m4_p4``) on
    a CPU without AVX-512, and the portable steps of m = 2, 3 (the generator's two ends,
    m = 1 and 4, stay in CI; each is a compile of 10-15 s on a fresh clone)."""
    off_host = target == "avx512" and m == 4 and SIMD_TARGET != "avx512"
    middle = target == "portable" and m in (2, 3) and SIMD_TARGET != "portable"
    return pytest.param(target, m, marks=pytest.mark.slow if off_host or middle else ())


@pytest.mark.parametrize(
    "target, m", [_path_case(t, m) for t in ("avx512", "avx2", "portable") for m in (1, 2, 3, 4)]
)
def test_every_path_matches_numpy_reference(rng, m, target):
    """The kernels each SIMD path dispatches (the 4-lane ``grad4_c4`` for the widths of
    ``LANE_STEP_WIDTHS[target]``, else ``grad_m{m}``), for row counts that leave every
    remainder of the 4-row pipeline and of the chunks, against TwoLayerNet.loss_and_grad."""
    grad_kernel, _ = step_kernels(m, target=target)
    want = grad4_c4 if m in LANE_STEP_WIDTHS[target] else GRAD_KERNELS[m]
    assert grad_kernel is want
    for n in (1, 3, 5, 203):
        for act, loss in (("softplus", "huber"), ("tanh", "logistic"), ("relu", "square")):
            net, data, W = _problem(rng, act, loss, m, n=n)
            total, G = _kernel_call(grad_kernel, net, data, W)
            ref_value, ref_grad = net.loss_and_grad(data, W)
            assert abs(total / data.n - ref_value) <= 1e-12 * max(1.0, abs(ref_value)), (n, act)
            err = np.abs(G.T / data.n - ref_grad).max()
            assert err <= 1e-12 * max(1e-3, np.abs(ref_grad).max()), (n, act, loss, err)
    with pytest.raises(ValueError, match="target must be one of"):
        step_kernels(4, target="sse2")


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_4_lane_step_matches_numpy_reference(rng, m):
    """``grad4_c4`` (the ``m`` columns in the lanes of one ``<4 x double>``, 8 rows per step,
    padding lanes for m < 4) for every activation and loss, row counts around one step, and
    float32 rows (against the float64 reference of the rounded rows), to 1e-12 relative."""
    assert grad4_c4 in step_candidates(m)
    for n in (1, 7, 8, 9, 203):
        for act in ACTIVATIONS:
            for loss in LOSSES:
                net, data, W = _problem(rng, act, loss, m, n=n)
                total, G = _kernel_call(grad4_c4, net, data, W)
                ref_value, ref_grad = net.loss_and_grad(data, W)
                assert abs(total / data.n - ref_value) <= 1e-12 * max(1.0, abs(ref_value))
                err = np.abs(G.T / data.n - ref_grad).max()
                assert err <= 1e-12 * max(1e-3, np.abs(ref_grad).max()), (n, act, loss, err)
    net, data, W = _problem(rng, "softplus", "huber", m, n=203)
    rounded = data.X.astype(np.float32)
    ref_value, ref_grad = net.loss_and_grad(
        dataclasses.replace(data, X=rounded.astype(np.float64)), W
    )
    total, G = _kernel_call(grad4_c4, net, dataclasses.replace(data, X=rounded), W)
    assert abs(total / data.n - ref_value) <= 1e-12 * max(1.0, abs(ref_value))
    assert np.abs(G.T / data.n - ref_grad).max() <= 1e-12 * np.abs(ref_grad).max()
    if m == 4:  # five columns do not fit the four lanes: refused, not truncated
        net, data, W = _problem(rng, "softplus", "huber", 5, n=20)
        with pytest.raises(ValueError, match="at most 4 rows"):
            _kernel_call(grad4_c4, net, data, W)


@pytest.mark.parametrize("act", ["softplus", "tanh", "cubic"])
def test_kernel_gradient_matches_finite_differences(rng, act):
    net, data, W = _problem(rng, act, "huber", 4, n=150, d=12)
    grad_kernel, loss_kernel = step_kernels(4)
    _, G = _kernel_call(grad_kernel, net, data, W)
    h = 1e-6
    for _ in range(4):
        V = rng.standard_normal(W.shape)
        up = _kernel_call(loss_kernel, net, data, W + h * V) / data.n
        down = _kernel_call(loss_kernel, net, data, W - h * V) / data.n
        assert abs((up - down) / (2 * h) - np.sum(G.T / data.n * V)) <= 1e-7


@pytest.mark.parametrize("m", [2, 5])
def test_kernels_bit_identical_for_1_and_2_threads(rng, m):
    net, data, W = _problem(rng, "softplus", "huber", m, n=1001, d=33)
    grad_kernel, loss_kernel = step_kernels(m)
    results = []
    for threads in (1, min(2, ALL_THREADS)):
        with numba_threads(threads):
            total, G = _kernel_call(grad_kernel, net, data, W)
            results.append((total, G, _kernel_call(loss_kernel, net, data, W)))
    (t1, G1, f1), (t2, G2, f2) = results
    assert t1 == t2 and f1 == f2
    np.testing.assert_array_equal(G1, G2)


def test_generated_kernels_are_up_to_date():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import codegen
        import gen_descent_small as gen
    finally:
        sys.path.remove(str(ROOT / "tools"))
    committed = (ROOT / "rmt" / "kernels" / "_generated" / "descent_small.py").read_text()
    assert codegen.same_syntax(committed, gen.module_source())


# ---------------------------------------------------------------------------------------------
# the training loop
# ---------------------------------------------------------------------------------------------
def test_gradient_descent_matches_numpy_loop(rng):
    """Curves and iterates against a plain loop over net.loss_and_grad (weight decay, test)."""
    model = rmt.MultiIndexModel("phase_retrieval")
    data = model.sample(120, 10, rng=rng)
    test = rmt.Dataset(rng.standard_normal((90, 10)), rng.standard_normal(90))
    net = rmt.TwoLayerNet(3, "tanh", "huber")
    W0 = rng.standard_normal((10, 3)) / 3
    res = gradient_descent(
        net, data, test=test, W0=W0, lr=0.3, steps=7, weight_decay=0.01, progress=False
    )
    W = W0.copy()
    assert res.steps == 7 and res.loss.size == 8  # seven updates, iterates W^0..W^7
    for t in range(8):
        value, grad = net.loss_and_grad(data, W, weight_decay=0.01)
        assert abs(res.loss[t] - value) <= 1e-12
        assert abs(res.test_loss[t] - net.loss_and_grad(test, W)[0]) <= 1e-12
        assert abs(res.grad_norm[t] - np.linalg.norm(grad)) <= 1e-12
        P = data.theta.T @ W
        assert abs(res.overlap[t] - np.sum(P * P) / np.sum(W * W)) <= 1e-12
        if t < 7:
            W = W - 0.3 * grad
    np.testing.assert_allclose(res.W_final, W, rtol=0, atol=1e-12)
    assert res.steps == 7 and not res.diverged and res.plateau_step is None and res.W1 is None


def test_gradient_descent_without_test_or_theta_has_nan_columns(rng):
    data = rmt.Dataset(rng.standard_normal((50, 6)), rng.standard_normal(50))
    res = gradient_descent(rmt.TwoLayerNet(2), data, steps=3, rng=0, progress=False)
    assert np.isnan(res.test_loss).all() and np.isnan(res.overlap).all()
    assert np.isfinite(res.loss).all() and res.steps == 3


@pytest.mark.filterwarnings("error")
def test_divergence_ends_the_run(rng):
    data = rmt.MultiIndexModel("phase_retrieval").sample(100, 10, rng=rng)
    net = rmt.TwoLayerNet(2, "cubic", "square")
    res = gradient_descent(net, data, lr=50.0, init_scale=1.0, steps=500, rng=0, progress=False)
    assert res.diverged and 1 <= res.steps < 500
    assert res.loss.size == res.steps and np.isfinite(res.loss).all()


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"lr": 0.0}, ValueError, "lr must be finite and > 0"),
        ({"lr": "fast"}, TypeError, "lr must be a real number"),
        ({"steps": 0}, ValueError, "steps must be >= 1"),
        ({"steps": 2.5}, TypeError, "steps must be an integer"),
        ({"weight_decay": -1.0}, ValueError, "weight_decay must be finite and >= 0"),
        ({"stop_after_escape": -1}, ValueError, "stop_after_escape must be >= 0"),
        ({"segment": {"window": 3}}, TypeError, "segment must be an rmt.PlateauRule"),
        ({"W0": np.zeros((3, 2))}, ValueError, "W must have shape"),
    ],
)
def test_gradient_descent_rejects_bad_input(rng, kwargs, error, match):
    data = rmt.MultiIndexModel("phase_retrieval").sample(20, 5, rng=rng)
    with pytest.raises(error, match=match):
        gradient_descent(rmt.TwoLayerNet(2), data, progress=False, **kwargs)


def test_gradient_descent_rejects_bad_types_and_test_dimension(rng):
    data = rmt.MultiIndexModel("phase_retrieval").sample(20, 5, rng=rng)
    other = rmt.MultiIndexModel("phase_retrieval").sample(20, 6, rng=rng)
    net = rmt.TwoLayerNet(2)
    with pytest.raises(ValueError, match="test must have the dimension of data"):
        gradient_descent(net, data, test=other, progress=False)
    with pytest.raises(TypeError, match="net must be an rmt.TwoLayerNet"):
        gradient_descent("net", data, progress=False)
    with pytest.raises(TypeError, match="data must be an rmt.Dataset"):
        gradient_descent(net, data.X, progress=False)
    with pytest.raises(TypeError, match="test must be an rmt.Dataset or None"):
        gradient_descent(net, data, test=other.X, progress=False)
    with pytest.raises(ValueError, match="depth must be in"):
        PlateauRule(depth=0.7)
    with pytest.raises(ValueError, match="minimum_depth must be in"):
        PlateauRule(minimum_depth=0.6)
    assert PlateauRule(depth=0.3).minimum_depth == 0.3


# ---------------------------------------------------------------------------------------------
# the phase rule on closed-form curves
# ---------------------------------------------------------------------------------------------
def _bump_then_regrowth(T=400, t_min=150):
    """``g = (t/10) e^{1 - t/10}`` (peak at t = 10), then ``e^{(t - t_min)/20}`` growth."""
    t = np.arange(T, dtype=float)
    g = (t / 10) * np.exp(1 - t / 10)
    g[t > t_min] = g[t_min] * np.exp((t[t > t_min] - t_min) / 20)
    return _gradient_flow_loss(g), g


def _gradient_flow_loss(g):
    """``L_t = 1 - sum_{s < t} g_s^2``: the loss that gradient flow with step 1 gives."""
    return 1.0 - np.concatenate([[0.0], np.cumsum(g[:-1] ** 2)])


def test_plateau_at_the_local_minimum_after_a_bump():
    """Rule (a) alone (``flat_rtol = 0``): the minimum at 150; with the default rule (b), the
    loss of gradient flow is flat well before (g fell by e^{-5} there), at a step >= 40
    (depth reached) and < 150."""
    loss, g = _bump_then_regrowth()
    ph = segment_phases(loss, g, flat_rtol=0.0)
    assert ph.peak_step == 10 and ph.plateau_step == 150 and ph.rule == "local_min"
    assert ph.detected and ph.escape_step is None
    default = segment_phases(loss, g)
    assert default.rule == "loss_flat" and 40 <= default.plateau_step < 150


def test_plateau_on_a_noisy_curve_within_tolerance():
    loss, g = _bump_then_regrowth()
    noisy = g * (1 + 0.05 * np.random.default_rng(7).standard_normal(g.size))
    ph = segment_phases(loss, np.abs(noisy), flat_rtol=0.0)
    assert abs(ph.peak_step - 10) <= 3 and abs(ph.plateau_step - 150) <= 10


def test_plateau_of_a_monotone_decay_from_step_zero():
    t = np.arange(600, dtype=float)
    g = np.where(t <= 300, np.exp(-t / 30), np.exp(-10 + (t - 300) / 40))
    ph = segment_phases(_gradient_flow_loss(g), g, flat_rtol=0.0)
    assert ph.peak_step == 0 and ph.plateau_step == 300


def test_plateau_of_a_power_law_decay_without_escape():
    """``g = 1/(1+t)``, ``L = (1+t)^{-1/2}``: only rule (b) fires, near ``(w / 2 rtol)^{2/3}``."""
    t = np.arange(5000, dtype=float)
    w, rtol = 50, 0.01
    loss, g = (1 + t) ** -0.5, 1 / (1 + t)
    ph = segment_phases(loss, g, window=w, flat_rtol=rtol)
    assert ph.rule == "loss_flat" and ph.peak_step == 0
    # L_{t-w} - L_t ~ (w/2) t^{-3/2} and L_0 - L_t ~ 1 - t^{-1/2}: the crossing in closed form
    from scipy.optimize import brentq

    exact = brentq(
        lambda s: (1 + s - w) ** -0.5 - (1 + s) ** -0.5 - rtol * (1 - (1 + s) ** -0.5), w, 4000
    )
    assert ph.plateau_step == int(np.ceil(exact))
    # the leading-order value, off by O(w / t) = 20% here
    assert abs(ph.plateau_step - (w / (2 * rtol)) ** (2 / 3)) <= 0.2 * ph.plateau_step


def test_escape_before_depth_falls_back_to_the_argmin():
    """``g = e^{-t/100}`` never gets deep before the overlap crosses at ``c = 100``."""
    t = np.arange(400, dtype=float)
    g = np.where(t < 120, np.exp(-t / 100), np.exp(-1.2 + (t - 120) / 50))
    overlap = np.where(t >= 100, 0.9, 0.01)
    ph = segment_phases(_gradient_flow_loss(g), g, overlap)
    assert ph.rule == "before_escape" and ph.plateau_step == 99 and ph.escape_step == 100
    assert not ph.learned_in_first_phase


def test_escape_step_and_learned_in_first_phase():
    overlap = np.array([0.0, 0.1, 0.6, 0.2, 0.7])
    assert escape_step(overlap, 1, 0.5) == 2
    assert escape_step(overlap, 3, 0.5) == 4
    assert escape_step(overlap, 2, 0.5) is None
    assert escape_step(overlap, None, 0.5) is None
    loss, g = _bump_then_regrowth()
    ph = segment_phases(loss, g, np.full(g.size, 0.8), flat_rtol=0.0)
    assert ph.plateau_step == 150 and ph.learned_in_first_phase and ph.escape_step is None


def test_no_plateau_without_a_peak_drop():
    t = np.arange(100, dtype=float)
    ph = segment_phases(1 - t / 200, 1 + t / 100)
    assert not ph.detected and ph.plateau_step is None and ph.peak_step is None


# ---------------------------------------------------------------------------------------------
# real runs: y = z^2, softplus network, Huber loss (docs/theory.md section 7); under 1 s each
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def one_thread():
    """Small problems run on one Numba thread: on a loaded machine the parallel region's
    barrier costs more than the pass (the results are bit-identical either way)."""
    with numba_threads(1):
        yield


def _phase_retrieval_run(delta, d, steps, stop_after_escape=None):
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    data = model.sample(int(delta * d), d, rng=1)
    X = np.random.default_rng(2).standard_normal((data.n, d))
    test = rmt.Dataset(X, model.labels(X @ data.theta), data.theta)
    res = gradient_descent(
        net,
        data,
        test=test,
        lr=1.0,
        init_scale=1e-2,
        steps=steps,
        stop_after_escape=stop_after_escape,
        rng=3,
        progress=False,
    )
    return net, data, res


def _bottom_eigenpair(net, data, W):
    H = rmt.Hessian(net, data, W).to_dense()
    vals, vecs = np.linalg.eigh(H)
    v = vecs[:, 0].reshape(net.width, data.d)  # neuron-major vec(W)
    return vals[0], float(np.sum((v @ data.theta) ** 2))


def _check_w1(net, data, res):
    """W1 is the iterate at the plateau step (replayed) and the phases follow the pure rule."""
    again = gradient_descent(
        net, data, lr=res.lr, init_scale=1e-2, steps=res.plateau_step, rng=3, progress=False
    )
    np.testing.assert_array_equal(again.W_final, res.W1)
    assert res.phases == segment_phases(res.loss, res.grad_norm, res.overlap)


def test_escape_after_a_plateau_at_large_delta(one_thread):
    net, data, res = _phase_retrieval_run(8, 200, 400, stop_after_escape=10)
    assert res.plateau_step is not None and res.escape_step is not None
    assert res.peak_step < res.plateau_step < res.escape_step
    assert res.overlap[res.plateau_step] < 0.1 and res.overlap[-1] >= 0.5
    assert res.grad_norm[res.plateau_step] <= 0.2 * res.grad_norm[res.peak_step]
    _check_w1(net, data, res)
    lam, overlap = _bottom_eigenpair(net, data, res.W1)
    assert lam < 0 and overlap >= 0.3


def test_no_escape_at_small_delta(one_thread):
    net, data, res = _phase_retrieval_run(2, 200, 600)
    assert res.plateau_step is not None and res.escape_step is None
    assert res.overlap.max() < 0.2
    assert res.test_loss[-1] > res.test_loss[res.plateau_step] > res.test_loss[0]
    assert res.loss[-1] < res.loss[res.plateau_step] < res.loss[0]
    _check_w1(net, data, res)
    lam, overlap = _bottom_eigenpair(net, data, res.W1)
    assert lam >= 0 or overlap < 0.1


def test_long_plateau_near_the_transition(one_thread):
    """At delta = 3 (d = 200) the escape comes hundreds of steps after the plateau; the bottom
    eigenvector at W1 already carries Theta* overlap, less than at delta = 8."""
    net, data, res = _phase_retrieval_run(3, 200, 600, stop_after_escape=5)
    assert res.escape_step - res.plateau_step >= 200
    assert res.overlap[res.plateau_step] < 0.05 and res.overlap[-1] >= 0.5
    lam, overlap = _bottom_eigenpair(net, data, res.W1)
    assert lam < 0 and 0.1 <= overlap < 0.5
