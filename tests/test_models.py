"""Data models: registry targets, noise, sampling and validation."""

import numpy as np
import pytest

import rmt
from rmt.problem.models import random_orthonormal

REFERENCE_LINKS = {
    "phase_retrieval": lambda z: z[:, 0] ** 2,
    "abs": lambda z: np.abs(z[:, 0]),
    "relu": lambda z: np.where(z[:, 0] > 0, z[:, 0], 0.0),
    "linear": lambda z: z[:, 0],
    "z1z2": lambda z: z[:, 0] * z[:, 1],
    "sign_z1z2": lambda z: np.where(z[:, 0] * z[:, 1] >= 0, 1.0, -1.0),
    "norm2": lambda z: (z**2).mean(axis=1),
}


@pytest.mark.parametrize("name", sorted(REFERENCE_LINKS))
def test_sample_labels_follow_link(name, rng):
    model = rmt.MultiIndexModel(name)
    data = model.sample(500, 40, rng=rng)
    z = data.X @ data.theta
    np.testing.assert_allclose(data.y, REFERENCE_LINKS[name](z), rtol=0, atol=1e-12)
    np.testing.assert_allclose(data.theta.T @ data.theta, np.eye(model.k), atol=1e-12)
    assert data.X.shape == (500, 40) and data.delta == pytest.approx(12.5)


def test_registry_has_the_required_targets():
    for name in ["phase_retrieval", "abs", "relu", "z1z2", "sign_z1z2", "norm2"]:
        assert name in rmt.TARGETS


def test_norm2_any_k(rng):
    model = rmt.MultiIndexModel("norm2", k=5)
    data = model.sample(200, 30, rng=rng)
    z = data.X @ data.theta
    np.testing.assert_allclose(data.y, (z**2).sum(1) / 5, atol=1e-12)


def test_noise_has_the_requested_standard_deviation(rng):
    model = rmt.MultiIndexModel("abs", noise=0.5)
    data = model.sample(40000, 5, rng=rng)
    resid = data.y - np.abs(data.X @ data.theta[:, 0])
    # std of the sample std of 40000 normals is 0.5/sqrt(80000) = 0.0018
    assert abs(resid.std() - 0.5) < 0.01
    assert abs(resid.mean()) < 0.01


def test_sampling_is_reproducible_and_seed_dependent():
    model = rmt.MultiIndexModel("z1z2", noise=0.1)
    a, b, c = (model.sample(50, 10, rng=s) for s in (3, 3, 4))
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.allclose(a.X, c.X)


def test_callable_target(rng):
    model = rmt.MultiIndexModel(lambda z, rng: np.cos(z[:, 0]) + z[:, 1], k=2)
    data = model.sample(100, 8, rng=rng)
    z = data.X @ data.theta
    np.testing.assert_allclose(data.y, np.cos(z[:, 0]) + z[:, 1], atol=1e-12)


def test_unknown_target_lists_known_names():
    with pytest.raises(ValueError, match="phase_retrieval"):
        rmt.MultiIndexModel("no_such_target")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target="z1z2", k=3), "k = 2"),
        (dict(target="abs", noise=-1.0), "noise"),
        (dict(target=lambda z, rng: z[:, 0]), "needs k"),
    ],
)
def test_bad_model_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rmt.MultiIndexModel(**kwargs)


def test_sample_rejects_bad_sizes():
    model = rmt.MultiIndexModel("norm2", k=3)
    with pytest.raises(ValueError, match="at least k"):
        model.sample(10, 2)
    with pytest.raises(ValueError, match="n must be"):
        model.sample(0, 5)


def test_dataset_validation(rng):
    X = rng.standard_normal((20, 6))
    theta = random_orthonormal(6, 2, rng)
    with pytest.raises(ValueError, match="one label per row"):
        rmt.Dataset(X, np.zeros(19), theta)
    Xbad = X.copy()
    Xbad[3, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        rmt.Dataset(Xbad, np.zeros(20), theta)
    with pytest.raises(ValueError, match="orthonormal"):
        rmt.Dataset(X, np.zeros(20), 2 * theta)
    with pytest.raises(ValueError, match="shape"):
        rmt.Dataset(X, np.zeros(20), theta[:5])
    # float16 is converted to float64 (float32 is kept: float32 storage, tests/test_float32.py)
    ok = rmt.Dataset(X.astype(np.float16), np.zeros(20, dtype=int), theta)
    assert ok.X.dtype == np.float64 and ok.y.dtype == np.float64 and ok.k == 2


def test_random_orthonormal_is_haar_on_average():
    # E[theta theta^T] = (k/d) I for Haar-random frames
    acc = np.zeros((4, 4))
    rng = np.random.default_rng(0)
    for _ in range(4000):
        t = random_orthonormal(4, 1, rng)
        acc += t @ t.T
    np.testing.assert_allclose(acc / 4000, np.eye(4) / 4, atol=0.02)


def test_sample_with_a_given_theta_draws_a_test_set_of_the_same_model():
    model = rmt.MultiIndexModel("phase_retrieval")
    train = model.sample(500, 20, rng=0)
    test = model.sample(400, 20, rng=1, theta=train.theta)
    np.testing.assert_array_equal(test.theta, train.theta)
    z = test.X @ test.theta
    np.testing.assert_allclose(test.y, z[:, 0] ** 2, rtol=1e-12)
    assert not np.allclose(test.X[:5], train.X[:5])
    with pytest.raises(ValueError, match="orthonormal"):
        model.sample(10, 20, rng=0, theta=2 * train.theta)
