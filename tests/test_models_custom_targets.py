"""Custom (callable) targets of ``rmt.MultiIndexModel`` through the whole engine.

References: registry targets the callables reimplement, closed forms of ``delta_alg``
(``1/2`` for ``y = z^2``, ``k/2`` for ``|z|^2/k``), adaptive quadrature (scipy ``quad``) for a
clipped target, and dense ``eigh`` of a simulated Hessian for a genuinely new target.
"""

import numpy as np
import pytest
from scipy import integrate

import rmt


def square(z, rng):
    return z[:, 0] ** 2


def cube(z, rng):
    return z[:, 0] ** 3


def norm2(z, rng):
    return np.sum(z**2, axis=1) / z.shape[1]


def noisy_square(z, rng):
    return z[:, 0] ** 2 + 0.3 * rng.standard_normal(z.shape[0])


#: clipped at y = 6, i.e. |z| > c with c^2 = sqrt(13) - 1: an atom of the label
def clipped_quartic(z, rng):
    return np.minimum(z[:, 0] ** 2 + 0.5 * z[:, 0] ** 4, 6.0)


def test_symmetry_and_randomness_are_probed_or_declared():
    even = rmt.MultiIndexModel(square, k=1)
    assert even.even is True and even.deterministic and not even.random_link
    assert rmt.MultiIndexModel(cube, k=1).even is False
    assert rmt.MultiIndexModel(cube, k=1, even=True).even is True  # declared wins
    random = rmt.MultiIndexModel(noisy_square, k=1)
    assert random.even is True and random.random_link and not random.deterministic
    assert rmt.MultiIndexModel("abs").even is True
    with pytest.raises(ValueError, match="even = False"):
        rmt.MultiIndexModel("relu", even=True)
    np.testing.assert_array_equal(even.link(np.ones((3, 1))), np.ones(3))


def test_delta_alg_of_callables_matches_closed_forms():
    """``y = z^2``: 1/2; ``|z|^2 / k`` with k = 2: k/2 = 1 (docs/theory.md section 5)."""
    for g, k, ref in [(square, 1, 0.5), (norm2, 2, 1.0)]:
        res = rmt.delta_alg(rmt.MultiIndexModel(g, k=k))
        err = res.value * res.stderr / res.nu1
        assert 0 < err < 0.01 * ref
        assert abs(res.value - ref) < 4 * err, (res.value, err)
    odd = rmt.delta_alg(rmt.MultiIndexModel(cube, k=1))
    assert odd.value == 0.0 and "E[z | y] != 0" in odd.reason


def test_delta_alg_of_a_clipped_target_matches_quadrature():
    """An atom of ``y`` (the clip) is one bin: ``nu_1 = E[(z^2-1)^2; |z| < c] + P m^2``."""
    c = np.sqrt(np.sqrt(13.0) - 1.0)
    phi = lambda z: np.exp(-z * z / 2) / np.sqrt(2 * np.pi)  # noqa: E731
    inner = 2 * integrate.quad(lambda z: (z * z - 1) ** 2 * phi(z), 0, c, epsabs=1e-13)[0]
    p_out = 2 * integrate.quad(phi, c, np.inf, epsabs=1e-13)[0]
    mean_out = 2 * integrate.quad(lambda z: (z * z - 1) * phi(z), c, np.inf, epsabs=1e-13)[0]
    ref = 1.0 / (inner + mean_out**2 / p_out)
    res = rmt.delta_alg(rmt.MultiIndexModel(clipped_quartic, k=1))
    err = res.value * res.stderr / res.nu1
    assert abs(res.value - ref) < 4 * err, (res.value, ref, err)
    assert abs(ref - 0.5) > 20 * err  # the clip matters: not the unclipped 1/2


def test_random_callable_and_label_noise_give_the_registry_delta_alg():
    """``g = z^2 + 0.3 eps`` drawn inside the callable, or ``noise=0.3`` on a callable ``z^2``,
    against the registry's quadrature of the posterior."""
    ref = rmt.delta_alg(rmt.MultiIndexModel("phase_retrieval", noise=0.3)).value
    for model in [
        rmt.MultiIndexModel(noisy_square, k=1),
        rmt.MultiIndexModel(square, k=1, noise=0.3),
    ]:
        res = rmt.delta_alg(model)
        err = res.value * res.stderr / res.nu1
        assert abs(res.value - ref) < 4 * err, (res.value, ref, err)


@pytest.mark.slow
@pytest.mark.ci
def test_callable_gives_the_registry_point_law_and_threshold():
    """A callable reimplementing phase retrieval: same Gauss-Hermite nodes, so the same
    population point, ``E[D]`` and ``delta_pop`` to rounding; ``delta_alg`` within its error."""
    net = rmt.TwoLayerNet(1, "quadratic", "huber")
    reg, cal = rmt.MultiIndexModel("phase_retrieval"), rmt.MultiIndexModel(square, k=1)
    s_reg, s_cal = rmt.population_point(reg, net), rmt.population_point(cal, net)
    assert s_reg.Q[0, 0] > 0.05  # a nontrivial point
    np.testing.assert_allclose(s_cal.Q, s_reg.Q, rtol=1e-10, atol=1e-12)
    assert s_cal.risk == pytest.approx(s_reg.risk, rel=1e-12)
    l_reg = rmt.SpikeLaw.from_network(reg, net, s_reg.Q, s_reg.M)
    l_cal = rmt.SpikeLaw.from_network(cal, net, s_cal.Q, s_cal.M)
    np.testing.assert_allclose(l_cal.expect(l_cal.D), l_reg.expect(l_reg.D), rtol=1e-10)
    t_reg, t_cal = rmt.population_threshold(reg, net), rmt.population_threshold(cal, net)
    assert np.isfinite(t_reg.delta_pop)
    assert t_cal.delta_pop == pytest.approx(t_reg.delta_pop, rel=1e-8)
    assert t_cal.delta_alg == pytest.approx(t_reg.delta_alg, rel=0.015)


def test_random_callable_population_risk_matches_the_noisy_registry():
    """A random ``g`` is integrated by Monte Carlo (one draw of ``g`` per node); the risk at a
    fixed ``Q`` agrees with the registry's noisy target within the stated ``risk_error``."""
    net = rmt.TwoLayerNet(1, "quadratic", "huber")
    reg = rmt.MultiIndexModel("phase_retrieval", noise=0.3)
    ref = rmt.population_risk(reg, net, np.array([[0.3]]), method="gauss_hermite", order=60)
    spec = rmt.population_point(rmt.MultiIndexModel(noisy_square, k=1), net)
    assert spec.quadrature == "monte_carlo" and 0 < spec.risk_error < 0.01
    value = rmt.population_risk(rmt.MultiIndexModel(noisy_square, k=1), net, np.array([[0.3]]))
    assert abs(value - ref) < 4 * spec.risk_error
    with pytest.raises(ValueError, match="random g"):
        rmt.population_point(rmt.MultiIndexModel(noisy_square, k=1), net, method="gauss_hermite")


def test_random_callable_law_is_monte_carlo_and_matches_the_noisy_registry():
    """``E[D]`` of the law of a random ``g`` (one draw per node) against the registry's noisy
    target on independent Monte Carlo nodes: within 4 combined standard errors; reproducible."""
    net, Q = rmt.TwoLayerNet(1, "quadratic", "huber"), np.array([[0.3]])
    model = rmt.MultiIndexModel(noisy_square, k=1)
    law = rmt.SpikeLaw.from_network(model, net, Q)
    again = rmt.SpikeLaw.from_network(model, net, Q)
    reg = rmt.MultiIndexModel("phase_retrieval", noise=0.3)
    ref = rmt.SpikeLaw.from_network(reg, net, Q, nodes="monte_carlo", rng=7)
    assert law.kind == "monte_carlo" and law.stderr > 0
    np.testing.assert_array_equal(law.D, again.D)
    diff = abs(law.expect(law.D)[0, 0] - ref.expect(ref.D)[0, 0])
    assert diff < 4 * np.hypot(law.stderr, ref.stderr), (diff, law.stderr)
    with pytest.raises(ValueError, match="random g"):
        rmt.SpikeLaw.from_network(model, net, Q, nodes="quadrature")


@pytest.mark.slow
@pytest.mark.ci
def test_new_callable_threshold_against_dense_simulation():
    """``y = min(z^2 + z^4/2, 6)``, softplus/Huber, m = 2, at its population point: the bottom
    outlier, the left edge and the right edge at delta = 3 against dense ``eigh`` (d = 500,
    n = 1500).  Measured over seeds 1-3: outlier -0.1416, -0.1397, -0.1370 against -0.1419
    predicted; second eigenvalue -0.124, -0.120, -0.121 against the edge -0.1276 (edge
    fluctuations at d = 500); top 0.314, 0.325, 0.324 against 0.3176."""
    model = rmt.MultiIndexModel(clipped_quartic, k=1)
    net = rmt.TwoLayerNet(2, "softplus", "huber")
    thr = rmt.population_threshold(model, net)
    assert thr.converged and 0.5 < thr.delta_pop < 3.0
    spec = rmt.population_point(model, net)
    law = rmt.SpikeLaw.from_network(model, net, spec.Q, spec.M)
    delta, d = 3.0, 500
    edges = rmt.bulk_edges(law, delta)
    out = rmt.outliers(law, delta, side="left")
    assert len(out) == 1 and out[0].value < edges.lo
    data = model.sample(int(delta * d), d, rng=1)
    W = spec.draw(d, data.theta, rng=101)
    D = net.curvature(data.X @ W, data.y)
    H = np.block(
        [[data.X.T @ (D[:, i, j, None] * data.X) / data.n for j in range(2)] for i in range(2)]
    )
    vals = np.linalg.eigvalsh(H)
    width = edges.hi - edges.lo
    assert abs(vals[0] - out[0].value) < 0.05 * abs(out[0].value)
    assert abs(vals[1] - edges.lo) < 0.03 * width
    assert abs(vals[-1] - edges.hi) < 0.03 * abs(edges.hi)
