"""Activations, losses and the network: exact values and derivatives against independent references."""

import numpy as np
import pytest
from scipy.special import erf, expit

import rmt

REFERENCE_SIGMA = {
    "tanh": np.tanh,
    "quadratic": lambda u: u**2,
    "cubic": lambda u: u**3,
    "softplus": lambda u: np.logaddexp(0.0, u),
    "erf": erf,
    "relu": lambda u: np.maximum(u, 0.0),
}


def _points(rng, n=200):
    u = rng.uniform(-4, 4, size=(n, 1))
    return u[np.abs(u[:, 0]) > 1e-3]  # away from the relu kink


@pytest.mark.parametrize("act", rmt.ACTIVATIONS)
def test_activation_values_and_derivatives(act, rng):
    net = rmt.TwoLayerNet(1, activation=act)
    u = _points(rng)
    s, ds, d2s = net.sigma(u)
    ref = REFERENCE_SIGMA[act]
    np.testing.assert_allclose(s, ref(u), rtol=1e-13, atol=1e-14)
    h = 1e-5
    fd1 = (ref(u + h) - ref(u - h)) / (2 * h)
    fd2 = (net.sigma(u + h)[1] - net.sigma(u - h)[1]) / (2 * h)
    np.testing.assert_allclose(ds, fd1, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(d2s, fd2, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("act", rmt.ACTIVATIONS)
def test_parallel_and_serial_activation_kernels_agree(act, rng, monkeypatch):
    """Below ``SERIAL_MAX_ENTRIES`` entries ``activation_values`` runs on one thread (small
    batches of the kink searches); both kernels match the reference and each other bit for bit."""
    from rmt.kernels import elementwise as ew

    net = rmt.TwoLayerNet(1, activation=act)
    u = _points(rng)
    serial = net.sigma(u)
    monkeypatch.setattr(ew, "SERIAL_MAX_ENTRIES", 0)
    parallel = net.sigma(u)
    np.testing.assert_allclose(parallel[0], REFERENCE_SIGMA[act](u), rtol=1e-13, atol=1e-14)
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)


def test_softplus_is_stable_for_large_inputs():
    net = rmt.TwoLayerNet(1, activation="softplus")
    s, ds, d2s = net.sigma(np.array([[800.0], [-800.0]]))
    np.testing.assert_allclose(s[:, 0], [800.0, 0.0])
    np.testing.assert_allclose(ds[:, 0], [1.0, 0.0])
    assert np.all(np.isfinite(d2s))


def _loss_reference(name, y, f, c=1.0):
    if name == "square":
        return 0.5 * (f - y) ** 2
    if name == "logistic":
        return np.logaddexp(0.0, -y * f)
    r = np.abs(f - y)
    return np.where(r <= c, 0.5 * r**2, c * (r - 0.5 * c))


@pytest.mark.parametrize("name", rmt.LOSSES)
def test_loss_values_and_derivatives(name, rng):
    net = rmt.TwoLayerNet(1, loss=name, huber_delta=0.7)
    y = rng.choice([-1.0, 1.0], size=300) if name == "logistic" else rng.normal(size=300)
    f = rng.normal(scale=2.0, size=300)
    keep = np.abs(np.abs(f - y) - 0.7) > 1e-3  # away from the huber kink
    y, f = y[keep], f[keep]
    ell, dl, d2l = net.loss_derivatives(y, f)
    np.testing.assert_allclose(ell, _loss_reference(name, y, f, 0.7), rtol=1e-13, atol=1e-15)
    h = 1e-5
    fd1 = (_loss_reference(name, y, f + h, 0.7) - _loss_reference(name, y, f - h, 0.7)) / (2 * h)
    fd2 = (net.loss_derivatives(y, f + h)[1] - net.loss_derivatives(y, f - h)[1]) / (2 * h)
    np.testing.assert_allclose(dl, fd1, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(d2l, fd2, rtol=1e-6, atol=1e-7)


def test_logistic_derivatives_closed_form(rng):
    net = rmt.TwoLayerNet(1, loss="logistic")
    y = rng.choice([-1.0, 1.0], size=50)
    f = rng.normal(size=50)
    _, dl, d2l = net.loss_derivatives(y, f)
    np.testing.assert_allclose(dl, -y * expit(-y * f), rtol=1e-13)
    np.testing.assert_allclose(d2l, expit(y * f) * expit(-y * f), rtol=1e-12)


def _data(rng, loss, n=120, d=7):
    target = "sign_z1z2" if loss == "logistic" else "phase_retrieval"
    return rmt.MultiIndexModel(target).sample(n, d, rng=rng)


@pytest.mark.parametrize("act", rmt.ACTIVATIONS)
@pytest.mark.parametrize("loss", rmt.LOSSES)
def test_loss_and_grad_against_finite_differences(act, loss, rng):
    data = _data(rng, loss)
    net = rmt.TwoLayerNet(3, activation=act, loss=loss, a=np.array([1.0, -0.5, 0.8]))
    W = rng.standard_normal((data.d, 3)) / np.sqrt(data.d)
    value, grad = net.loss_and_grad(data, W, weight_decay=0.3)
    f = REFERENCE_SIGMA[act](data.X @ W) @ net.a
    ref_value = _loss_reference(loss, data.y, f).mean() + 0.15 * np.sum(W**2)
    assert value == pytest.approx(ref_value, rel=1e-12)
    h = 1e-6
    E = rng.standard_normal(W.shape)
    fd = net.loss_and_grad(data, W + h * E, 0.3)[0] - net.loss_and_grad(data, W - h * E, 0.3)[0]
    assert fd / (2 * h) == pytest.approx(np.sum(grad * E), rel=1e-6, abs=1e-9)


def test_forward_matches_numpy(rng):
    net = rmt.TwoLayerNet(4, activation="erf")
    X = rng.standard_normal((30, 6))
    W = rng.standard_normal((6, 4))
    np.testing.assert_allclose(net.forward(X, W), erf(X @ W).mean(axis=1), rtol=1e-13)


def test_default_second_layer_is_uniform():
    np.testing.assert_array_equal(rmt.TwoLayerNet(5).a, np.full(5, 0.2))


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(width=0), ValueError, "width must be >= 1"),
        (dict(width=2.5), TypeError, "width must be an integer"),
        (dict(width=2, activation="sigmoidish"), ValueError, "known: cubic, erf"),
        (dict(width=2, loss="hinge"), ValueError, "known: huber, logistic, square"),
        (dict(width=2, a=[1.0]), ValueError, "length width"),
        (dict(width=2, loss="huber", huber_delta=0.0), ValueError, "huber_delta"),
    ],
)
def test_bad_network_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        rmt.TwoLayerNet(**kwargs)


def test_bad_weights_and_labels(rng):
    data = _data(rng, "square")
    net = rmt.TwoLayerNet(2)
    with pytest.raises(ValueError, match=r"W must have shape \(d, width\)"):
        net.loss_and_grad(data, np.zeros((data.d + 1, 2)))
    W = np.zeros((data.d, 2))
    W[0, 0] = np.inf
    with pytest.raises(ValueError, match="finite"):
        net.loss_and_grad(data, W)
    with pytest.raises(ValueError, match="labels in"):
        rmt.TwoLayerNet(2, loss="logistic").loss_and_grad(data, np.zeros((data.d, 2)))
