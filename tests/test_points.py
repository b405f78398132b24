"""Points (docs/theory.md section 6): quadrature risk, its minimiser, draw(), and the Point kinds."""

import numpy as np
import pytest
from scipy import integrate, optimize

import rmt
from rmt.thresholds.points import _risk_and_grad, _risk_nodes, population_point, population_risk


def _softplus(u):
    return np.logaddexp(0.0, u)


def test_risk_gradient_matches_finite_differences(rng):
    model = rmt.MultiIndexModel("phase_retrieval", noise=0.5)
    net = rmt.TwoLayerNet(2, "softplus", "huber", a=np.array([0.3, 0.2]))
    nodes = _risk_nodes(model, net, "gauss_hermite", 12, None, None, None)
    M = np.array([[0.4], [-0.2]])
    L = np.tril(rng.standard_normal((2, 2)))
    _, grad = _risk_and_grad(L, M, nodes, net)
    h = 1e-6
    for j, k in [(0, 0), (1, 0), (1, 1)]:
        E = np.zeros((2, 2))
        E[j, k] = h
        fd = (_risk_and_grad(L + E, M, nodes, net)[0] - _risk_and_grad(L - E, M, nodes, net)[0]) / (
            2 * h
        )
        assert abs(fd - grad[j, k]) <= 1e-7 * max(1.0, abs(fd))
    assert grad[0, 1] == 0.0  # only the lower triangle is a parameter


def test_population_risk_matches_monte_carlo_of_drawn_network(rng):
    """Quadrature risk at (Q, M) against the sample loss of a drawn W on many Gaussian samples."""
    model = rmt.MultiIndexModel("phase_retrieval", noise=0.3)
    net = rmt.TwoLayerNet(2, "tanh", "huber", a=np.array([0.7, -0.4]))
    M = np.array([[0.5], [0.1]])
    C = np.array([[0.8, 0.0], [0.3, 0.6]])
    Q = M @ M.T + C @ C.T
    value = population_risk(model, net, Q, M, order=20)
    data = model.sample(400_000, 6, rng=rng)
    spec = rmt.thresholds.points.PointSpec(
        Q=Q,
        M=M,
        risk=np.nan,
        converged=True,
        grad_norm=0.0,
        iterations=0,
        message="",
        risk_error=0.0,
        quadrature="quadrature",
        order=20,
        curvature=np.eye(2),
    )
    W = spec.draw(6, data.theta, rng=rng)
    ell, _, _ = net.loss_derivatives(data.y, net.forward(data.X, W))
    se = ell.std() / np.sqrt(ell.size)
    assert abs(value - ell.mean()) <= 4 * se


def test_tanh_even_target_minimiser_is_zero():
    """Odd activation, even target: E f = 0, risk (E f^2 + E y^2)/2 is smallest at W = 0."""
    model = rmt.MultiIndexModel("phase_retrieval")
    p = population_point(model, rmt.TwoLayerNet(1, "tanh", "square"))
    assert p.converged
    assert abs(p.Q[0, 0]) <= 1e-12
    assert abs(p.risk - 1.5) <= 1e-12  # E[z^4]/2
    a = np.array([1.0, 0.5])
    p2 = population_point(model, rmt.TwoLayerNet(2, "tanh", "square", a=a))
    assert abs(p2.risk - 1.5) <= 1e-8
    assert a @ p2.Q @ a <= 1e-6 and np.abs(p2.Q).max() <= 1e-3
    assert np.linalg.eigvalsh(p2.curvature).min() >= -1e-8  # second-order condition E[D] >= 0


def test_softplus_square_optimum_against_scipy_integrate():
    """m = 1, square loss: R(q) = (a^2 E sp^2 - 2 a E sp E y + E y^2)/2 by 1-D integration."""
    a = 0.3
    model = rmt.MultiIndexModel("phase_retrieval")
    p = population_point(model, rmt.TwoLayerNet(1, "softplus", "square", a=np.array([a])))

    def risk(q):
        dens = lambda g: np.exp(-g * g / 2) / np.sqrt(2 * np.pi)
        m1 = integrate.quad(lambda g: _softplus(np.sqrt(q) * g) * dens(g), -np.inf, np.inf)[0]
        m2 = integrate.quad(lambda g: _softplus(np.sqrt(q) * g) ** 2 * dens(g), -np.inf, np.inf)[0]
        return 0.5 * (a * a * m2 - 2 * a * m1 * 1.0 + 3.0)

    best = optimize.minimize_scalar(
        risk, bounds=(0.01, 20.0), method="bounded", options={"xatol": 1e-8}
    )
    assert p.converged and p.quadrature == "quadrature"
    assert abs(p.Q[0, 0] - best.x) <= 1e-4 * best.x
    assert abs(p.risk - best.fun) <= max(p.risk_error, 1e-9)  # GH error estimate 7e-8
    assert abs(p.curvature[0, 0]) <= 1e-6  # interior optimum: dR/dQ = E[D]/2 = 0


def test_optimum_with_overlap_against_monte_carlo_grid():
    """M != 0 (m = k = 1): grid search of a plain Monte Carlo risk over q >= M^2."""
    a, mu = 0.3, 0.6
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(1, "softplus", "square", a=np.array([a]))
    p = population_point(model, net, M=[[mu]])
    r = np.random.default_rng(7)
    z, g = r.standard_normal(400_000), r.standard_normal(400_000)
    qs = np.linspace(1.0, 5.0, 81)
    mc = [np.mean((a * _softplus(mu * z + np.sqrt(q - mu * mu) * g) - z * z) ** 2) / 2 for q in qs]
    i = int(np.argmin(mc))
    c = np.polyfit(qs[i - 4 : i + 5], mc[i - 4 : i + 5], 2)
    q_mc = -c[1] / (2 * c[0])
    assert p.converged and p.M[0, 0] == mu
    assert abs(p.Q[0, 0] - q_mc) <= 0.05 * q_mc
    assert abs(p.risk - np.min(mc)) <= 0.01 * p.risk


def test_monte_carlo_nodes_report_error_and_agree_with_quadrature():
    model = rmt.MultiIndexModel("phase_retrieval", noise=0.3)
    net = rmt.TwoLayerNet(1, "softplus", "huber", a=np.array([0.3]))
    gh = population_point(model, net)
    mc = population_point(model, net, method="monte_carlo", n_mc=100_000, rng=3)
    assert mc.quadrature == "monte_carlo" and mc.order is None
    assert 0 < mc.risk_error < 0.01
    assert abs(mc.risk - gh.risk) <= 5 * mc.risk_error + gh.risk_error
    again = population_point(model, net, method="monte_carlo", n_mc=100_000, rng=3)
    assert again.risk == mc.risk  # fixed seed: a deterministic objective


def test_auto_switches_to_monte_carlo_in_high_dimension():
    model = rmt.MultiIndexModel("norm2", k=2, noise=0.1)
    net = rmt.TwoLayerNet(3, "tanh", "huber")
    nodes = _risk_nodes(model, net, "auto", None, 20_000, 5_000, 0)
    assert nodes.kind == "monte_carlo" and nodes.z.shape == (5_000, 2)
    nodes = _risk_nodes(model, net, "auto", None, 10**6, 5_000, 0)
    assert nodes.kind == "quadrature" and nodes.order == 10 and nodes.g.shape == (10**6, 3)


def test_unconverged_is_reported():
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, "softplus", "square", a=np.array([0.3, 0.2]))
    p = population_point(model, net, maxiter=1)
    assert not p.converged and p.grad_norm > 1e-7 and p.iterations == 1


@pytest.mark.parametrize("M", [None, [[0.5], [-0.3]]])
def test_draw_is_exact(rng, M):
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, "softplus", "square", a=np.array([0.3, 0.2]))
    p = population_point(model, net, M=M, order=20)
    theta = rmt.problem.models.random_orthonormal(50, 1, rng)
    W = p.draw(50, theta, rng=rng)
    assert W.shape == (50, 2)
    np.testing.assert_allclose(W.T @ theta, p.M, rtol=0, atol=1e-12)
    np.testing.assert_allclose(W.T @ W, p.Q, rtol=0, atol=1e-12 * max(1.0, np.abs(p.Q).max()))
    if M is None:  # W = U Q^{1/2}: all of W is orthogonal to theta
        assert np.abs(theta.T @ W).max() <= 1e-12


def test_bad_input():
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, "tanh", "square")
    with pytest.raises(ValueError, match=r"M must have shape \(m, k\) = \(2, 1\)"):
        population_point(model, net, M=np.zeros((1, 2)))
    with pytest.raises(TypeError, match="MultiIndexModel"):
        population_point("phase_retrieval", net)
    with pytest.raises(ValueError, match="positive semidefinite"):
        population_risk(model, net, np.eye(2) * 0.1, M=[[1.0], [0.0]])
    with pytest.raises(ValueError, match="method"):
        population_point(model, net, method="simpson")
    p = population_point(model, rmt.TwoLayerNet(2, "tanh", "square"), order=10)
    with pytest.raises(ValueError, match=r"theta must have shape \(d, k\) = \(3, 1\)"):
        p.draw(3, np.ones((4, 1)) / 2, rng=0)
    with pytest.raises(ValueError, match="d must be >= k \\+ m = 3"):
        p.draw(2, np.array([[1.0], [0.0]]), rng=0)


def test_point_kinds_give_their_weights_and_laws(rng):
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, "softplus", "huber")
    data = model.sample(80, 20, rng=rng)
    cfg = rmt.RunConfig(d=20, point="population")
    pop = rmt.make_point(cfg, model, net)
    assert isinstance(pop, rmt.PopulationPoint) and not pop.sample_dependent
    W = pop.weights(net, data, np.random.default_rng(5))
    np.testing.assert_allclose(W, pop.spec.draw(20, data.theta, np.random.default_rng(5)))
    Q, M = pop.law_inputs()
    np.testing.assert_allclose(W.T @ W, Q, atol=1e-12)
    np.testing.assert_allclose(W.T @ data.theta, M, atol=1e-12)
    zero = rmt.make_point(rmt.RunConfig(point="zero"), model, net)
    np.testing.assert_array_equal(zero.weights(net, data, None), np.zeros((20, 2)))
    assert [a.shape for a in zero.law_inputs()] == [(2, 2), (2, 1)]
    given = rmt.GivenPoint(W, theta=data.theta)
    np.testing.assert_array_equal(given.weights(net, data, None), W)
    np.testing.assert_allclose(given.law_inputs()[0], W.T @ W)
    assert rmt.GivenPoint(W).law_inputs() is None


def test_trained_point_is_the_plateau_of_gradient_descent(rng):
    data = rmt.MultiIndexModel("phase_retrieval").sample(600, 40, rng=rng)
    net = rmt.TwoLayerNet(2, "softplus", "huber")
    cfg = rmt.RunConfig(d=40, point="trained", train_steps=800, lr=0.5, init_scale=0.01)
    point = rmt.make_point(cfg)
    assert point.sample_dependent and point.law_inputs() is None
    W, run = point.realize(net, data, np.random.default_rng(2))
    assert run.phases.detected
    # an independent numpy loop from the same start reaches W at the plateau step
    Wt = run.W0.copy()
    for _ in range(run.plateau_step):
        Wt = Wt - 0.5 * net.loss_and_grad(data, Wt)[1]
    np.testing.assert_allclose(W, Wt, rtol=1e-9, atol=1e-12)
    # it stopped once the plateau was confirmed, not at the step budget
    assert run.steps < 800


def test_a_new_kind_needs_one_registered_subclass():
    from dataclasses import dataclass

    from rmt.thresholds.points import POINT_KINDS, register_point

    @register_point
    @dataclass(frozen=True)
    class ScaledZero(rmt.Point):
        kind = "scaled_zero"

        @classmethod
        def from_config(cls, config, model, net):
            return cls()

        def weights(self, net, data, rng):
            return np.zeros((data.d, net.width))

    try:
        cfg = rmt.RunConfig(point="scaled_zero", d=30)
        assert isinstance(rmt.make_point(cfg), ScaledZero)
    finally:
        del POINT_KINDS["scaled_zero"]
    with pytest.raises(ValueError, match="known: population, trained, zero"):
        rmt.RunConfig(point="scaled_zero")
    with pytest.raises(TypeError, match="Point subclass"):
        register_point(dict)


def test_bad_points():
    with pytest.raises(TypeError, match="PointSpec"):
        rmt.PopulationPoint("population")
    with pytest.raises(ValueError, match="lr must be > 0"):
        rmt.TrainedPoint(lr=0.0)
    with pytest.raises(ValueError, match="theta must have 5 rows"):
        rmt.GivenPoint(np.zeros((5, 2)), theta=np.zeros((4, 1)))
    with pytest.raises(ValueError, match=r"W must have shape \(d, width\) = \(6, 2\)"):
        data = rmt.MultiIndexModel("phase_retrieval").sample(10, 6, rng=0)
        rmt.GivenPoint(np.zeros((5, 2))).weights(rmt.TwoLayerNet(2), data, None)
