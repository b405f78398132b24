"""The first-layer Hessian: curvature blocks, dense assembly, fused products, finite differences."""

import numpy as np
import pytest

import rmt
from tests.conftest import ALL_THREADS, assert_operator_matches_dense, numba_threads

A2 = np.array([0.9, -0.6])


def _setup(rng, act="tanh", loss="square", m=2, n=150, d=9, wd=0.0, a=None):
    target = "sign_z1z2" if loss == "logistic" else "phase_retrieval"
    data = rmt.MultiIndexModel(target).sample(n, d, rng=rng)
    if a is None:
        a = rng.choice([-1.0, 1.0], size=m) * rng.uniform(0.5, 1.0, size=m)
    net = rmt.TwoLayerNet(m, activation=act, loss=loss, a=a, huber_delta=0.8)
    W = rng.standard_normal((d, m)) / np.sqrt(d)
    return net, data, W, rmt.Hessian(net, data, W, weight_decay=wd)


def _numpy_curvature(net, data, W):
    """D_i from docs/theory.md section 2, written with plain numpy (independent of the kernel)."""
    s, ds, d2s = net.sigma(data.X @ W)
    f = s @ net.a
    _, dl, d2l = net.loss_derivatives(data.y, f)
    g = ds * net.a
    D = d2l[:, None, None] * g[:, :, None] * g[:, None, :]
    D[:, np.arange(net.width), np.arange(net.width)] += dl[:, None] * net.a * d2s
    return D


def _numpy_dense(D, X, wd):
    n, d = X.shape
    m = D.shape[1]
    H = np.einsum("ijk,is,it->jskt", D, X, X).reshape(m * d, m * d) / n
    return H + wd * np.eye(m * d)


@pytest.mark.parametrize("act", rmt.ACTIVATIONS)
@pytest.mark.parametrize("loss", rmt.LOSSES)
def test_dense_and_products_against_numpy(act, loss, rng):
    net, data, W, H = _setup(rng, act, loss, m=3, wd=0.05)
    D = _numpy_curvature(net, data, W)
    np.testing.assert_allclose(H.D, D, rtol=1e-13, atol=1e-15)
    ref = _numpy_dense(D, data.X, 0.05)
    dense = H.to_dense()
    np.testing.assert_allclose(dense, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    np.testing.assert_array_equal(dense, dense.T)
    assert_operator_matches_dense(H, ref, rng, rtol=1e-10)
    assert_operator_matches_dense(H.as_linear_operator(), ref, rng, rtol=1e-10)


@pytest.mark.parametrize("act", rmt.ACTIVATIONS)
@pytest.mark.parametrize("loss", rmt.LOSSES)
def test_hessian_matches_finite_differences_of_gradient(act, loss, rng):
    net, data, W, H = _setup(rng, act, loss, m=2, wd=0.1)
    m, d = 2, data.d
    h = 1e-6
    for _ in range(2):
        v = rng.standard_normal(m * d)
        dW = v.reshape(m, d).T  # neuron-major: v.reshape(m, d)[j] is w_j's direction
        gp = net.loss_and_grad(data, W + h * dW, 0.1)[1]
        gm = net.loss_and_grad(data, W - h * dW, 0.1)[1]
        fd = ((gp - gm) / (2 * h)).T.ravel()
        hv = H.matvec(v)
        np.testing.assert_allclose(hv, fd, rtol=0, atol=2e-7 * np.abs(hv).max())


def test_weight_decay_shifts_spectrum(rng):
    net, data, W, H0 = _setup(rng, m=2)
    H1 = rmt.Hessian(net, data, W, weight_decay=0.7)
    np.testing.assert_allclose(H1.to_dense() - H0.to_dense(), 0.7 * np.eye(H0.shape[0]), atol=1e-14)


def test_origin_is_spectral_estimator(rng):
    """docs/theory.md section 2: at W = 0 the Hessian is (1/n) sum T(y_i) x_i x_i^T (x) D0."""
    net = rmt.TwoLayerNet(2, activation="quadratic", loss="square", a=A2)
    data = rmt.MultiIndexModel("phase_retrieval").sample(100, 6, rng=rng)
    H = rmt.Hessian(net, data, np.zeros((6, 2)))
    # sigma(0)=0, sigma'(0)=0, sigma''=2: D = diag(l'(y,0) a 2) = diag(-y a 2)
    T = -2 * data.y
    S = (data.X * T[:, None]).T @ data.X / 100
    np.testing.assert_allclose(H.to_dense(), np.kron(np.diag(A2), S), atol=1e-13)


def test_block_product_counts_one_pass(rng):
    _, _, _, H = _setup(rng, m=2)
    H.matmat(rng.standard_normal((H.shape[0], 8)))
    H.matvec(rng.standard_normal(H.shape[0]))
    assert (H.n_matvec, H.n_passes) == (9, 2)


def test_larger_product_against_dense(rng):
    """A size with several row chunks and a ragged tail (n not a multiple of 4)."""
    net, data, W, H = _setup(rng, "softplus", "huber", m=4, n=1003, d=60, wd=0.01)
    ref = _numpy_dense(_numpy_curvature(net, data, W), data.X, 0.01)
    assert_operator_matches_dense(H, ref, rng, rtol=1e-10)


def test_bad_inputs(rng):
    net, data, W, H = _setup(rng, m=2)
    with pytest.raises(ValueError, match="W must have shape"):
        rmt.Hessian(net, data, W[:, :1])
    bad = W.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        rmt.Hessian(net, data, bad)
    with pytest.raises(TypeError, match="Dataset"):
        rmt.Hessian(net, (data.X, data.y), W)
    with pytest.raises(TypeError, match="TwoLayerNet"):
        rmt.Hessian("tanh", data, W)
    with pytest.raises(ValueError, match="weight_decay"):
        rmt.Hessian(net, data, W, weight_decay=-1)
    with pytest.raises(ValueError, match="v must have shape"):
        H.matvec(np.ones(H.shape[0] + 1))
    with pytest.raises(ValueError, match="V must have shape"):
        H.matmat(np.ones((3, H.shape[0])))


def test_products_do_not_depend_on_the_thread_count(rng):
    """Fixed row chunks summed in a fixed order: bit-identical results on 1 or 2 threads."""
    net, data, W, H = _setup(rng, "softplus", "huber", m=4, n=2003, d=40)
    V = rng.standard_normal((H.shape[0], 3))
    with numba_threads(1):
        one = H.matmat(V)
    with numba_threads(min(2, ALL_THREADS)):
        two = H.matmat(V)
    np.testing.assert_array_equal(one, two)
