"""The DMFT of full-batch GD (docs/theory.md) against a closed form and against simulations.

Tolerances. The DMFT curves carry Monte Carlo error (``n_samples`` draws of the per-sample
process), measured here by solving twice with two seeds; the mean of ``S`` simulated runs at
dimension ``d`` carries the seed-to-seed spread ``sd / sqrt(S)``, measured on the runs, plus
a finite-size bias.  A curve passes when ``|DMFT - mean| <= 4 sqrt(se_sim^2 + se_mc^2) + bias``
at every step; ``bias`` is a small finite-size allowance: for tanh / linear target the gap of
the mean train loss stayed below 0.004 at d = 250..2000 (within the errors, no bias resolved),
so 0.005 for losses, 0.002 for the gradient norm, 0.02 for Q.  With the memory term of (D1)
removed, the same checks fail by 0.2-0.3 in the train loss.
"""

from __future__ import annotations

import numpy as np
import pytest

import rmt
from rmt.dynamics.dmft import CURVE_SMOOTHING, DMFTResult, dmft_gd, extend_replicas


class _LinearNet:
    """Linear activation and square loss (not a TwoLayerNet activation): the exact case."""

    width = 1
    a = np.ones(1)

    def sigma(self, U):
        return U, np.ones_like(U), np.zeros_like(U)

    def loss_derivatives(self, y, f):
        r = f - y
        return 0.5 * r * r, r, np.ones_like(r)


def _mp_moment(fun, delta, nodes=200_001):
    """``∫ fun dmu_MP`` for ``S = X^T X / n`` (ratio ``1/delta``), atom at 0 included."""
    g = 1.0 / delta
    lo, hi = (1 - np.sqrt(g)) ** 2, (1 + np.sqrt(g)) ** 2
    x = np.linspace(lo, hi, nodes)[1:-1]
    w = np.sqrt((hi - x) * (x - lo)) / (2 * np.pi * g * x) * (x[1] - x[0])
    return float(np.sum(w * fun(x)) + max(0.0, 1.0 - delta) * fun(0.0))


def test_linear_dmft_matches_marchenko_pastur_closed_form():
    """docs/theory.md 8.7: psi = u - y is linear, the limits are Marchenko-Pastur integrals."""
    delta, lr, T, init, N = 2.0, 0.3, 30, 0.5, 4000
    res = dmft_gd(
        rmt.MultiIndexModel("linear"), _LinearNet(), delta, lr, T, init, n_samples=N, rng=0
    )
    assert res.converged
    c = 1 + init**2
    for t in (0, 3, 10, 29):
        p2 = _mp_moment(lambda x: (1 - lr * x) ** (2 * t), delta)
        M = 1 - _mp_moment(lambda x: (1 - lr * x) ** t, delta)
        train = 0.5 * c * _mp_moment(lambda x: (1 - lr * x) ** (2 * t) * x, delta)
        # Monte Carlo: a quadratic form of N Gaussian draws has relative error sqrt(2 / N)
        rel = 4 * np.sqrt(2.0 / N)
        # late in the run the train loss is carried by the slowest modes, far fewer than N: at
        # t = 29 its seed-to-seed error was +2.3, +2.9, -1.5, -8.1% (seeds 0-3), so 4x 5%
        rel_train = rel if t <= 10 else 0.2
        assert abs(res.train_loss[t] - train) <= rel_train * train
        assert abs(res.test_loss[t] - 0.5 * c * p2) <= rel * 0.5 * c * p2
        assert abs(res.M[t, 0, 0] - M) <= rel * max(M, 0.1)
        assert abs(res.Q[t, 0, 0] - (2 * M - 1 + c * p2)) <= rel * (2 * M - 1 + c * p2)


def test_even_target_keeps_M_at_zero_and_matches_the_start():
    """Even target, M(0) = 0: M stays 0 exactly; at t = 0, Q = init^2 and the loss is E l."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    res = dmft_gd(model, net, 3.0, 0.5, 5, 0.1, n_samples=500, rng=0)
    assert isinstance(res, DMFTResult) and res.converged
    assert np.all(res.M == 0.0)
    np.testing.assert_allclose(res.Q[0], 0.01 * np.eye(2), rtol=1e-12)
    assert np.all(np.diff(res.train_loss) < 0)  # a small step on a smooth loss goes down


def test_a_diverging_solve_is_reported_failed():
    model = rmt.MultiIndexModel("linear")
    net = rmt.TwoLayerNet(1, activation="cubic", loss="square")
    with np.errstate(all="ignore"):
        res = dmft_gd(model, net, 2.0, 50.0, 40, 1.0, n_samples=200, rng=0)
    assert not res.converged and "failed at step" in res.message
    assert np.isnan(res.train_loss[-1]) and np.all(np.isfinite(res.train_loss[:1]))
    assert np.isnan(res.M[-1]).all() and np.isnan(res.Q[-1]).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"delta": 0.0}, "delta"),
        ({"lr": -1.0}, "lr"),
        ({"steps": 0}, "steps"),
        ({"n_samples": 1}, "n_samples"),
        ({"M0": np.ones(3)}, "M0"),
    ],
)
def test_bad_input_raises(kwargs, match):
    args = {"delta": 2.0, "lr": 0.5, "steps": 3, "init_scale": 0.1, "n_samples": 10}
    args.update(kwargs)
    model = rmt.MultiIndexModel("linear")
    with pytest.raises(ValueError, match=match):
        dmft_gd(model, rmt.TwoLayerNet(1), **args)


def _simulate(model, net, delta, lr, steps, init, d, seeds, n_test=4000):
    """``rmt.gradient_descent`` runs: curves plus ``|M|`` and ``Q`` at the last iterate."""
    out = {"train": [], "test": [], "grad": [], "M": [], "Q": []}
    for s in seeds:
        data = model.sample(int(round(delta * d)), d, rng=1000 + s)
        test = model.sample(n_test, d, rng=2000 + s, theta=data.theta)
        run = rmt.gradient_descent(
            net,
            data,
            test=test,
            lr=lr,
            steps=steps - 1,
            init_scale=init,
            rng=3000 + s,
            progress=False,
        )
        W = run.W_final
        out["train"].append(run.loss)
        out["test"].append(run.test_loss)
        out["grad"].append(run.grad_norm)
        out["M"].append(np.abs(W.T @ data.theta).ravel())
        out["Q"].append((W.T @ W).ravel())
    return {k: np.array(v) for k, v in out.items()}


def _dmft_curves(res):
    return {
        "train": res.train_loss,
        "test": res.test_loss,
        "grad": res.grad_norm,
        "M": np.abs(res.M[-1]).ravel(),
        "Q": res.Q[-1].ravel(),
    }


def _check_against_simulation(
    model, net, delta, lr, steps, init, d, seeds, N, bias, n_test=50_000, sim_test=4000
):
    kw = {"n_samples": N, "n_test": n_test}
    a = _dmft_curves(dmft_gd(model, net, delta, lr, steps, init, rng=0, **kw))
    b = _dmft_curves(dmft_gd(model, net, delta, lr, steps, init, rng=1, **kw))
    sim = _simulate(model, net, delta, lr, steps, init, d, seeds, sim_test)
    for key, runs in sim.items():
        theory = 0.5 * (a[key] + b[key])
        se_mc = np.abs(a[key] - b[key]) / 2  # the standard error of the mean of two solves
        se_sim = runs.std(axis=0, ddof=1) / np.sqrt(len(seeds))
        tol = 4 * np.sqrt(se_sim**2 + se_mc**2) + bias[key]
        gap = np.abs(runs.mean(axis=0) - theory)
        assert np.all(gap <= tol), (key, float(np.max(gap - tol)), float(np.max(gap)))


@pytest.mark.slow
@pytest.mark.ci
def test_dmft_matches_gradient_descent_tanh_linear_target():
    """m = 1, tanh, square loss, y = z, delta = 2, d = 1000, 4 seeds (about 15 s)."""
    model = rmt.MultiIndexModel("linear")
    net = rmt.TwoLayerNet(1, activation="tanh", loss="square")
    bias = {"train": 0.005, "test": 0.005, "grad": 0.002, "M": 0.01, "Q": 0.02}
    _check_against_simulation(model, net, 2.0, 0.5, 40, 0.1, 1000, range(4), 2000, bias)


@pytest.mark.slow
@pytest.mark.parametrize("delta", [1.5, 4.0])
def test_dmft_matches_gradient_descent_phase_retrieval(delta):
    """Phase retrieval, softplus/Huber, m = 2, either side of delta_GD (README), d = 1000.

    ``M`` is 0 in the limit (even target); at finite ``d`` it is ``O(d^{-1/2})`` and grows
    along the unstable direction: allowed ``3 / sqrt(d)``.
    """
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    d = 1000
    bias = {"train": 0.005, "test": 0.005, "grad": 0.002, "M": 3 / np.sqrt(d), "Q": 0.02}
    _check_against_simulation(model, net, delta, 0.5, 60, 0.01, d, range(4), 2000, bias)


def test_dmft_converges_to_gradient_flow_as_lr_vanishes():
    """docs/theory.md 8.7: GD is a first-order scheme for gradient flow, so at fixed time
    ``tau = lr t`` the DMFT curves differ by ``O(lr)``: halving ``lr`` halves the difference.

    The field's innovations are drawn step by step, so solves of different ``lr`` share no
    Monte Carlo noise: 200 000 draws keep it well below the differences.  Measured ratios
    1.77-2.21 over two seeds (tanh, ``y = z``, ``delta = 2``); at ``lr = 0.4`` the asymptotic
    regime is not reached (ratios 0.2-2.8), so it is not used.
    """
    model = rmt.MultiIndexModel("linear")
    net = rmt.TwoLayerNet(1, activation="tanh", loss="square")
    curves = []
    for lr in (0.2, 0.1, 0.05):
        res = dmft_gd(model, net, 2.0, lr, int(round(4.0 / lr)) + 1, 0.1, n_samples=200_000, rng=0)
        assert res.converged
        idx = [int(round(tau / lr)) for tau in (1.0, 2.0, 4.0)]
        curves.append(
            np.r_[res.train_loss[idx], res.test_loss[idx], res.M[idx, 0, 0], res.Q[idx, 0, 0]]
        )
    coarse, fine = np.abs(curves[0] - curves[1]), np.abs(curves[1] - curves[2])
    assert np.all(fine > 0)
    ratio = coarse / fine
    assert np.all((ratio > 1.6) & (ratio < 2.5)), np.round(ratio, 2)


def _population_gd(model, net, lr, steps, init, n_draws=200_000, seed=7):
    """Gradient descent on the population risk, from ``W^0 ⟂ Theta*`` with ``W^{0T} W^0 =
    init^2 I``: the ``delta -> inf`` reference, computed without the DMFT's kernels.

    With ``W = Theta* M^T + W_perp`` and ``xi = W_perp^T x`` (``N(0, Q_perp)``, independent of
    ``z``), Stein's lemma gives ``E[x psi^T] = Theta* E[z psi^T] + W_perp E[J]`` (``J = d psi /
    d u``, symmetric), so ``M <- M - lr E[psi z^T]`` and ``Q_perp <- A Q_perp A`` with ``A = I
    - lr E[J]``.  Expectations over ``n_draws`` antithetic draws ``(+-z, h)`` (the same ``h``
    for both signs): for an even target ``psi`` is then the same at ``z`` and ``-z`` while
    ``M = 0``, and ``E[psi z^T]`` is exactly 0.
    """
    g = np.random.default_rng(seed)
    m, k = net.width, model.k
    z = g.standard_normal((n_draws // 2, k))
    z = np.r_[z, -z]
    y = model.labels(z, g)
    if model.even:
        y[len(y) // 2 :] = y[: len(y) // 2]  # y(-z) = y(z), label noise included
    h = g.standard_normal((n_draws // 2, m))
    h = np.r_[h, h]
    M, Qp = np.zeros((m, k)), init**2 * np.eye(m)
    loss, Ms, Qs = [], [], []
    for _ in range(steps):
        lam, V = np.linalg.eigh(Qp)
        U = z @ M.T + h @ ((V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T)
        s, ds, d2s = net.sigma(U)
        ell, dl, d2l = net.loss_derivatives(y, s @ net.a)
        v = ds * net.a
        psi = dl[:, None] * v
        EJ = (v * d2l[:, None]).T @ v / len(y) + np.diag(np.mean(dl[:, None] * d2s * net.a, 0))
        loss.append(ell.mean())
        Ms.append(M.copy())
        Qs.append(Qp + M @ M.T)
        A = np.eye(m) - lr * EJ
        M = M - lr * psi.T @ z / len(y)
        Qp = A @ Qp @ A
    return np.array(loss), np.array(Ms), np.array(Qs)


@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize(
    "target, activation, loss, m",
    [("linear", "tanh", "square", 1), ("phase_retrieval", "softplus", "huber", 2)],
)
def test_dmft_tends_to_population_gradient_descent_as_delta_grows(target, activation, loss, m):
    """docs/theory.md 8.7: as ``delta -> inf`` the memory and noise terms (``lr/delta``) vanish
    and the DMFT is gradient descent on the population risk (:func:`_population_gd`).

    At ``delta = 1e4`` the curves agree within 4 standard errors of the difference (from
    three DMFT seeds of 1500 draws each, and three seeds of the reference's 200 000 draws, whose
    own spread reaches 0.002 in ``Q`` and 0.004 in the loss) plus 5e-4 for the DMFT's bias at
    1500 draws (measured: every gap at most 0.27 of its tolerance); at ``delta = 2`` they do
    not (the test has power): there the largest excess over the tolerance was 0.20 (tanh,
    ``Q``) and 1.09 (phase retrieval, ``Q``, where the sample is fitted).
    """
    model = rmt.MultiIndexModel(target)
    net = rmt.TwoLayerNet(m, activation=activation, loss=loss)
    lr, T, init = 0.5, 30, 0.1

    def reference(seed):
        ell, M, Q = _population_gd(model, net, lr, T, init, seed=seed)
        return np.c_[ell, ell, np.abs(M).reshape(T, -1), Q.reshape(T, -1)]

    def curves(delta, seed):
        r = dmft_gd(model, net, delta, lr, T, init, n_samples=1500, rng=seed)
        assert r.converged
        return np.c_[r.train_loss, r.test_loss, np.abs(r.M).reshape(T, -1), r.Q.reshape(T, -1)]

    refs = np.array([reference(seed) for seed in (7, 8, 9)])
    ref, se_ref = refs.mean(axis=0), refs.std(axis=0, ddof=1) / np.sqrt(len(refs))
    runs = np.array([curves(1e4, seed) for seed in range(3)])
    se = runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    tol = 4 * np.sqrt(se**2 + se_ref**2) + 5e-4
    gap = np.abs(runs.mean(axis=0) - ref)
    assert np.all(gap <= tol), float(np.max(gap - tol))
    finite = np.abs(curves(2.0, 0) - ref)
    assert np.max(finite - tol) > 0.05


def test_dmft_law_at_the_start_is_the_population_law():
    """docs/theory.md 8.9: at ``t = 0`` nothing has been learned from the sample (``u^0 = xi^0``,
    no self-term), so the DMFT law is the population law at ``Q = init^2 I``, ``M = 0``
    (``SpikeLaw.from_network``, its own quadrature nodes).  Edges and the left outlier of three
    DMFT samples of 4000 draws agree with it within 4 standard errors plus 0.5% (measured
    spread: 0.4% in the edges, 0.4% in the outlier, 0.01 in its overlap).
    """
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    delta = 4.0
    ref = rmt.SpikeLaw.from_network(model, net, np.eye(2))
    e_ref = rmt.bulk_edges(ref, delta)
    (o_ref,) = rmt.outliers(ref, delta, "left", edges=e_ref)
    got = []
    for seed in range(3):
        res = dmft_gd(model, net, delta, 0.5, 1, 1.0, n_samples=4000, n_test=10, rng=seed)
        law = rmt.dmft_law(res, net, 0)
        e = rmt.bulk_edges(law, delta)
        (o,) = rmt.outliers(law, delta, "left", edges=e)
        got.append([e.lo, e.hi, o.value, o.overlap_theta])
    got = np.array(got)
    want = np.array([e_ref.lo, e_ref.hi, o_ref.value, o_ref.overlap_theta])
    se = got.std(axis=0, ddof=1) / np.sqrt(len(got))
    assert np.all(np.abs(got.mean(axis=0) - want) <= 4 * se + 5e-3 * np.abs(want))


@pytest.mark.slow
def test_dmft_hessian_tends_to_the_population_point_as_delta_grows():
    """docs/theory.md 8.7: as ``delta -> inf`` the plateau ``W1`` tends to a ``u = 0`` point
    (``Q(t1)`` falls like ``1/delta``: 0.21, 0.040, 0.0094, 0.0023 at ``delta`` = 16..1024) and
    the DMFT Hessian tends to that of the population point (``rmt.population_point``, also a
    ``u = 0`` point, with its own quadrature nodes).

    At ``delta = 1024``: the edges, the lowest ``Theta*`` outlier and the second one (along
    ``a = (1, 1)``) of three DMFT seeds (1500 draws, 200 steps) agree with the population
    point's within 4 standard errors plus 5e-4 (the gap between two ``u = 0`` points,
    ``Q = 0.0084`` and ``Q(t1)``, measured 3e-4).  At ``delta = 4`` the lowest outlier is 0.055
    away from it, about 7 times that tolerance: the sample-dependent ``W1`` (the test has
    power).  The ``1500`` draws carry the error: one seed's outlier is -0.0871 at every
    ``delta`` from 64 to 4096 (the same draws), against -0.0895 at the population point.
    """
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    pop = rmt.population_point(model, net)
    law = rmt.SpikeLaw.from_network(model, net, pop.Q, pop.M)

    def numbers(edges, values):
        values = list(values) + [np.nan] * 2  # the second outlier appears at larger delta
        return [edges[0], edges[1], values[0], values[1]]

    def population(delta):
        e = rmt.bulk_edges(law, delta)
        out = rmt.outliers(law, delta, "left", edges=e)
        theta = sorted(
            o.value for o in out if o.overlap_theta >= rmt.dynamics.dmft.THETA_OVERLAP_MIN
        )
        return numbers((e.lo, e.hi), theta)

    def dmft(delta, seed):
        h = rmt.dmft_hessian(
            model, net, delta, steps=400, n_samples=1500, rng=seed, stop_at_plateau=True
        )
        assert h.converged, h.message
        theta = sorted(
            o
            for o, ov in zip(h.outliers, h.overlaps_theta)
            if ov >= rmt.dynamics.dmft.THETA_OVERLAP_MIN
        )
        assert theta[0] == h.theta_outlier
        return numbers((h.edge_lo, h.edge_hi), theta)

    want = np.array(population(1024.0))
    got = np.array([dmft(1024.0, seed) for seed in range(3)])
    se = got.std(axis=0, ddof=1) / np.sqrt(len(got))
    tol = 4 * se + 5e-4
    gap = np.abs(got.mean(axis=0) - want)
    assert np.all(gap <= tol), (gap, tol)
    finite = abs(dmft(4.0, 0)[2] - population(4.0)[2])
    assert finite > 3 * tol[2], (finite, tol[2])


def test_dmft_hessian_without_a_plateau_is_reported_failed():
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    out = rmt.dmft_hessian(model, net, 4.0, steps=20, n_samples=200)
    assert not out.converged and "no plateau detected within 20 steps" in out.message
    assert out.t1 is None and np.isnan(out.edge_lo) and np.isnan(out.theta_outlier)
    assert not out.negative


def test_a_solve_stopped_at_its_plateau_is_the_start_of_the_full_solve():
    """``stop_at_plateau``: the same plateau and Hessian as the full solve followed by
    ``segment_phases``, and curves and kernels equal to the full solve's first steps (the
    equations are causal)."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    full = rmt.dmft_hessian(model, net, 4.0, steps=200, n_samples=300)
    cut = rmt.dmft_hessian(model, net, 4.0, steps=200, n_samples=300, stop_at_plateau=True)
    assert full.converged and cut.converged
    assert cut.t1 == full.t1 and cut.plateau_rule == full.plateau_rule
    T = cut.result.steps
    assert T == cut.t1 + 51 + CURVE_SMOOTHING < 200 and f"stopped after step {T - 1}" in cut.message
    for name in ("train_loss", "test_loss", "grad_norm", "overlap", "Q"):
        np.testing.assert_array_equal(getattr(cut.result, name), getattr(full.result, name)[:T])
    np.testing.assert_array_equal(cut.result.R_psi, full.result.R_psi[:T, :T])
    np.testing.assert_array_equal(cut.result.Q_perp, full.result.Q_perp[: T + 1, : T + 1])
    assert cut.theta_outlier == full.theta_outlier and cut.edge_lo == full.edge_lo
    with pytest.raises(TypeError, match="PlateauRule"):
        dmft_gd(model, net, 4.0, 0.5, 10, stop_at_plateau=True, segment=50)


def test_replicas_continued_to_a_larger_budget_are_the_solve_of_that_budget():
    """:func:`rmt.dynamics.dmft.extend_replicas`: replicas solved through a budget of 40 steps
    and continued to 200 are, bit for bit, the replicas solved with 200 from the start (the
    equations are causal and the innovations are drawn step by step), plateau stop included;
    so are replicas whose first budget ends at the step where the rule confirms the plateau
    (they stop at once); without the plateau rule, a continuation from 20 to 45 steps; and
    replicas stopped at their plateau, continued past it to 260 steps."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")

    def solve(steps, plateau=True, resumable=True):
        return rmt.dmft_replicas(model, net, 4.0, 0.5, steps, replicas=2, n_samples=300,
                                 n_test=200, rng=5, stop_at_plateau=plateau,
                                 resumable=resumable)  # fmt: skip

    def same(a, b):
        assert a.plateau == b.plateau and a.message == b.message
        for x, y in zip(a.results, b.results):
            assert x.steps == y.steps
            for name in ("train_loss", "test_loss", "grad_norm", "M", "Q", "R_psi", "R_w",
                         "Q_perp", "xi", "u"):  # fmt: skip
                np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)

    fresh = solve(200)
    assert fresh.plateau is not None and fresh.extendable
    first = solve(40)
    assert first.plateau is None and first.extendable and first.results[0].steps == 40
    same(extend_replicas(first, 200), fresh)
    at_stop = solve(fresh.results[0].steps)  # the rule confirms at its last step: no stop
    assert at_stop.plateau is None and at_stop.extendable
    same(extend_replicas(at_stop, 200), fresh)
    same(extend_replicas(solve(20, plateau=False), 45), solve(45, plateau=False))
    with pytest.raises(ValueError, match="cannot be continued"):
        extend_replicas(solve(40, resumable=False), 200)
    same(extend_replicas(fresh, 400), fresh)  # the rule stops them again at once
    same(extend_replicas(fresh, 260, stop_at_plateau=False), solve(260, plateau=False))
    with pytest.raises(ValueError, match="more than the 40 steps"):
        extend_replicas(first, 40)


@pytest.mark.slow
@pytest.mark.ci  # 12 s with the reverse-mode solver (66 s before 2026-12-04)
def test_dmft_hessian_at_the_plateau_matches_dense_eigh_at_the_simulated_W1():
    """docs/theory.md 8.9: the Hessian at the DMFT plateau ``t1`` against dense ``eigh`` of the
    Hessian at the simulated ``W1`` (``TrainedPoint``: the same plateau rule), phase retrieval,
    softplus/Huber, m = 2, ``delta = 4``, ``lr = 0.5``, ``init_scale = 0.01``.

    Compared: the Theta* outlier (the bottom eigenvalue) and its squared overlap, the second
    eigenvalue against the left edge, the top eigenvalue against the right edge, and ``t1``.
    Tolerance ``4 sqrt(se_sim^2 + se_mc^2)`` plus a finite-size allowance: 0.004 for the
    eigenvalues (the ``d^{-2/3}`` edge fluctuations: the second eigenvalue moved from -0.0617
    to -0.0601 between d = 500 and 1000), 0.05 for the overlap (``O(d^{-1/2})``), 20 steps for
    ``t1`` (124.5 +- 6.5 at d = 500, 133.3 +- 0.5 at d = 1000, against 139-144 for the DMFT:
    at finite ``d`` the escape starts from ``M = O(d^{-1/2})`` and ends the plateau earlier).
    """
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    delta, d = 4.0, 500
    theory = []
    for seed in (0, 1):
        h = rmt.dmft_hessian(
            model, net, delta, steps=400, n_samples=1000, rng=seed, stop_at_plateau=True
        )
        assert h.converged and h.negative, h.message
        theory.append([h.t1, h.theta_outlier, h.theta_overlap, h.edge_lo, h.edge_hi])
    sim = []
    for t1, ev, overlaps in _spectra_at_simulated_W1(model, net, delta, d, 250):
        sim.append([t1, ev[0], overlaps[0], ev[1], ev[-1]])
    _assert_within_errors(sim, theory, [20.0, 0.004, 0.05, 0.004, 0.004])


def _spectra_at_simulated_W1(model, net, delta, d, steps, seeds=4):
    """``(t1, eigenvalues, squared Theta* overlaps of the eigenvectors)`` of the dense
    Hessian at the simulated ``W1`` (``TrainedPoint``) for ``seeds`` draws at dimension ``d``."""
    out = []
    for s in range(seeds):
        data = model.sample(int(delta * d), d, rng=100 + s)
        W1, run = rmt.TrainedPoint(steps=steps).realize(net, data, rng=200 + s)
        assert run.phases.detected
        ev, vec = np.linalg.eigh(rmt.Hessian(net, data, W1).to_dense())
        cols = vec.T.reshape(-1, net.width, d) @ data.theta[:, 0]
        out.append((run.phases.plateau_step, ev, np.sum(cols**2, axis=1)))
    return out


def _assert_within_errors(sim, theory, allowance):
    """Mean of the simulated rows against the mean of two DMFT seeds, column by column:
    ``|gap| <= 4 sqrt(se_sim^2 + se_mc^2) + allowance`` (``se_mc`` from the two seeds)."""
    sim, theory = np.array(sim, dtype=float), np.array(theory, dtype=float)
    se_sim = sim.std(axis=0, ddof=1) / np.sqrt(len(sim))
    se_mc = np.abs(theory[0] - theory[1]) / 2
    gap = np.abs(sim.mean(axis=0) - theory.mean(axis=0))
    tol = 4 * np.sqrt(se_sim**2 + se_mc**2) + np.asarray(allowance)
    assert np.all(gap <= tol), (np.round(gap, 5), np.round(tol, 5))


@pytest.mark.slow  # 50 s
def test_dmft_hessian_of_three_neurons_matches_dense_eigh_at_the_simulated_W1():
    """As the test above, for m = 3 (phase retrieval, softplus/Huber, ``delta = 4``): the
    two ``Theta*`` outliers come as a near-degenerate pair (-0.0459 and -0.0459 for the DMFT
    draws of seed 0), so the two lowest eigenvalues are compared with them, the summed squared
    overlap of their eigenvectors with that of the pair (allowance 0.1: two ``O(d^{-1/2})``
    overlaps), and the third eigenvalue with the left edge.  Measured (2026-12-04, d = 500,
    4 seeds): outliers -0.0463 and -0.0458 (se 0.0016) against -0.0459/-0.0457 and
    -0.0459/-0.0453; pair overlap 0.94 (se 0.03) against 0.92 and 0.95."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(3, activation="softplus", loss="huber")
    delta, d = 4.0, 500
    theory = []
    for seed in (0, 1):
        h = rmt.dmft_hessian(
            model, net, delta, steps=400, n_samples=1500, rng=seed, stop_at_plateau=True
        )
        assert h.converged and h.negative and h.outliers.size >= 2, h.message
        pair = h.overlaps_theta[:2].sum()
        theory.append([h.t1, h.outliers[0], h.outliers[1], pair, h.edge_lo, h.edge_hi])
    sim = []
    for t1, ev, overlaps in _spectra_at_simulated_W1(model, net, delta, d, 400):
        sim.append([t1, ev[0], ev[1], overlaps[0] + overlaps[1], ev[2], ev[-1]])
    _assert_within_errors(sim, theory, [20.0, 0.004, 0.004, 0.1, 0.004, 0.004])


def test_dmft_law_refuses_bad_steps():
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    res = dmft_gd(model, net, 4.0, 0.5, 3, 0.1, n_samples=50, n_test=10, rng=0)
    with pytest.raises(ValueError, match="t must be in"):
        rmt.dmft_law(res, net, 3)
    with pytest.raises(ValueError, match="history steps must be in"):
        rmt.dmft_law(res, net, 1, history=(1,))
    law = rmt.dmft_law(res, net, 2, history=(0, 1))
    assert law.K == 1 + 3 * 2  # z, then the whitened cavity fields of three steps


def _two_index_target(z, rng):
    """A non-even two-index target: ``tanh(z_1) + z_2 / 2``."""
    return np.tanh(z[:, 0]) + 0.5 * z[:, 1]


@pytest.mark.slow
@pytest.mark.ci
def test_dmft_matches_gradient_descent_two_index_target():
    """k = 2 (docs/theory.md 8.7): ``y = tanh(z_1) + z_2 / 2``, m = 2, tanh, square loss,
    ``delta = 2``, d = 1000, 4 seeds; ``M`` is ``m x k`` and grows from 0 (not even).

    The test losses carry the spread of ``y^2`` (about 0.4): with the default test sets (4000
    per simulated seed, 50 000 DMFT draws) their Monte Carlo errors are not resolved by four
    seeds and two solves, and the test-loss gap (0.004-0.006 at the first steps, at d = 1000
    and 2000, 2-3 standard errors with 10 seeds) came within 5% of the tolerance.  Here the
    simulated test sets have 20 000 samples and the DMFT 400 000 draws.
    """
    model = rmt.MultiIndexModel(_two_index_target, k=2)
    net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    bias = {"train": 0.005, "test": 0.005, "grad": 0.002, "M": 0.01, "Q": 0.02}
    _check_against_simulation(
        model, net, 2.0, 0.5, 40, 0.1, 1000, range(4), 2000, bias, n_test=400_000, sim_test=20_000
    )


def test_a_solve_too_large_for_the_machine_is_refused_before_any_work():
    """``solve_bytes`` against the peak memory that ``tracemalloc`` measures in two solves: it
    bounds the peak within 25%, and both grow linearly in the number of draws (a fourfold
    ``N`` gives at most a 4.2-fold peak: no ``N x N`` matrix)."""
    import tracemalloc

    from rmt.dynamics.dmft import solve_bytes

    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    dmft_gd(model, net, 2.0, 0.5, 3, 0.1, n_samples=32, n_test=10)  # compile outside the count
    peaks = []
    for N in (2000, 8000):
        tracemalloc.start()
        dmft_gd(model, net, 2.0, 0.5, 40, 0.1, n_samples=N, n_test=10)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert 0.75 * solve_bytes(N, 2, 40) <= peak <= 1.25 * solve_bytes(N, 2, 40)
        peaks.append(peak)
    assert peaks[1] <= 4.2 * peaks[0]
    model = rmt.MultiIndexModel("linear")
    with pytest.raises(ValueError, match="needs .* GiB, more than 80%"):
        dmft_gd(model, rmt.TwoLayerNet(4), 2.0, 0.5, 100_000, 0.1, n_samples=4000)


def test_the_cavity_field_has_the_covariance_of_eq_d6():
    """The field ``xi = L g`` of eq. (D7): its empirical covariance over the draws against
    ``Q_perp(t, s)`` of eq. (D6), for pairs of times early, late and far apart, including
    the late steps where ``Q_perp`` is close to singular.  Each entry within 5 standard
    errors (``sqrt((Q_tt Q_ss + Q_ts^2) / N)``, Gaussian fourth moments): 24 entries, a
    false alarm rate below ``1e-5``."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    N = 20_000
    res = dmft_gd(model, net, 2.0, 0.5, 80, 0.3, n_samples=N, n_test=10, rng=4)
    assert res.converged
    for t, s in ((3, 1), (40, 39), (79, 79), (79, 78), (79, 10), (60, 0)):
        emp = res.xi[t].T @ res.xi[s] / N
        Q = res.Q_perp[t, s]
        se = np.sqrt((np.outer(np.diag(res.Q_perp[t, t]), np.diag(res.Q_perp[s, s])) + Q**2) / N)
        assert np.all(np.abs(emp - Q) <= 5 * se), (t, s, emp, Q, se)


def test_relu_is_solved_with_the_smoothed_kink_and_matches_gradient_descent():
    """docs/theory.md 8.11.  ReLU, square loss, ``a = (1, -1)/sqrt(2)``, ``y = tanh(z_1 + z_2^3 -
    3 z_2)``, ``delta = 3``, ``lr = 0.6``, ``init_scale = 1``, after 6 updates.  Reference:
    ``rmt.gradient_descent`` at ``d = 4000`` from orthonormal neurons orthogonal to ``Theta*``
    (3 seeds, measured once: ``Q`` diagonal 0.819 and 0.804 (se 0.002 and 0.003), test loss
    0.3501 (se 0.0017)).  The pointwise Jacobian, which misses the kink, gave 0.58 and 0.58.
    The smoothed solve (two seeds of 100 000 draws) must lie within 4 combined standard errors
    plus an allowance of 0.01 (``Q``) and 0.004 (test loss) for the ``O(h^2)`` smoothing bias
    and ``O(1/d)``; and the solves at ``h`` and ``h / 3`` must agree within 4 Monte Carlo
    standard errors plus the same allowance (the limit ``h -> 0`` is reached)."""

    def g(z, rng):
        return np.tanh(z[:, 0] + z[:, 1] ** 3 - 3 * z[:, 1])

    model = rmt.MultiIndexModel(g, k=2)
    net = rmt.TwoLayerNet(2, activation="relu", loss="square", a=np.array([1.0, -1.0]) / np.sqrt(2))
    gd = np.array([0.819, 0.804, 0.3501])
    gd_se = np.array([0.002, 0.003, 0.0017])
    allow = np.array([0.01, 0.01, 0.004])

    def solve(h):
        out = []
        for seed in (0, 1):
            r = dmft_gd(model, net, 3.0, 0.6, 7, 1.0, n_samples=100_000, rng=seed, relu_smoothing=h)
            out.append(np.r_[np.diag(r.Q[6]), r.test_loss[6]])
        out = np.array(out)
        return out.mean(axis=0), np.abs(out[0] - out[1]) / 2

    mean, se = solve(rmt.dynamics.dmft.RELU_SMOOTHING)
    assert np.all(np.abs(mean - gd) <= 4 * np.sqrt(se**2 + gd_se**2) + allow), (mean, se)
    fine, se_fine = solve(rmt.dynamics.dmft.RELU_SMOOTHING / 3)
    assert np.all(np.abs(mean - fine) <= 4 * np.sqrt(se**2 + se_fine**2) + allow), (fine, se_fine)


def test_an_activation_the_solver_cannot_differentiate_is_refused():
    net = rmt.TwoLayerNet(2, activation="tanh")
    net.activation = "step"  # a registry the solver does not know
    with pytest.raises(ValueError, match="treats the activations .* got 'step'"):
        dmft_gd(rmt.MultiIndexModel("phase_retrieval"), net, 2.0, 0.5, 5)
    with pytest.raises(ValueError, match="relu_smoothing"):
        dmft_gd(
            rmt.MultiIndexModel("phase_retrieval"),
            rmt.TwoLayerNet(2),
            2.0,
            0.5,
            5,
            relu_smoothing=0,
        )


def test_smoothed_relu_descent_tends_to_relu_descent_and_is_what_the_solver_solves():
    """The smoothed network's GD (docs/theory.md 8.11) at ``h -> 0`` is the ReLU network's GD
    on the same data from the same start, its bias at ``h = 0.1`` is small, and bad input is
    refused."""
    from rmt.dynamics.dmft import smoothed_relu_descent

    model = rmt.MultiIndexModel("phase_retrieval")
    data = model.sample(1600, 400, rng=11)
    net = rmt.TwoLayerNet(2, activation="relu", loss="huber")
    run = rmt.gradient_descent(net, data, lr=0.5, steps=20, rng=5, init_scale=1.0, progress=False)
    tiny = smoothed_relu_descent(net, data, run.W0, 0.5, 20, 1e-6)
    trq = np.sum(run.W_final**2)
    assert abs(tiny["trQ"][-1] - trq) < 1e-3 * trq
    assert np.max(np.abs(tiny["train"] - run.loss)) < 1e-4
    assert np.max(np.abs(tiny["grad"] / run.grad_norm - 1)) < 1e-2
    assert tiny["trQ"][0] == pytest.approx(np.sum(run.W0**2))
    smooth = smoothed_relu_descent(net, data, run.W0, 0.5, 20, 0.1)
    assert 0 < abs(smooth["trQ"][-1] / trq - 1) < 0.03
    # its train loss is the exact ReLU's at its iterates: at W0 it is the ReLU network's loss
    assert smooth["train"][0] == pytest.approx(run.loss[0], rel=1e-12)
    assert 0 < np.max(np.abs(smooth["train"] / run.loss - 1)) < 0.03
    with pytest.raises(ValueError, match="relu"):
        smoothed_relu_descent(rmt.TwoLayerNet(2), data, run.W0, 0.5, 20, 0.1)
    with pytest.raises(ValueError, match="shape"):
        smoothed_relu_descent(net, data, run.W0[:10], 0.5, 20, 0.1)
