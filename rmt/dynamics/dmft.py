"""Discrete-time dynamical mean-field theory of full-batch GD (docs/theory.md section 8).

:func:`dmft_gd` solves the effective process of :func:`rmt.gradient_descent`,

    W^{t+1} = (1 - lr lam) W^t - lr (1/n) X^T Psi^t,    Psi^t_i = psi(u_i^t, y_i),
    psi(u, y) = l'(y, a^T sigma(u)) a * sigma'(u),      u_i^t = W^{tT} x_i,

in the proportional limit ``n, d -> inf`` at ``n / d = delta``, from ``W^0`` with i.i.d.
``N(0, init_scale^2 / d)`` entries.  The equations (docs/theory.md, eqs. (D1)-(D7)) are causal
in time: every kernel at time ``t`` needs only kernels at earlier times.  They are solved in
one forward sweep over the time grid, which is the exact fixed point of the kernel map for the
Monte Carlo sample (no damping is needed; see docs/theory.md section 8.5):

- n-side: ``N = n_samples`` seeded draws of ``(z, y)`` and of the Gaussian process ``xi``
  (covariance ``Q_perp``, sampled as ``xi = L g`` with ``L`` a causal factor of ``Q_perp``
  built one time at a time and ``g`` i.i.d. standard innovations, eq. (D7)), the memory term
  ``-(lr/delta) sum_s R_w(t,s) psi^s``, and the per-sample linear response ``d psi^t/d eta^s``
  propagated exactly through the linearised update (Jacobian ``J = d psi / d u``, the
  curvature block ``D_i`` of docs/theory.md section 2.1);
- d-side: linear and Gaussian, so ``M(t)``, ``Phi(t)``, ``R_w(t, s)`` and ``Q_perp(t, s)``
  are deterministic recursions (no sampling).

Cost: ``O(N m^3 T^3 / 6)`` multiply-adds for the responses, by reverse mode in
``rmt.kernels.dmft``, and memory linear in the number of draws, ``O(N m^2 T + T^2 m^2)``
(:func:`solve_bytes`).
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dtrmm
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from rmt.dynamics.descent import PhaseSegmenter, PlateauRule, segment_phases
from rmt.freeprob.law import SpikeLaw
from rmt.freeprob.mp import ConvergenceError, EdgeNotDetermined, MPSystem
from rmt.freeprob.outliers import RealBranch, edge_and_branch
from rmt.freeprob.plugin import plugin_prediction
from rmt.freeprob.spectrum import bulk_edges
from rmt.kernels.dispatch import forward_kernel, response_kernel
from rmt.kernels.dmft import PAD, draw_major, semidefinite_cholesky
from rmt.kernels.threads import adaptive_threads
from rmt.problem.models import MultiIndexModel
from rmt.problem.network import TwoLayerNet
from rmt.progress import progress_enabled
from rmt.validation import check_nonneg_float, check_positive_float, check_positive_int

#: the default ``relu_smoothing`` ``h``: at each step the ReLU of the per-sample process is
#: ``w softplus(u / w)`` with ``w = h sd(u)`` per neuron (docs/theory.md 8.11)
RELU_SMOOTHING = 0.1

#: the registry activations whose ``psi`` is Lipschitz, so that the pathwise responses are
#: exact; ``relu`` (a jump of ``sigma'``) is smoothed, anything else is refused
SMOOTH_ACTIVATIONS = ("tanh", "quadratic", "cubic", "softplus", "erf")


@dataclass(frozen=True, kw_only=True)
class DMFTResult:
    """Result of :func:`dmft_gd` (curves at the iterate *before* update ``t``, as in ``GDRun``).

    ``train_loss[t]`` (with weight decay), ``test_loss[t]`` (population loss, without it),
    ``grad_norm[t]`` (Frobenius), ``M[t] = W^{tT} Theta*`` (``m x k``), ``Q[t] = W^{tT} W^t``
    (``m x m``), ``overlap[t] = ||M||_F^2 / tr Q``, for ``t = 0..steps-1``.  Two-time kernels
    (``steps+1`` times for the d-side, ``steps`` for the n-side): ``Q_perp[t, s]``,
    ``R_w[t, s]``, ``C_psi[t, s]``, ``R_psi[t, s]`` (each ``m x m``).  ``converged`` is False
    when the solve failed (``message`` says where and why); the curves are then NaN from that
    step on, never an unconverged number.
    """

    train_loss: np.ndarray
    test_loss: np.ndarray
    grad_norm: np.ndarray
    M: np.ndarray
    Q: np.ndarray
    overlap: np.ndarray
    Q_perp: np.ndarray
    R_w: np.ndarray
    C_psi: np.ndarray
    R_psi: np.ndarray
    converged: bool
    message: str
    n_samples: int
    delta: float
    lr: float
    steps: int
    #: the Monte Carlo sample of the per-sample process: ``z`` (``N x k``), ``y`` (``N``), and
    #: for every step ``t`` the cavity field ``xi[t]`` (the Gaussian process of (D1), covariance
    #: ``Q_perp[t, t]``) and the pre-activations ``u[t] = M(t) z + xi[t] + self-term``
    #: (``steps x N x m``, NaN from a failed step on)
    z: np.ndarray = None
    y: np.ndarray = None
    xi: np.ndarray = None
    u: np.ndarray = None
    #: with ``theta_row``: the covariance ``E[v(t) v(t)^T]`` (``(steps + 1) x m x m``) of the
    #: ``Theta*`` row ``v(t) = sqrt(d) M(t)`` of a finite-``d`` run while it is small
    #: (docs/theory.md 7.8), and the responses and correlations weighted by ``z^2`` that
    #: drive it, ``R_z[t, s] = E[z^2 d psi^t / d eta^s]``, ``C_z[t, s] = E[z^2 psi^t psi^sT]``
    seed_cov: np.ndarray = None
    R_z: np.ndarray = None
    C_z: np.ndarray = None


@adaptive_threads
def dmft_gd(
    model,
    net,
    delta,
    lr,
    steps,
    init_scale=1e-2,
    *,
    weight_decay=0.0,
    n_samples=4000,
    n_test=50_000,
    M0=None,
    rng=0,
    progress=False,
    stop_at_plateau=False,
    segment=None,
    relu_smoothing=RELU_SMOOTHING,
    theta_row=False,
) -> DMFTResult:
    """Solve the DMFT of full-batch GD on ``steps`` steps (docs/theory.md section 8.6).

    The equations are eqs. (D1)-(D7) of docs/theory.md section 8.  The curves hold the
    iterates ``t = 0..steps-1``, so the solve is that of ``steps - 1`` updates:
    :func:`rmt.gradient_descent` with ``steps - 1`` (whose ``steps`` counts updates) has
    curves of the same length, step for step.

    Parameters
    ----------
    model : rmt.MultiIndexModel
        The data model.
    net : rmt.TwoLayerNet
        The network (or any object with ``width``, ``a``, ``sigma(U)`` and
        ``loss_derivatives(y, f)``); its activation must be one of
        :data:`SMOOTH_ACTIVATIONS` or ``relu``.
    delta : float
        The sample ratio ``n / d``.
    lr, init_scale, weight_decay : float
        As in :func:`rmt.gradient_descent`.
    steps : int
        The iterates of the curves (a maximum with ``stop_at_plateau``).
    n_samples : int
        Monte Carlo draws ``N`` of the per-sample process (at least 2).  A step costs
        ``O(N m^3 t^2)``: the late steps are the slow ones.
    n_test : int
        Draws of ``(z, y, g)`` for the test loss.
    M0 : array_like (m, k), optional
        The starting overlap ``W^{0T} Theta*`` (default 0, its ``d -> inf`` limit).
    rng : int or numpy.random.Generator
        Seed of every draw, through ``numpy.random.default_rng(rng)`` (a fixed seed by
        default: the same curves on every call).
    progress : bool or None
        A tqdm bar over the steps (:func:`rmt.progress.progress_enabled`).
    stop_at_plateau : bool
        Stop once the plateau rule (``segment``; online, as in :func:`rmt.gradient_descent`,
        on the curves smoothed as in :func:`plateau_of_curves`) confirms a plateau
        ``window + CURVE_SMOOTHING`` steps after it; the result holds the steps done.  The
        equations are causal, so those steps are exactly those of the full solve.
    segment : rmt.PlateauRule, optional
        The plateau rule (default ``PlateauRule()``).
    relu_smoothing : float
        ``h``: a ReLU network is solved with the activation ``w softplus(u / w)``,
        ``w = h sd(u)`` at each step (docs/theory.md section 8.11: bias ``O(h^2)``, Monte
        Carlo variance ``O(1 / (N h))``); other activations ignore it.
    theta_row : bool
        Also solve the ``Theta*`` row of a finite-``d`` run (docs/theory.md 7.8):
        ``DMFTResult.seed_cov``.  It needs an even target with ``k = 1`` and ``M0 = 0``, and
        doubles the cost of the responses.

    Returns
    -------
    DMFTResult
        ``converged`` is False, with the reason in ``message``, when a step fails; the
        curves are then NaN from that step on.

    Raises
    ------
    TypeError, ValueError
        For bad input (an activation the solver cannot differentiate, say), or a solve
        that needs more than 80% of the machine's memory (:func:`solve_bytes`), before any
        work.

    Examples
    --------
    A linear target ``y = z`` learnt by two tanh neurons (``a = (1/2, 1/2)``) with the
    square loss, from ``W^0 = 0``.  There ``u^0 = 0`` and ``psi^0 = -a y``, so the first
    update gives ``M(1) = lr a E[y z] = (1/4, 1/4)`` and the first loss is
    ``E[y^2] / 2 = 1/2`` (up to the Monte Carlo error of the draws); the whole train-loss
    curve follows gradient descent on a sample with ``d = 400``:

    >>> import numpy as np
    >>> import rmt
    >>> model = rmt.MultiIndexModel("linear")
    >>> net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    >>> res = rmt.dmft_gd(model, net, 2.0, 0.5, 20, init_scale=0.0, n_samples=2000, rng=0)
    >>> res.converged, res.train_loss.shape, res.M.shape
    (True, (20,), (20, 2, 1))
    >>> bool(np.all(abs(res.M[1] - 0.25) < 0.03)), bool(abs(res.train_loss[0] - 0.5) < 0.05)
    (True, True)
    >>> run = rmt.gradient_descent(net, model.sample(800, 400, rng=1), steps=19, lr=0.5,
    ...                            init_scale=0.0)
    >>> bool(np.max(np.abs(run.loss - res.train_loss)) < 0.02)
    True
    """
    prob = _Problem.make(
        model, net, delta, lr, steps, init_scale, weight_decay, n_samples, M0, relu_smoothing
    )
    prob = _with_theta_row(prob, theta_row)
    n_test = check_positive_int(n_test, "n_test")
    _check_memory(prob)
    draws = _draws(prob, n_test, np.random.default_rng(rng))
    rule = _plateau_rule(segment) if stop_at_plateau else None
    return _solve(prob, draws, progress, rule)


#: the curves of a solve that :class:`DMFTReplicas` averages
CURVES = ("train_loss", "test_loss", "grad_norm", "overlap", "M", "Q")


@dataclass(frozen=True)
class DMFTReplicas:
    """Independent replicas of one DMFT solve, solved in lockstep (:func:`dmft_replicas`).

    Attributes
    ----------
    results : tuple of DMFTResult
        One solve per replica, each with its own draws; all of the same length.
    plateau : int or None
        With ``stop_at_plateau``, the plateau of the mean curves at which every replica
        stopped ``window + CURVE_SMOOTHING`` steps later; else None.
    """

    results: tuple
    plateau: int | None = None
    # what extend_replicas needs: (problem, draws, states, rule) of a converged solve; kept
    # only when asked for (resumable=True), since it holds the states
    _resume: tuple | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def converged(self) -> bool:
        """Whether every replica converged."""
        return all(r.converged for r in self.results)

    @property
    def extendable(self) -> bool:
        """Whether :func:`extend_replicas` can continue these replicas: solved with
        ``resumable=True`` and converged (through their whole step budget, or stopped at a
        plateau)."""
        return self._resume is not None

    @property
    def message(self) -> str:
        """The message of the first replica's solve (the replicas stop together)."""
        return self.results[0].message

    def mean(self, name: str) -> np.ndarray:
        """The mean over the replicas of the curve ``name``.

        Parameters
        ----------
        name : str
            One of :data:`CURVES`.

        Returns
        -------
        numpy.ndarray
            The mean curve, of the shape of one replica's.

        Raises
        ------
        ValueError
            For another ``name``.
        """
        return np.mean(self._stack(name), axis=0)

    def stderr(self, name: str) -> np.ndarray:
        """The standard error of :meth:`mean`: the replicas' standard deviation over the
        square root of their number (independent draws).

        Parameters
        ----------
        name : str
            One of :data:`CURVES`.

        Returns
        -------
        numpy.ndarray
            Of the shape of :meth:`mean`.

        Raises
        ------
        ValueError
            For another ``name``.
        """
        stack = self._stack(name)
        return np.std(stack, axis=0, ddof=1) / np.sqrt(stack.shape[0])

    def _stack(self, name):
        if name not in CURVES:
            raise ValueError(f"name must be one of {CURVES}; got {name!r}")
        return np.stack([getattr(r, name) for r in self.results])


@adaptive_threads
def dmft_replicas(
    model,
    net,
    delta,
    lr,
    steps,
    init_scale=1e-2,
    *,
    replicas=4,
    weight_decay=0.0,
    n_samples=2500,
    n_test=50_000,
    rng=0,
    progress=False,
    stop_at_plateau=False,
    segment=None,
    relu_smoothing=RELU_SMOOTHING,
    first_replica=0,
    theta_row=False,
    resumable=False,
) -> DMFTReplicas:
    """Independent replicas of :func:`dmft_gd`, for the Monte Carlo error of every curve.

    docs/theory.md section 8.10: the replicas differ only in their draws, so their spread is
    the Monte Carlo error of a solve.

    Parameters
    ----------
    model, net, delta, lr, steps, init_scale, weight_decay, n_test, progress, theta_row
        As in :func:`dmft_gd`.
    replicas : int
        The number of independent solves (at least 2).
    n_samples : int
        The draws of each replica.
    rng : int
        Seed: replica ``r`` draws from the ``r``-th child of ``numpy.random.SeedSequence(rng)``.
    first_replica : int
        The index of the first replica: replicas ``first_replica .. first_replica + replicas
        - 1`` are solved, so that a second call extends a first one with new draws.
    stop_at_plateau : bool
        Stop every replica ``window + CURVE_SMOOTHING`` steps after the plateau of the *mean*
        curves (:func:`plateau_of_curves`; ``segment``, an :class:`rmt.PlateauRule`), so that
        all share one ``t1``.
    resumable : bool
        Keep the solver's state, so that replicas that use their whole step budget can be
        continued by :func:`extend_replicas` (it holds the responses and Jacobians of every
        step: about twice the memory of the results).

    Returns
    -------
    DMFTReplicas

    Raises
    ------
    TypeError, ValueError
        For bad input, before any work.

    Examples
    --------
    The problem of :func:`dmft_gd`: each replica's first update is ``M(1) = lr a E[y z]``
    over its own draws, and the mean over the replicas lies within a few standard errors of
    its limit ``1/4``:

    >>> import rmt
    >>> model = rmt.MultiIndexModel("linear")
    >>> net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    >>> reps = rmt.dmft_replicas(model, net, 2.0, 0.5, 10, init_scale=0.0, replicas=3,
    ...                          n_samples=1000, n_test=2000, rng=0)
    >>> reps.converged, len(reps.results), reps.mean("train_loss").shape
    (True, 3, (10,))
    >>> M1, se = reps.mean("M")[1, 0, 0], reps.stderr("M")[1, 0, 0]
    >>> bool(0 < se < 0.05), bool(abs(M1 - 0.25) < 4 * se)
    (True, True)
    """
    prob = _Problem.make(
        model, net, delta, lr, steps, init_scale, weight_decay, n_samples, None, relu_smoothing
    )
    prob = _with_theta_row(prob, theta_row)
    n_test = check_positive_int(n_test, "n_test")
    replicas = check_positive_int(replicas, "replicas", minimum=2)
    check_seed(rng)
    _check_memory(prob, replicas)
    first = check_positive_int(first_replica, "first_replica", minimum=0)
    # the children of SeedSequence(rng), as its spawn() makes them
    seeds = [np.random.SeedSequence(int(rng), spawn_key=(first + r,)) for r in range(replicas)]
    draws = [_draws(prob, n_test, np.random.default_rng(sq)) for sq in seeds]
    rule = _plateau_rule(segment) if stop_at_plateau else None
    return _replicas(prob, draws, progress, rule, resumable)


def _replicas(prob, draws, progress, rule, resumable, states=None, start=0) -> DMFTReplicas:
    results, plateau, prob, states = _solve_replicas(prob, draws, progress, rule, states, start)
    ok = all(r.converged for r in results)
    resume = (prob, draws, states, rule) if resumable and ok else None
    return DMFTReplicas(tuple(results), plateau, resume)


def extend_replicas(reps, steps, progress=False, stop_at_plateau=True) -> DMFTReplicas:
    """Continue replicas to a budget of ``steps`` steps.

    The solve is causal and draws the innovations of its field step by step (docs/theory.md
    eq. (D7)), so the result is that of :func:`dmft_replicas` called with ``steps`` from the
    start, to rounding, without solving the first steps again (they cost ``(T_0 / T)^3`` of
    the whole).  Replicas solved with ``stop_at_plateau`` keep their rule: it reads the mean
    curves from step 0, and stops the replicas at once when it confirms a plateau at the last
    step solved (so replicas stopped at a plateau are continued only with
    ``stop_at_plateau=False``).

    Parameters
    ----------
    reps : DMFTReplicas
        Replicas with :attr:`DMFTReplicas.extendable` (solved with ``resumable=True``).
    steps : int
        The new step budget, more than the steps solved.
    progress : bool
        A tqdm bar over the new steps.
    stop_at_plateau : bool
        False: solve the whole new budget, past any plateau (a first phase read further
        along, docs/theory.md 8.10).

    Returns
    -------
    DMFTReplicas
        Extendable again.

    Raises
    ------
    TypeError
        For ``reps`` of another type.
    ValueError
        For replicas that cannot be continued, or ``steps`` not more than those solved.
    """
    if not isinstance(reps, DMFTReplicas):
        raise TypeError(f"reps must be an rmt.DMFTReplicas; got {type(reps).__name__}")
    if not reps.extendable:
        raise ValueError(
            "these replicas cannot be continued: only replicas solved with resumable=True that "
            "converged through their whole step budget keep what that needs"
        )
    prob, draws, states, rule = reps._resume
    steps = check_positive_int(steps, "steps")
    if steps <= prob.T:
        raise ValueError(f"steps must be more than the {prob.T} steps solved; got {steps}")
    big = dataclasses.replace(prob, T=steps)
    _check_memory(big, len(states))
    grown = [_grown(prob, st, steps) for st in states]
    rule = rule if stop_at_plateau else None
    return _replicas(big, draws, progress, rule, True, grown, prob.T)


def check_seed(rng) -> None:
    """Check that ``rng`` is a non-negative int: the replicas' draws are children of
    ``numpy.random.SeedSequence(rng)``, the same at every call with that seed.

    Parameters
    ----------
    rng : object
        The seed to check.

    Raises
    ------
    TypeError
        Unless ``rng`` is a non-negative int (a bool is refused).
    """
    if isinstance(rng, bool) or not isinstance(rng, (int, np.integer)) or rng < 0:
        raise TypeError(f"rng must be a non-negative int (one seed for every delta); got {rng!r}")


#: the half-width ``h`` of the centred moving average that the plateau rule reads DMFT curves
#: through (docs/theory.md 8.10): the Monte Carlo noise of a solve's curves is fresh at every
#: step (new innovations of the field), while the limit's curves are smooth
CURVE_SMOOTHING = 6


def smoothed_curve(x, h=CURVE_SMOOTHING) -> np.ndarray:
    """The centred moving average of a curve (docs/theory.md section 8.10).

    Parameters
    ----------
    x : array_like (T,)
        The curve.
    h : int
        The half-width of the window.

    Returns
    -------
    numpy.ndarray (max(T - h, 0),)
        At each step ``t`` whose window is complete on the right, the mean of ``x`` over
        the ``2 j + 1`` steps ``t - j .. t + j``, ``j = min(h, t)`` (the window shrinks at the
        start): the same whatever follows them in ``x``.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.size - h
    if n <= 0:
        return x[:0]
    c = np.concatenate([[0.0], np.cumsum(x)])
    t = np.arange(n)
    j = np.minimum(h, t)
    return (c[t + j + 1] - c[t - j]) / (2 * j + 1)


def plateau_of_curves(train_loss, grad_norm, overlap, rule):
    """The plateau of DMFT curves (docs/theory.md section 8.10).

    :func:`rmt.segment_phases` with the rule and :data:`ESCAPE_OVERLAP` on the curves
    smoothed by :func:`smoothed_curve`.  With ``CURVE_SMOOTHING`` or fewer steps there is
    nothing to read: no plateau.

    Parameters
    ----------
    train_loss, grad_norm, overlap : array_like (T,)
        The curves of a solve (:class:`DMFTResult`) or the mean curves of replicas.
    rule : rmt.PlateauRule
        ``window``, ``depth`` and ``flat_rtol`` of the rule.

    Returns
    -------
    rmt.Phases
        The phases, in steps of the curves themselves.
    """
    curves = [smoothed_curve(c) for c in (train_loss, grad_norm, overlap)]
    if curves[0].size == 0:
        curves = [np.asarray(c, dtype=np.float64)[:1] for c in (train_loss, grad_norm, overlap)]
    return segment_phases(
        *curves, window=rule.window, depth=rule.depth, flat_rtol=rule.flat_rtol,
        escape_overlap=ESCAPE_OVERLAP, minimum_depth=rule.minimum_depth,
    )  # fmt: skip


def _plateau_rule(segment):
    rule = PlateauRule() if segment is None else segment
    if not isinstance(rule, PlateauRule):
        raise TypeError(f"segment must be an rmt.PlateauRule or None; got {type(rule).__name__}")
    return rule


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class _Problem:
    model: MultiIndexModel
    net: object
    delta: float
    lr: float
    T: int
    init: float
    wd: float
    N: int
    M0: np.ndarray
    smoothing: float = RELU_SMOOTHING
    theta_row: bool = False

    @property
    def m(self) -> int:
        return self.net.width

    @property
    def k(self) -> int:
        return self.model.k

    @classmethod
    def make(cls, model, net, delta, lr, steps, init_scale, weight_decay, n_samples, M0, smoothing):
        if not isinstance(model, MultiIndexModel):
            raise TypeError(f"model must be an rmt.MultiIndexModel; got {type(model).__name__}")
        if not isinstance(net, TwoLayerNet) and not all(
            hasattr(net, name) for name in ("width", "a", "sigma", "loss_derivatives")
        ):
            raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
        _check_activation(net)
        smoothing = check_positive_float(smoothing, "relu_smoothing")
        m, k = net.width, model.k
        if M0 is None:
            M0 = np.zeros((m, k))
        M0 = np.asarray(M0, dtype=np.float64).reshape(m, k) if np.size(M0) == m * k else None
        if M0 is None:
            raise ValueError(f"M0 must have m x k = {m} x {k} entries")
        return cls(
            model=model,
            net=net,
            delta=check_positive_float(delta, "delta"),
            lr=check_positive_float(lr, "lr"),
            T=check_positive_int(steps, "steps"),
            init=check_nonneg_float(init_scale, "init_scale"),
            wd=check_nonneg_float(weight_decay, "weight_decay"),
            N=check_positive_int(n_samples, "n_samples", minimum=2),
            M0=M0,
            smoothing=smoothing,
        )


def _with_theta_row(prob, theta_row):
    """``prob`` with the ``Theta*`` row of docs/theory.md 7.8 switched on or off; it needs
    ``M = 0`` to be invariant (an even target, ``M0 = 0``) and ``k = 1``."""
    if not isinstance(theta_row, (bool, np.bool_)):
        raise TypeError(f"theta_row must be True or False; got {type(theta_row).__name__}")
    if not theta_row:
        return prob
    if not prob.model.even or prob.k != 1 or np.any(prob.M0):
        raise ValueError(
            "theta_row needs an even target with k = 1 started at M0 = 0 (where M = 0 is "
            f"invariant); got even = {prob.model.even}, k = {prob.k}, M0 = {prob.M0.ravel()}"
        )
    return dataclasses.replace(prob, theta_row=True)


def _check_activation(net) -> None:
    """Refuse a network whose ``psi`` the solver cannot differentiate (docs/theory.md 8.11)."""
    act = getattr(net, "activation", None)
    if isinstance(net, TwoLayerNet) and act not in SMOOTH_ACTIVATIONS + ("relu",):
        raise ValueError(
            f"the DMFT solver treats the activations {SMOOTH_ACTIVATIONS} exactly and relu by "
            f"smoothing; got {act!r}"
        )


def solve_bytes(n_samples: int, m: int, steps: int) -> int:
    """Memory of a solve, in bytes, linear in the number of draws.

    The two-time kernels, the factor of ``Q_perp`` and their copies in the result (about
    ``64 (T+1)^2 m^2``); the Jacobians of every draw and step (``8 T m^2 N'``, ``N'`` the draws
    padded to a multiple of ``PAD``) and the response kernel's partial rows (at most
    ``4 N' (T+1) m^2``); the per-sample paths ``psi``, ``xi``, ``u`` and the innovations of
    the field (``32 N m T``).  The responses themselves take ``O(m^2 T)`` a draw (reverse
    mode, ``rmt.kernels.dmft``).

    Parameters
    ----------
    n_samples, m, steps : int
        Draws ``N``, width ``m`` and steps ``T`` of the solve.

    Returns
    -------
    int
        The bytes a solve holds at its peak, to within a few percent.
    """
    T, n_pad = steps, -(-n_samples // PAD) * PAD
    kernels = 64 * (T + 1) ** 2 * m * m
    draws = 8 * T * m * m * n_pad + 4 * n_pad * (T + 1) * m * m
    return kernels + draws + 32 * n_samples * m * T


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        return None


def _check_memory(prob, replicas=1) -> None:
    """Refuse, before any work, a solve that needs more than 80% of this machine's memory."""
    need, have = replicas * solve_bytes(prob.N, prob.m, prob.T), _physical_memory()
    if have is not None and need > 0.8 * have:
        raise ValueError(
            f"a DMFT solve of {replicas} x n_samples={prob.N}, m={prob.m}, steps={prob.T} needs "
            f"{need / 2**30:.1f} GiB, more than 80% of this machine's {have / 2**30:.1f} GiB: "
            "use fewer steps or n_samples"
        )


def _draws(prob, n_test, rng) -> dict:
    """The seeded Monte Carlo sample: ``(z, y)`` and Gaussian seeds, train and test sides."""
    N, k, m = prob.N, prob.k, prob.m
    z = rng.standard_normal((N, k))
    y = prob.model.labels(z, rng)
    z_test = rng.standard_normal((n_test, k))
    y_test = prob.model.labels(z_test, rng)
    g_test = rng.standard_normal((n_test, m))
    # the innovations g^t of the cavity field (xi = L g, eq. (D7)), drawn step by step from
    # this generator in the order of the steps
    return {"z": z, "y": y, "z_test": z_test, "y_test": y_test, "g_test": g_test, "rng": rng}


def _smoothed_relu(U, h, widths=None):
    """``(sigma, sigma', sigma'')`` of ``w softplus(u / w)``, ``w = h sd(u)`` per column of
    ``U`` over the draws (docs/theory.md 8.11), or ``w = widths`` when given; a column of width
    0 (no spread) keeps the exact ReLU."""
    widths = h * U.std(axis=0) if widths is None else np.asarray(widths, dtype=np.float64)
    w = np.where(widths > 0, widths, 1.0)
    x = U / w
    s = w * np.logaddexp(0.0, x)
    ds = 0.5 * (1.0 + np.tanh(0.5 * x))
    d2s = ds * (1.0 - ds) / w
    flat = widths == 0
    if np.any(flat):
        s[:, flat] = np.maximum(U[:, flat], 0.0)
        ds[:, flat] = (U[:, flat] > 0).astype(float)
        d2s[:, flat] = 0.0
    return s, ds, d2s


def smoothed_relu_descent(net, data, W0, lr, steps, relu_smoothing, test=None):
    """Full-batch GD of a ReLU network with the smoothed activation the DMFT solves.

    The update is that of :func:`rmt.gradient_descent` with ``relu`` replaced, at each step,
    by ``w softplus(u / w)``, ``w = h sd(u)`` per neuron over the ``n`` samples: the finite-d
    system whose ``d -> inf`` limit :func:`dmft_gd` solves exactly at ``relu_smoothing = h``
    (docs/theory.md 8.11).  Run from the same ``W0`` as the exact ReLU network, it measures
    the smoothing's bias on the same data, free of Monte Carlo error.

    Parameters
    ----------
    net : rmt.TwoLayerNet
        A network with ``activation="relu"``.
    data, test : rmt.Dataset
        The training set and an optional held-out set of the same model.
    W0 : array_like (d, m)
        The start.
    lr : float
        The step size.
    steps : int
        The number of updates; the curves hold the iterates ``0..steps``.
    relu_smoothing : float
        ``h``.

    Returns
    -------
    dict of numpy.ndarray
        ``train`` and ``test`` (the exact ReLU's loss at these weights on ``data`` and on
        ``test``, as :func:`dmft_gd`'s; ``test`` NaN without a held-out set), ``grad``
        (Frobenius norm of the gradient), ``M2`` (``||W^T Theta*||_F^2``, NaN without ``data.theta``) and ``trQ``, each of length
        ``steps + 1``, at the iterate before each update.

    Raises
    ------
    ValueError
        For a network that is not ReLU, a non-positive ``h``, ``lr`` or ``steps``, or a ``W0``
        of the wrong shape.
    """
    if getattr(net, "activation", None) != "relu":
        raise ValueError("smoothed_relu_descent needs a network with activation 'relu'")
    h = check_positive_float(relu_smoothing, "relu_smoothing")
    lr = check_positive_float(lr, "lr")
    steps = check_positive_int(steps, "steps")
    X, y = data.X, data.y
    W = np.array(W0, dtype=np.float64)
    if W.shape != (X.shape[1], net.width):
        raise ValueError(f"W0 must have shape {(X.shape[1], net.width)}, got {W.shape}")
    a = np.asarray(net.a, dtype=np.float64)
    out = {q: np.full(steps + 1, np.nan) for q in ("train", "test", "grad", "M2", "trQ")}
    for t in range(steps + 1):
        U = X @ W
        s, ds, _ = _smoothed_relu(U, h)
        _, dl, _ = net.loss_derivatives(y, s @ a)
        grad = X.T @ (dl[:, None] * ds * a) / X.shape[0]
        # the exact ReLU's loss at these iterates, as the solve's train loss
        out["train"][t] = np.mean(net.loss_derivatives(y, np.maximum(U, 0.0) @ a)[0])
        out["grad"][t] = np.linalg.norm(grad)
        out["trQ"][t] = np.sum(W * W)
        if data.theta is not None:
            out["M2"][t] = np.sum((W.T @ data.theta) ** 2)
        if test is not None:  # the exact ReLU at these weights, as the solve's test loss
            s_test, _, _ = net.sigma(test.X @ W)
            out["test"][t] = np.mean(net.loss_derivatives(test.y, s_test @ a)[0])
        W -= lr * grad
    return out


def _psi(net, U, y, relu_smoothing=None, widths=None):
    """``(loss, psi, J)`` per sample: the loss, ``d l / d u`` (``N x m``) and its Jacobian,
    draws last (``m x m x N``: the layout of the response kernels).

    With ``relu_smoothing`` ``h`` (or given ``widths``) a ReLU network uses the smoothed
    activation of :func:`_smoothed_relu` at these draws for ``psi`` and ``J``, and the exact
    ReLU for the loss (docs/theory.md 8.11)."""
    smoothed = relu_smoothing is not None or widths is not None
    a = np.asarray(net.a, dtype=np.float64)
    if smoothed and getattr(net, "activation", None) == "relu":
        s, ds, d2s = _smoothed_relu(U, relu_smoothing, widths)
        ell = net.loss_derivatives(y, np.maximum(U, 0.0) @ a)[0]
        _, dl, d2l = net.loss_derivatives(y, s @ a)
    else:
        s, ds, d2s = net.sigma(U)
        ell, dl, d2l = net.loss_derivatives(y, s @ a)
    v = ds * a
    psi = dl[:, None] * v
    vT = np.ascontiguousarray(v.T)
    J = d2l * vT[:, None, :] * vT[None, :, :]
    for i in range(vT.shape[0]):
        J[i, i] += (dl * d2s[:, i]) * a[i]
    return ell, psi, J


# ---------------------------------------------------------------------------------------------
# the causal solve
# ---------------------------------------------------------------------------------------------
#: numpy's floating-point warnings inside a solve: a diverging solve is caught by the explicit
#: finiteness checks and reported as failed, and the warnings on the way would only repeat it
_QUIET = {"over": "ignore", "invalid": "ignore", "divide": "ignore"}


def _solve(prob, draws, progress=False, rule=None) -> DMFTResult:
    """One solve: :func:`_solve_replicas` with one replica."""
    return _solve_replicas(prob, [draws], progress, rule)[0][0]


def _solve_replicas(prob, draws, progress=False, rule=None, states=None, start=0):
    """Solve independent replicas (one per entry of ``draws``) step by step in lockstep.

    With ``rule`` (an :class:`rmt.PlateauRule`) the mean of the replicas' curves, smoothed as
    in :func:`plateau_of_curves`, is fed to the online plateau rule, and every replica stops
    ``window + CURVE_SMOOTHING`` steps after the plateau of that mean: one ``t1`` for all of
    them.  A replica that fails stops the others at that step.  ``states`` and ``start``: go on
    from states that hold the first ``start`` steps (the rule is fed their curves first).
    Returns the results, that plateau (None without one), the problem and the states."""
    if states is None:
        states = [_State.empty(prob) for _ in draws]
    message, ok = "converged: causal sweep over the time grid", True
    seg, plateau, h = None, None, CURVE_SMOOTHING
    if rule is not None:  # the online plateau rule of gradient descent, fed the mean DMFT curves
        curves = np.full((3, prob.T), np.nan)  # train loss, gradient norm, overlap
        smooth = np.full((3, prob.T), np.nan)  # their moving averages, h steps behind
        seg = PhaseSegmenter(smooth[0], smooth[1], smooth[2], rule, ESCAPE_OVERLAP)

    def confirmed(t):  # feed the rule step t; True when the replicas stop after it
        curves[:, t] = np.mean([_curve_point(prob, st, t) for st in states], axis=0)
        if t < h:
            return False
        s = t - h
        smooth[:, s] = [smoothed_curve(c[: t + 1])[s] for c in curves]
        return seg.push(s) is not None and t + 1 < prob.T

    stop = None
    if seg is not None:
        stop = next((t for t in range(start) if confirmed(t)), None)
    # BLAS on one thread: its products here are small, and its threads, spinning after each
    # call, would compete with the parallel response kernel that follows
    bar = tqdm(
        total=prob.T - start, disable=not progress_enabled(progress), desc="DMFT steps",
        leave=False,
    )  # fmt: skip
    with threadpool_limits(limits=1, user_api="blas"), bar, np.errstate(**_QUIET):
        for t in range(start, prob.T if stop is None else start):
            try:
                for dr, st in zip(draws, states):
                    _n_side_step(prob, dr, st, t)
            except FloatingPointError as err:
                message, ok = f"failed at step {t}: {err}", False
                break
            for dr, st in zip(draws, states):
                _d_side_step(prob, dr, st, t)
            bar.update(1)
            if seg is not None and confirmed(t):
                stop = t
                break
    if stop is not None:
        plateau = seg.plateau
        message += (
            f"; stopped after step {stop}, {stop - plateau} steps after the plateau at {plateau}"
        )
        cut = [_truncated(prob, st, stop + 1) for st in states]
        prob, states = cut[0][0], [c[1] for c in cut]
    with np.errstate(**_QUIET):
        results = [_result(prob, dr, st, ok, message) for dr, st in zip(draws, states)]
    return results, plateau, prob, states


def _curve_point(prob, st, t):
    """Train loss, gradient norm and overlap at step ``t`` (after the d-side step ``t``): the
    curves of :func:`_result`, and what the online plateau rule of :func:`_solve` reads."""
    Q0 = st.Qp[t, t] + st.M[t] @ st.M[t].T
    Q1 = st.Qp[t + 1, t + 1] + st.M[t + 1] @ st.M[t + 1].T
    Q10 = st.Qp[t + 1, t] + st.M[t + 1] @ st.M[t].T
    step2 = np.trace(Q1) + np.trace(Q0) - 2 * np.trace(Q10)
    grad = np.sqrt(max(step2, 0.0)) / prob.lr
    train = st.loss[t] + 0.5 * prob.wd * np.trace(Q0)
    return train, grad, np.sum(st.M[t] * st.M[t]) / np.trace(Q0)


def _truncated(prob, st, T):
    """The problem and state of a solve stopped after ``T`` steps (its first ``T`` steps)."""
    m = prob.m
    a, b = T * m, (T + 1) * m
    cut = _State(
        M=st.M[: T + 1],
        Phi=st.Phi[: T + 1],
        Rw=np.ascontiguousarray(st.Rw[:b, :b]),
        Qp=np.ascontiguousarray(st.Qp[: T + 1, : T + 1]),
        Cf=np.ascontiguousarray(st.Cf[:a, :a]),
        R=np.ascontiguousarray(st.R[:T, :T]),
        KT=np.ascontiguousarray(st.KT[:b, :b]),
        J=st.J[:T],
        P=st.P[:a],
        loss=st.loss[:T],
        xi=st.xi[:T],
        u=st.u[:T],
        L=np.ascontiguousarray(st.L[:b, :b]),
        active=st.active[:b],
        G=st.G[:a],
    )
    if st.Rz is not None:
        cut.Rz = np.ascontiguousarray(st.Rz[:T, :T])
        cut.Czf = np.ascontiguousarray(st.Czf[:a, :a])
    return dataclasses.replace(prob, T=T), cut


def _grown(prob, st, T):
    """A state of a solve of ``T`` steps that holds the ``prob.T`` steps of ``st`` (the later
    steps' entries as :meth:`_State.empty` leaves them)."""
    new = _State.empty(dataclasses.replace(prob, T=T))
    T0, m = prob.T, prob.m
    a, b = T0 * m, (T0 + 1) * m
    new.M[: T0 + 1], new.Phi[: T0 + 1] = st.M, st.Phi
    new.Qp[: T0 + 1, : T0 + 1] = st.Qp
    new.Rw[:b, :b], new.KT[:b, :b], new.L[:b, :b] = st.Rw, st.KT, st.L
    new.active[:b] = st.active
    new.Cf[:a, :a], new.R[:T0, :T0], new.J[:T0] = st.Cf, st.R, st.J
    new.P[:a], new.G[:a] = st.P, st.G
    new.loss[:T0], new.xi[:T0], new.u[:T0] = st.loss, st.xi, st.u
    if st.Rz is not None:
        new.Rz[:T0, :T0], new.Czf[:a, :a] = st.Rz, st.Czf
    return new


def _blocks(flat, m):
    """The ``(T, T, m, m)`` view ``A[t, s] = flat[t m : (t+1) m, s m : (s+1) m]`` of a flat
    two-time kernel (the flat form is what the matrix products of a step use)."""
    T = flat.shape[0] // m
    return flat.reshape(T, m, T, m).transpose(0, 2, 1, 3)


@dataclass(kw_only=True)
class _State:
    M: np.ndarray  # (T+1, m, k)
    Phi: np.ndarray  # (T+1, m, m)
    Rw: np.ndarray  # ((T+1) m, (T+1) m), flat: R_w(t, s)_{ij} = Rw[t m + i, s m + j], s < t
    Qp: np.ndarray  # (T+1, T+1, m, m)
    Cf: np.ndarray  # (T m, T m), flat: C_psi(t, s)_{ij} = Cf[t m + i, s m + j]
    R: np.ndarray  # (T, T, m, m)
    KT: np.ndarray  # ((T+1) m, (T+1) m) = (lr/delta) Rw^T: row p m + k, column q m + j
    J: np.ndarray  # (T, m, m, N padded to a multiple of PAD): J[s, :, :, n] = d psi_n^s / d u
    P: np.ndarray  # (T m, N): psi^s in rows s m .. s m + m - 1 (a step's prefix is contiguous)
    loss: np.ndarray
    xi: np.ndarray  # (T, N, m): the cavity field xi^s (the Gaussian process of (D1))
    u: np.ndarray  # (T, N, m): the pre-activations u^s, self-term included
    L: np.ndarray  # ((T+1) m, (T+1) m): lower-triangular, L L^T = Q_perp (flat), eq. (D7)
    active: np.ndarray  # ((T+1) m,): the columns of L with a nonzero pivot
    G: np.ndarray  # (T m, N): the innovations g^s of the field, rows s m .. s m + m - 1
    Rz: np.ndarray = None  # (T, T, m, m): R_z(t, s) = E[z^2 d psi^t / d eta^s] (theta_row)
    Czf: np.ndarray = None  # (T m, T m), flat: C_z(t, s) = E[z^2 psi^t psi^sT] (theta_row)

    @property
    def R_w(self):
        return _blocks(self.Rw, self.Phi.shape[1])

    @property
    def C(self):
        return _blocks(self.Cf, self.Phi.shape[1])

    def psi(self, s):
        m = self.Phi.shape[1]
        return self.P[s * m : (s + 1) * m].T

    @classmethod
    def empty(cls, prob):
        T, m, k = prob.T, prob.m, prob.k
        Phi = np.zeros((T + 1, m, m))
        Phi[0] = np.eye(m)
        Qp = np.zeros((T + 1, T + 1, m, m))
        Qp[0, 0] = prob.init**2 * np.eye(m)
        M = np.zeros((T + 1, m, k))
        M[0] = prob.M0
        D = (T + 1) * m
        J = np.zeros((T, m, m, -(-prob.N // PAD) * PAD))
        st = cls(
            M=M,
            Phi=Phi,
            Rw=np.zeros((D, D)),
            Qp=Qp,
            Cf=np.zeros((T * m, T * m)),
            R=np.zeros((T, T, m, m)),
            KT=np.zeros((D, D)),
            J=J,
            P=np.zeros((T * m, prob.N)),
            loss=np.full(T, np.nan),
            xi=np.full((T, prob.N, m), np.nan),
            u=np.full((T, prob.N, m), np.nan),
            L=np.zeros((D, D)),
            active=np.zeros(D, dtype=bool),
            G=np.zeros((T * m, prob.N)),
        )
        if prob.theta_row:
            st.Rz, st.Czf = np.zeros((T, T, m, m)), np.zeros((T * m, T * m))
        _factor_row(st, 0)
        return st


def _n_side_step(prob, draws, st, t) -> None:
    """Eqs. (D1)-(D3) at time ``t``: ``xi^t``, ``u^t``, ``psi^t`` and the responses."""
    lr, dl, m = prob.lr, prob.delta, prob.m
    a, b = t * m, (t + 1) * m
    # the steps so far are the leading rows of P and G: each product reads them contiguously
    BT = st.Rw[a:b, :a] @ st.P[:a]  # B^t = sum_{s<t} psi^s R_w(t,s)^T: the memory term
    st.G[a:b] = draws["rng"].standard_normal((prob.N, m)).T
    xiT = st.L[a:b, :b] @ st.G[:b]  # eq. (D7): xi^t = sum_{s<=t} L(t, s) g^s
    xi = xiT.T
    U = np.ascontiguousarray(draws["z"] @ st.M[t].T + (xiT - (lr / dl) * BT).T)
    ell, psi, J = _psi(prob.net, U, draws["y"], prob.smoothing)
    if not (np.all(np.isfinite(psi)) and np.all(np.isfinite(J))):
        raise FloatingPointError("non-finite psi or Jacobian in the per-sample process")
    st.loss[t] = float(np.mean(ell))
    # responses by reverse mode (rmt.kernels.dmft): R_psi(t, p) = E[J^t d r^t / d eta^p]
    N = psi.shape[0]
    st.J[t, :, :, :N] = J
    row = np.empty((t + 1, m, m))
    response_kernel(m)(st.KT.reshape(-1, m, st.KT.shape[1]), st.J, t, row)
    st.P[a:b] = psi.T
    st.xi[t] = xi
    st.u[t] = U
    st.R[t, : t + 1] = row / N
    c_row = (st.P[:b] @ psi).T / N  # C_psi(t, s), s <= t
    st.Cf[a:b, :b] = c_row
    st.Cf[:b, a:b] = c_row.T
    if prob.theta_row:  # the same rows weighted by z^2 (docs/theory.md 7.8)
        z2 = draws["z"][:, 0] ** 2
        st.J[t, :, :, :N] *= z2  # J^t enters the reverse pass only as its left factor
        response_kernel(m)(st.KT.reshape(-1, m, st.KT.shape[1]), st.J, t, row)
        st.J[t, :, :, :N] = J
        st.Rz[t, : t + 1] = row / N
        cz_row = (st.P[:b] @ (psi * z2[:, None])).T / N
        st.Czf[a:b, :b] = cz_row
        st.Czf[:b, a:b] = cz_row.T


def _d_side_step(prob, draws, st, t) -> None:
    """Eqs. (D4)-(D6): ``M(t+1)``, ``Phi(t+1)``, ``R_w(t+1, s)`` and ``Q_perp(t+1, s)``."""
    lr, m = prob.lr, prob.m
    keep = 1.0 - lr * prob.wd
    R_t = st.R[t, : t + 1]  # R_psi(t, p), p <= t
    st.M[t + 1] = keep * st.M[t] - lr * _mu(prob, draws, st, t)
    st.Phi[t + 1] = keep * st.Phi[t] - lr * np.einsum("pij,pjk->ik", R_t, st.Phi[: t + 1])
    a, b, c = t * m, (t + 1) * m, (t + 2) * m
    # sum_p R_psi(t, p) R_w(p, s), s <= t (R_w(p, s) = 0 for p <= s), flat: (m, (t+1) m)
    memory = np.transpose(R_t, (1, 0, 2)).reshape(m, b) @ st.Rw[:b, :b]
    st.Rw[b:c, :b] = keep * st.Rw[a:b, :b] - lr * memory
    st.Rw[b:c, a:b] += np.eye(m)
    st.KT[:b, b:c] = (lr / prob.delta) * st.Rw[b:c, :b].T
    row = _q_perp_row(prob, st, t + 1)
    st.Qp[t + 1, : t + 2] = row
    st.Qp[: t + 2, t + 1] = np.swapaxes(row, 1, 2)
    _factor_row(st, t + 1)


def _mu(prob, draws, st, t) -> np.ndarray:
    """``mu(t) = E[psi^t z^T]`` (eq. (D3)); exactly 0 for an even target while ``M = 0``.

    For an even target (``(z, y) -> (-z, y)`` leaves the law invariant) with ``M(s) = 0`` for
    ``s <= t``, ``psi^t`` depends on ``z`` only through ``y``, so ``mu(t) = 0`` and ``M`` stays
    0 (docs/theory.md section 8.4).  The Monte Carlo estimate would instead be ``O(N^{-1/2})``
    and grow along the unstable direction, so the exact value is used.
    """
    if prob.model.even and not np.any(st.M[: t + 1]):
        return np.zeros((prob.m, prob.k))
    return st.psi(t).T @ draws["z"] / prob.N


#: a pivot of the factor of ``Q_perp`` below this fraction of the largest variance at its time
#: is a direction in which the field has no new randomness: it is set to 0 (eq. (D7)).  About
#: ``sqrt(eps)``: a kept pivot ``p`` puts rounding errors of relative size ``eps / p`` into its
#: column, and those enter every later Schur complement; at ``1e-10`` such columns cascaded into
#: pivots of ``-0.3`` times the variance and a field many times too wide (docs/theory.md 8.6)
PIVOT_RTOL = 1e-8


def _factor_row(st, t) -> None:
    """Block row ``t`` of the lower-triangular factor ``L`` with ``L L^T = Q_perp`` (eq. (D7)).

    A Cholesky factorisation, one scalar column at a time, that tolerates a positive
    semidefinite ``Q_perp``: a pivot below ``PIVOT_RTOL`` times the largest variance at time
    ``t`` (rounding of a direction along which the field is already determined) is set to 0,
    and its column takes no part in later rows.  So ``L L^T`` is ``Q_perp`` up to those
    dropped pivots, and the field ``xi^t = sum_s L(t, s) g^s`` needs ``O(N m T)`` memory.
    """
    m = st.Phi.shape[1]
    a, b = t * m, (t + 1) * m
    Q = _flat_q(st, t)  # (b, m): Q_perp(s, t) for s <= t, flat in s
    act = np.flatnonzero(st.active[:a])
    X = np.zeros((a, m))
    if act.size:
        Lact = st.L[np.ix_(act, act)]
        X[act] = solve_triangular(Lact, Q[act], lower=True, check_finite=False)
    st.L[a:b, :a] = X.T
    S = Q[a:b] - X.T @ X  # the covariance of the innovation at time t
    scale = max(float(np.max(np.diag(Q[a:b]), initial=0.0)), 0.0)
    for i in range(m):
        for j in range(i):
            if st.active[a + j]:
                st.L[a + i, a + j] = (S[i, j] - st.L[a + i, a : a + j] @ st.L[a + j, a : a + j]) / (
                    st.L[a + j, a + j]
                )
        piv = S[i, i] - st.L[a + i, a : a + i] @ st.L[a + i, a : a + i]
        st.active[a + i] = scale > 0.0 and piv > PIVOT_RTOL * scale
        st.L[a + i, a + i] = np.sqrt(piv) if st.active[a + i] else 0.0


def _flat_q(st, t) -> np.ndarray:
    """``Q_perp(s, t)`` for ``s <= t`` as a ``((t+1) m, m)`` matrix, rows ``s m + i``."""
    m = st.Phi.shape[1]
    return st.Qp[: t + 1, t].reshape((t + 1) * m, m)


def _q_perp_row(prob, st, t) -> np.ndarray:
    """Eq. (D6) for ``s <= t``: ``init^2 Phi(t) Phi(s)^T + (lr^2/delta) sum_{p<t, q<s}
    R_w(t,p) C(p,q) R_w(s,q)^T`` (``R_w(s, q) = 0`` for ``q >= s`` makes the sums full)."""
    m = prob.m
    a, n = t * m, t * m  # C is known on [0, t) x [0, t)
    left = st.Rw[a : a + m, :n] @ st.Cf[:n, :n]  # (m, t m): sum_p R_w(t,p) C(p,q)
    noise = left @ st.Rw[: a + m, :n].T  # (m, (t+1) m): ... R_w(s,q)^T, column block s
    noise = np.transpose(noise.reshape(m, t + 1, m), (1, 0, 2))
    init = prob.init**2 * np.einsum("ij,slj->sil", st.Phi[t], st.Phi[: t + 1])
    return init + (prob.lr**2 / prob.delta) * noise


def theta_row_covariance(R_z, C_z, lr, delta, init_scale, weight_decay=0.0) -> np.ndarray:
    """The covariance of the ``Theta*`` row of a finite-``d`` run while it is small
    (docs/theory.md 7.8).

    Along a solve with ``M = 0`` (an even target), ``v(t) = sqrt(d) M(t)`` of a run at finite
    ``d`` follows, to leading order, the d-side equation (D4) of a row of ``W`` with the
    responses and correlations weighted by ``z^2``:

        v(t+1) = (1 - lr lam) v(t) - lr sum_{s<=t} R_z(t, s) v(s) - lr zeta(t),
        zeta ~ GP(0, C_z / delta),   v(0) ~ N(0, init_scale^2 I),

    so ``E[v(t) v(t)^T] = init^2 Phi(t) Phi(t)^T + (lr^2/delta) sum_{p,q<t} R(t,p) C_z(p,q)
    R(t,q)^T``, with ``Phi`` and ``R`` the resolvents of (D5) built from ``R_z``.

    Parameters
    ----------
    R_z, C_z : numpy.ndarray (T, T, m, m)
        ``E[z^2 d psi^t / d eta^s]`` (``s <= t``) and ``E[z^2 psi^t psi^sT]``.
    lr, delta, init_scale, weight_decay : float
        The step size, ``n / d``, the start's scale and the weight decay of the solve.

    Returns
    -------
    numpy.ndarray (T + 1, m, m)
        ``E[v(t) v(t)^T]`` for ``t = 0..T``.

    Examples
    --------
    With no responses and no noise the row keeps its start, shrunk by weight decay:

    >>> import numpy as np
    >>> from rmt.dynamics.dmft import theta_row_covariance
    >>> S = theta_row_covariance(np.zeros((3, 3, 1, 1)), np.zeros((3, 3, 1, 1)), 0.5, 2.0, 0.1, 0.2)
    >>> np.allclose(S[:, 0, 0], 0.01 * 0.9 ** (2 * np.arange(4)))
    True
    """
    T, m = R_z.shape[0], R_z.shape[2]
    keep = 1.0 - lr * weight_decay
    Czf = np.asarray(C_z).transpose(0, 2, 1, 3).reshape(T * m, T * m)
    Phi = np.zeros((T + 1, m, m))
    Phi[0] = np.eye(m)
    Rs = np.zeros(((T + 1) * m, T * m))  # R(t, s) at rows t m + i, columns s m + j, s < t
    out = np.zeros((T + 1, m, m))
    out[0] = init_scale**2 * np.eye(m)
    for t in range(T):
        a, b, c = t * m, (t + 1) * m, (t + 2) * m
        row = np.transpose(R_z[t, : t + 1], (1, 0, 2)).reshape(m, b)  # R_z(t, p), p <= t
        Phi[t + 1] = keep * Phi[t] - lr * row @ Phi[: t + 1].reshape(b, m)
        Rs[b:c, :b] = keep * Rs[a:b, :b] - lr * row @ Rs[:b, :b]
        Rs[b:c, a:b] += np.eye(m)
        A = Rs[b:c, :b]
        out[t + 1] = init_scale**2 * Phi[t + 1] @ Phi[t + 1].T + (lr**2 / delta) * (
            A @ Czf[:b, :b] @ A.T
        )
    return out


def _result(prob, draws, st, ok, message) -> DMFTResult:
    T = prob.T
    Q = np.array([st.Qp[t, t] + st.M[t] @ st.M[t].T for t in range(T + 1)])
    points = np.array([_curve_point(prob, st, t) for t in range(T)]).reshape(T, 3)
    train, grad, overlap = np.ascontiguousarray(points.T)
    test = np.array([_test_loss(prob, draws, st, t) for t in range(T)])
    M = st.M[:T].copy()
    curves = [train, test, grad, overlap, M]
    if not ok:
        bad = int(np.flatnonzero(~np.isfinite(st.loss))[0])
        for c in curves:
            c[bad:] = np.nan
        Q[bad:] = np.nan
    xi, u = st.xi, st.u  # NaN from a failed step on: it stored nothing
    seed = {}
    if st.Rz is not None:
        seed = {"R_z": st.Rz, "C_z": np.ascontiguousarray(_blocks(st.Czf, prob.m))}
        seed["seed_cov"] = theta_row_covariance(
            seed["R_z"], seed["C_z"], prob.lr, prob.delta, prob.init, prob.wd
        )
        if not ok:
            seed["seed_cov"][bad + 1 :] = np.nan
    return DMFTResult(
        train_loss=train,
        test_loss=test,
        grad_norm=grad,
        M=M,
        Q=Q[:T],
        overlap=overlap,
        Q_perp=st.Qp,
        R_w=np.ascontiguousarray(st.R_w),
        C_psi=np.ascontiguousarray(st.C),
        R_psi=st.R,
        converged=ok,
        message=message,
        n_samples=prob.N,
        delta=prob.delta,
        lr=prob.lr,
        steps=T,
        z=draws["z"],
        y=draws["y"],
        xi=xi,
        u=u,
        **seed,
    )


def _test_loss(prob, draws, st, t) -> float:
    """Population loss ``E l(y, a^T sigma(M z + Q_perp(t,t)^{1/2} g))`` on the test draws."""
    lam, V = np.linalg.eigh(st.Qp[t, t])
    root = (V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T
    U = draws["z_test"] @ st.M[t].T + draws["g_test"] @ root
    s, _, _ = prob.net.sigma(U)
    ell, _, _ = prob.net.loss_derivatives(draws["y_test"], s @ np.asarray(prob.net.a, float))
    return float(np.mean(ell))


# ---------------------------------------------------------------------------------------------
# the Hessian at the end of the first phase (docs/theory.md section 8.9)
# ---------------------------------------------------------------------------------------------
#: smallest squared Theta* overlap for an outlier to count as the Theta* outlier.  Other
#: outliers of the DMFT law (along the difference of two neurons, say) have overlap 0 in the
#: limit and about ``1/N`` from the Monte Carlo sample; the Theta* outlier leaves the edge
#: with overlap 0 at the BBP point and gains it roughly linearly in ``delta``, so the cut
#: moves ``delta_NN`` up only slightly (benchmarks/RESULTS.md)
THETA_OVERLAP_MIN = 0.01

#: the overlap that counts as an escape in the plateau rule, the same in :func:`dmft_hessian`
#: (on the whole curves) and in a solve stopped at its plateau (online)
ESCAPE_OVERLAP = 0.5


def dmft_law(result: DMFTResult, net, t: int, weight_decay: float = 0.0, history=()):
    """The spike law of the Hessian at step ``t`` of a DMFT solve (docs/theory.md section 8.9).

    One node per Monte Carlo draw of the per-sample process: spike coordinates ``zhat =
    (z, Q_perp(t,t)^{-1/2} xi^t)``, the target coordinates and the *cavity* field written in
    an orthonormal basis of ``W_perp`` (standard Gaussian, independent of ``(z, y)``), and the
    sample's own curvature block ``D = J(u^t, y)`` at the pre-activation that includes the
    self-term.  This is the law that :func:`rmt.freeprob.plugin.plugin_law` estimates from one
    sample at a simulated ``W1``, here in the ``d -> inf`` limit, up to the Monte Carlo error
    of the ``N`` draws.  Directions of ``Q_perp`` with eigenvalue below ``1e-12`` of the
    largest are dropped (``W_perp`` of lower rank).

    Parameters
    ----------
    result : DMFTResult
        A solve with its per-sample process.
    net : rmt.TwoLayerNet
        The network of the solve (its curvature blocks).
    t : int
        A step in ``[0, result.steps)`` with a finite state.
    weight_decay : float
        The shift of the Hessian.
    history : sequence of int
        Earlier steps ``s < t`` whose cavity fields ``xi^s`` join the spike coordinates
        (whitened together with ``xi^t`` by the covariance ``Q_perp(s, s')``).  ``D`` depends
        on ``x`` through the cavity fields of the whole trajectory, not only through
        ``xi^t``; the default (none) keeps the spike space ``span(Theta*, W(t))`` of the
        plug-in law, and ``history`` measures what the rest changes (docs/theory.md
        section 8.9).

    Returns
    -------
    rmt.SpikeLaw
        The empirical law of the draws, with ``shift = weight_decay``.

    Raises
    ------
    TypeError
        When ``result`` is not a :class:`DMFTResult`.
    ValueError
        When it has no per-sample process, ``t`` is outside it, the state at ``t`` is not
        finite, or a step of ``history`` is not in ``[0, t)``.

    Examples
    --------
    The spike law at the plateau of a solve, then its bulk edges (docs/theory.md 8.9):

    >>> import rmt
    >>> cfg = rmt.RunConfig()
    >>> h = rmt.dmft_hessian(cfg.model(), cfg.net(), 4.0, steps=1200, stop_at_plateau=True)  # doctest: +SKIP
    >>> law = rmt.dmft_law(h.result, cfg.net(), h.t1)  # doctest: +SKIP
    >>> rmt.bulk_edges(law, 4.0).lo < 0  # doctest: +SKIP
    True
    """
    if not isinstance(result, DMFTResult):
        raise TypeError(f"result must be an rmt.DMFTResult; got {type(result).__name__}")
    if result.xi is None or result.u is None:
        raise ValueError("result has no per-sample process (solved by an older rmt.dmft_gd)")
    t = int(t)
    if not 0 <= t < result.steps:
        raise ValueError(f"t must be in [0, {result.steps}); got {t}")
    if not np.all(np.isfinite(result.u[t])):
        raise ValueError(f"the DMFT solve has no finite state at step {t}: {result.message}")
    times = [t]
    for s in history:
        s = int(s)
        if not 0 <= s < t:
            raise ValueError(f"history steps must be in [0, {t}); got {s}")
        if s not in times:
            times.append(s)
    C = np.block([[result.Q_perp[a, b] for b in times] for a in times])
    stack = np.concatenate([result.xi[s] for s in times], axis=1)
    return _law_of_nodes(result.z, stack, C, result.u[t], result.y, net, weight_decay)


def _law_of_nodes(z, fields, C, U, y, net, weight_decay):
    """The empirical spike law of draws ``(z, fields, U, y)``: spike coordinates ``z`` and the
    cavity fields ``fields`` (covariance ``C``) whitened, curvature blocks at ``U``."""
    lam, V = np.linalg.eigh(0.5 * (C + C.T))
    keep = lam > 1e-12 * max(float(lam.max(initial=0.0)), 1e-300)
    coords = fields @ (V[:, keep] / np.sqrt(lam[keep]))
    return SpikeLaw(
        np.concatenate([z, coords], axis=1),
        net.curvature(U, y),
        None,
        z.shape[1],
        shift=check_nonneg_float(weight_decay, "weight_decay"),
        kind="empirical",
        unbounded_reason="empirical law of the DMFT sample: boundedness not assessed",
    )


#: the draws of :func:`resampled_laws` are made and run forward in blocks of this many
LAW_BLOCK = 8192


def resampled_laws(
    result, model, net, times, n_draws, rng, weight_decay=0.0, relu_smoothing=RELU_SMOOTHING
) -> dict:
    """Spike laws of the Hessian at steps ``times`` from fresh draws of the per-sample process
    at the kernels of a solve (docs/theory.md section 8.10).

    The solve estimates the kernels ``M``, ``R_w`` and ``Q_perp`` from its ``N`` draws, and
    :func:`dmft_law` takes the law at step ``t`` from those same draws.  Here ``n_draws`` new
    draws of ``(z, y)`` and of the cavity field (the Gaussian process with covariance
    ``Q_perp`` over steps ``0 .. max(times)``) run eq. (D1) forward with the solved kernels
    (the memory term included; no responses are needed), so the law's own Monte Carlo
    error falls with ``n_draws`` while the kernels' error stays that of the solve.

    Parameters
    ----------
    result : DMFTResult
        A converged solve.
    model : rmt.MultiIndexModel
        The model of the solve (for the labels of the new draws).
    net : rmt.TwoLayerNet
        The network of the solve.
    times : sequence of int
        Steps in ``[0, result.steps)``.
    n_draws : int
        The new draws.
    rng : numpy.random.Generator
        The generator of the new draws.
    weight_decay : float
        The shift of the Hessian.
    relu_smoothing : float
        For a ReLU network, the smoothing of the solve: step ``s`` uses the width
        ``relu_smoothing * sd(u^s)`` of the solve's own draws, as the solve did.

    Returns
    -------
    dict
        Step -> :class:`rmt.freeprob.law.SpikeLaw`, as :func:`dmft_law` builds it.

    Raises
    ------
    TypeError
        When ``result`` is not a :class:`DMFTResult` with its per-sample process.
    ValueError
        For a failed solve or a step outside it.
    """
    if not isinstance(result, DMFTResult) or result.u is None:
        raise TypeError("result must be an rmt.DMFTResult with its per-sample process")
    if not result.converged:
        raise ValueError(f"the DMFT solve failed: {result.message}")
    times = sorted({int(s) for s in times})
    if not times or times[0] < 0 or times[-1] >= result.steps:
        raise ValueError(f"times must be steps in [0, {result.steps}); got {times}")
    n = check_positive_int(n_draws, "n_draws", minimum=2)
    t = times[-1]
    m, k = result.M.shape[1], result.M.shape[2]
    b = (t + 1) * m
    C = np.ascontiguousarray(result.Q_perp[: t + 1, : t + 1].transpose(0, 2, 1, 3)).reshape(b, b)
    z = rng.standard_normal((n, k))
    y = np.asarray(model.labels(z, rng), np.float64)
    Lc = causal_factor(C, m)
    Rw = np.ascontiguousarray(result.R_w[: t + 1, : t + 1].transpose(0, 2, 1, 3)).reshape(b, b)
    widths = np.zeros((t + 1, m))
    if getattr(net, "activation", None) == "relu":
        widths = check_positive_float(relu_smoothing, "relu_smoothing") * np.array(
            [result.u[s].std(axis=0) for s in range(t + 1)]
        )
    slot = np.full(t + 1, -1, dtype=np.int64)
    slot[times] = np.arange(len(times))
    U = np.empty((len(times), n, m))
    fields = np.empty((len(times), n, m))
    c = result.lr / result.delta
    M = np.ascontiguousarray(result.M[: t + 1])
    # the draws in blocks of LAW_BLOCK, each from its own generator seeded from rng, the
    # innovations of a block drawn step by step: the draws of steps <= s are the same whatever
    # the last step, and change smoothly with the kernels; memory O(LAW_BLOCK t m)
    seeds = rng.integers(0, 2**63, size=-(-n // LAW_BLOCK))
    blocks = list(zip(range(0, n, LAW_BLOCK), seeds))

    def drawn(block):  # numpy's generators release the GIL: blocks are drawn side by side
        i0, seed = block
        return np.random.default_rng(seed).standard_normal((t + 1, min(n - i0, LAW_BLOCK), m))

    def run(i0, G_steps):
        i1 = i0 + G_steps.shape[1]
        G = np.empty((i1 - i0, b))
        draw_major(G_steps, G)
        # the field X = G L^T of eq. (D7) by a triangular product, in place: X^T = L G^T
        X = dtrmm(1.0, Lc, G.T, side=0, lower=1, trans_a=0, overwrite_b=1).T
        if isinstance(net, TwoLayerNet):
            forward_kernel(m)(
                net.act_code, net.loss_code, float(net.huber_delta), np.asarray(net.a, np.float64),
                Rw, M, z[i0:i1], y[i0:i1], X, c, widths, slot, U[:, i0:i1],
            )  # fmt: skip
        else:
            _forward_numpy(net, Rw, M, z[i0:i1], y[i0:i1], X, c, widths, slot, U[:, i0:i1])
        for i, s in enumerate(times):
            fields[i, i0:i1] = X[:, s * m : (s + 1) * m]

    side_by_side = max(min(numba.get_num_threads(), len(blocks)), 1)
    with ThreadPoolExecutor(side_by_side) as pool:
        for k in range(0, len(blocks), side_by_side):
            group = blocks[k : k + side_by_side]
            for (i0, _), G_steps in zip(group, pool.map(drawn, group)):
                run(i0, G_steps)
    laws = {}
    for i, s in enumerate(times):
        laws[s] = _law_of_nodes(z, fields[i], result.Q_perp[s, s], U[i], y, net, weight_decay)
    return laws


def causal_factor(C, m) -> np.ndarray:
    """The causal factor of the covariance of a field over steps (docs/theory.md eq. (D7)).

    The semidefinite Cholesky of :func:`_factor_row` (a pivot below ``PIVOT_RTOL`` times the
    largest variance of its step is set to 0 with its column), row by row
    (:func:`rmt.kernels.dmft.semidefinite_cholesky`): the rows of the first steps do not
    depend, to the last bit, on how many steps are factored.

    Parameters
    ----------
    C : numpy.ndarray (b, b)
        The flat covariance: ``m`` coordinates a step, in step order.
    m : int
        The coordinates of a step.

    Returns
    -------
    numpy.ndarray (b, b)
        The lower-triangular ``L`` with ``L L^T = C`` (up to the dropped pivots).  ``L`` is
        causal: row block ``s`` uses the innovations of steps ``<= s`` only.
    """
    C = np.ascontiguousarray(C, dtype=np.float64)
    L = np.zeros_like(C)
    semidefinite_cholesky(C, int(m), PIVOT_RTOL, L)
    return L


def _forward_numpy(net, Rw, M, z, y, X, c, widths, slot, out) -> None:
    """:func:`rmt.kernels.dmft.forward_process` in numpy, for any network object."""
    m = M.shape[1]
    T = X.shape[1] // m
    P = np.zeros((z.shape[0], T * m))
    for s in range(T):
        a = s * m
        U = z @ M[s].T + X[:, a : a + m] - c * (P[:, :a] @ Rw[a : a + m, :a].T)
        P[:, a : a + m] = _psi(net, U, y, widths=widths[s])[1]
        if slot[s] >= 0:
            out[slot[s]] = U


@dataclass(frozen=True, kw_only=True)
class DMFTHessian:
    """The Hessian at the DMFT plateau ``t1`` (:func:`dmft_hessian`).

    ``t1`` is the plateau step of :func:`rmt.segment_phases` applied to the DMFT curves
    (``None`` when none was detected: then ``converged`` is False and every number is NaN).
    ``edge_lo``, ``edge_hi``: bulk edges; ``outliers`` the left outliers (farthest first) and
    ``overlaps_theta`` their squared ``Theta*`` overlaps; ``bottom`` the lowest predicted
    eigenvalue; ``theta_outlier`` the lowest outlier whose overlap is at least
    :data:`THETA_OVERLAP_MIN` (NaN if none).

    ``theta_margin`` is the BBP margin of the ``Theta*`` direction at the left edge: the
    largest ``-mu_j`` over the eigenpairs of the spike matrix ``S_lambda`` at the edge whose
    eigenvectors lie at least :data:`THETA_WEIGHT_MIN` along ``Theta*`` (docs/theory.md
    section 4); it is positive iff a left ``Theta*`` outlier exists, and continuous in
    ``delta``.  ``learning_margin = min(theta_margin, -x)``, with ``x`` the ``Theta*``
    outlier (the left edge while there is none), is positive iff a *negative* ``Theta*``
    outlier exists: the criterion of ``delta_NN`` (docs/theory.md 8.10), and ``negative`` is
    ``learning_margin > 0``.  ``result`` is the DMFT solve and ``law`` the spike law at ``t1``.
    """

    delta: float
    t1: int | None
    plateau_rule: str | None
    edge_lo: float
    edge_hi: float
    outliers: np.ndarray
    overlaps_theta: np.ndarray
    bottom: float
    theta_outlier: float
    theta_overlap: float
    negative: bool
    converged: bool
    message: str
    result: DMFTResult
    law: object = None
    theta_margin: float = float("nan")
    learning_margin: float = float("nan")

    @property
    def order_parameter(self) -> float:
        """The ``d -> inf`` value of the simulated order parameter of docs/theory.md 7.4: the
        squared ``Theta*`` overlap of the bottom eigenvector when its eigenvalue is negative,
        else 0.  The bottom is the lowest left outlier when there is one (its overlap), else
        the bulk edge, whose eigenvectors carry no ``Theta*`` (0).  NaN when ``converged`` is
        False."""
        if not self.converged:
            return float("nan")
        if len(self.outliers) and self.outliers[0] < 0:
            return float(self.overlaps_theta[0])
        return 0.0


def dmft_hessian(
    model,
    net,
    delta,
    *,
    lr=0.5,
    steps=250,
    init_scale=1e-2,
    weight_decay=0.0,
    n_samples=1500,
    rng=0,
    window=50,
    depth=0.2,
    flat_rtol=0.01,
    progress=False,
    stop_at_plateau=False,
    relu_smoothing=RELU_SMOOTHING,
) -> DMFTHessian:
    """Edges, outliers and ``Theta*`` overlaps of the Hessian at the end of the first phase,
    without simulation (docs/theory.md section 8.9).

    Solves :func:`dmft_gd`, finds the plateau ``t1`` with the rule of
    :func:`rmt.segment_phases` on the DMFT train loss, gradient norm and overlap (smoothed,
    :func:`plateau_of_curves`), and evaluates sections 3-4 on :func:`dmft_law` at ``t1``.

    Parameters
    ----------
    model : rmt.MultiIndexModel
        The data model.
    net : rmt.TwoLayerNet
        The network.
    delta : float
        The sample ratio ``n / d``.
    lr, steps, init_scale, weight_decay, n_samples, rng, relu_smoothing
        As in :func:`dmft_gd`.  The solve costs ``O(N m^3 steps^3)``, so ``steps`` must
        cover ``t1 + window + CURVE_SMOOTHING`` but not much more.
    window, depth, flat_rtol
        The plateau rule (:class:`rmt.PlateauRule`).
    progress : bool or None
        A tqdm bar over the solve's steps.
    stop_at_plateau : bool
        Stop the solve once the plateau is confirmed (the same ``t1``; ``steps`` is then a
        maximum, and the curves of ``result`` end ``window + CURVE_SMOOTHING`` steps after
        ``t1``).

    Returns
    -------
    DMFTHessian
        ``converged`` is False, with the reason in ``message`` and NaN numbers, when the
        solve fails, no plateau is detected within ``steps``, or the spectrum at ``t1``
        fails.

    Raises
    ------
    TypeError, ValueError
        For bad input, before any work (as :func:`dmft_gd`).

    Examples
    --------
    Phase retrieval, softplus/Huber, m = 2, above its ``delta_NN`` (about 2.6): the Hessian at the
    DMFT plateau has a negative ``Theta*`` outlier (tens of seconds, so not run as a test here;
    ``tests/test_dmft.py`` checks it against dense ``eigh``):

    >>> import rmt
    >>> cfg = rmt.RunConfig()
    >>> h = rmt.dmft_hessian(cfg.model(), cfg.net(), 4.0, steps=1200, stop_at_plateau=True)  # doctest: +SKIP
    >>> h.converged, h.negative, h.theta_outlier < h.edge_lo < 0  # doctest: +SKIP
    (True, True, True)
    """
    res = dmft_gd(
        model,
        net,
        delta,
        lr,
        steps,
        init_scale,
        weight_decay=weight_decay,
        n_samples=n_samples,
        rng=rng,
        progress=progress,
        stop_at_plateau=stop_at_plateau,
        segment=PlateauRule(window, depth, flat_rtol),
        relu_smoothing=relu_smoothing,
    )

    if not res.converged:
        return _failed_hessian(res, f"the DMFT solve failed: {res.message}")
    phases = plateau_of_curves(
        res.train_loss, res.grad_norm, res.overlap, PlateauRule(window, depth, flat_rtol)
    )
    if not phases.detected:
        return _failed_hessian(
            res,
            f"no plateau detected within {steps} steps of the DMFT curves (the rule needs "
            f"{window + CURVE_SMOOTHING} steps after it): pass more steps",
        )
    return hessian_at_step(res, net, int(phases.plateau_step), phases.rule, weight_decay)


def _failed_hessian(result, message, t1=None, rule=None) -> DMFTHessian:
    """A :class:`DMFTHessian` that failed: ``converged`` False, the reason, no numbers."""
    nan, empty = float("nan"), np.array([])
    return DMFTHessian(
        delta=result.delta,
        t1=t1,
        plateau_rule=rule,
        edge_lo=nan,
        edge_hi=nan,
        outliers=empty,
        overlaps_theta=empty,
        bottom=nan,
        theta_outlier=nan,
        theta_overlap=nan,
        negative=False,
        converged=False,
        message=message,
        result=result,
    )


def hessian_at_step(
    result, net, t1, rule=None, weight_decay=0.0, law=None, right_edge=True
) -> DMFTHessian:
    """Edges, outliers, overlaps and BBP margins of the Hessian at step ``t1`` of a DMFT solve
    (docs/theory.md section 8.9).

    Parameters
    ----------
    result : DMFTResult
        A converged solve with at least ``t1 + 1`` steps.
    net : rmt.TwoLayerNet
    t1 : int
        The step (the plateau, for :func:`dmft_hessian`).
    rule : str, optional
        How ``t1`` was found, kept in the result.
    weight_decay : float
        The shift of the Hessian.
    law : rmt.freeprob.law.SpikeLaw, optional
        The law at ``t1`` (from :func:`resampled_laws`, say); default :func:`dmft_law` of
        the solve's own draws.
    right_edge : bool
        False: the right edge of the bulk is not computed (``edge_hi`` is NaN); the left
        edge, the outliers and the margins, all on the left, are the same to the last bit.

    Returns
    -------
    DMFTHessian
        At the law of step ``t1``; ``converged`` is False, with the reason, when the
        spectrum or the margin of that law failed.

    Raises
    ------
    TypeError, ValueError
        As :func:`dmft_law`, when the law is built here (``t1`` outside the solve, say).
    """
    law = dmft_law(result, net, t1, weight_decay) if law is None else law
    try:
        edges = bulk_edges(law, result.delta, side=None if right_edge else "left")
        pred = plugin_prediction(law, result.delta, edges=edges)
        margin = theta_margin(law, result.delta, edges=edges)
    except (ConvergenceError, ValueError) as err:
        message = f"the spectrum of the DMFT law at t1 = {t1} failed: {err}"
        return _failed_hessian(result, message, t1, rule)
    big = np.flatnonzero(pred.overlaps_theta >= THETA_OVERLAP_MIN)
    theta_val = float(pred.outliers[big[0]]) if big.size else float("nan")
    theta_ov = float(pred.overlaps_theta[big[0]]) if big.size else float("nan")
    learning = min(margin, -(theta_val if big.size else float(pred.edge_lo)))
    return DMFTHessian(
        delta=result.delta,
        t1=t1,
        plateau_rule=rule,
        edge_lo=pred.edge_lo,
        edge_hi=pred.edge_hi,
        outliers=pred.outliers,
        overlaps_theta=pred.overlaps_theta,
        bottom=pred.bottom,
        theta_outlier=theta_val,
        theta_overlap=theta_ov,
        negative=bool(learning > 0.0),
        converged=True,
        message=f"plateau at step {t1} ({rule}); {result.message}",
        result=result,
        law=law,
        theta_margin=margin,
        learning_margin=learning,
    )


#: the least weight along ``Theta*`` of an eigenvector of the spike matrix at the edge for its
#: eigenvalue to enter the ``Theta*`` BBP margin (:func:`theta_margin`).  With Monte Carlo
#: nodes every eigenvector has some weight there; those of the ``Theta*`` pair carry most of
#: it, the others little (benchmarks/RESULTS.md)
THETA_WEIGHT_MIN = 0.5


def theta_margin(law, delta, *, edges=None) -> float:
    """The BBP margin of the ``Theta*`` direction on the left of the spectrum.

    Parameters
    ----------
    law : rmt.SpikeLaw
        The spike law (here :func:`dmft_law` at ``t1``).
    delta : float
        The sample ratio ``n / d``.
    edges : rmt.freeprob.edges.BulkEdges, optional
        :func:`rmt.bulk_edges` of the same law and ``delta`` with its left edge (default:
        the left edge is found here).

    Returns
    -------
    float
        ``max(-mu_j)`` over the eigenpairs ``(mu_j, v_j)`` of ``S_lambda`` at the left edge
        (docs/theory.md section 4) with ``|v_j|^2`` at least :data:`THETA_WEIGHT_MIN` on the
        ``Theta*`` rows: positive iff a left outlier along ``Theta*`` exists.  Continuous in
        ``delta`` and in the law, so a root in ``delta`` is the BBP point.

    Raises
    ------
    ValueError
        When the left edge is an atom or unbounded, or no eigenvector lies mainly along
        ``Theta*``: then there is no such margin.
    rmt.ConvergenceError
        When the left edge is not determined by the discretised law
        (``EdgeNotDetermined``) or its fold is not found.

    Examples
    --------
    The spectral matrix of phase retrieval with ``T(y) = 1/y - 1``, the Lu & Li estimator
    with its sign flipped, has its ``Theta*`` outlier on the left, and the published
    threshold ``delta = 1/2`` (docs/theory.md section 4.5) is the root of the margin:

    >>> import numpy as np
    >>> import rmt
    >>> from scipy.optimize import brentq
    >>> model = rmt.MultiIndexModel("phase_retrieval")
    >>> law = rmt.SpikeLaw.spectral(model, lambda y: 1.0 / y - 1.0, T_bounds=(-1.0, np.inf))
    >>> bool(rmt.theta_margin(law, 0.4) < 0 < rmt.theta_margin(law, 1.0))
    True
    >>> round(brentq(lambda x: rmt.theta_margin(law, x), 0.3, 1.0, xtol=1e-10), 6)
    0.5
    """
    mp = MPSystem(law, delta)
    if edges is None or edges.delta != mp.delta or edges.lo_kind == "not computed":
        edge, kind, G_edge, points = edge_and_branch(mp, -1)
    else:
        edge, kind = edges.lo - law.shift, edges.lo_kind
        G_edge, points = edges.G_lo, edges.branch_lo
        if kind == "undetermined":
            raise EdgeNotDetermined(f"no Theta* margin on the left: {edges.reason}")
    if kind in ("atom", "unbounded"):
        raise ValueError(f"the left edge is {'an atom' if kind == 'atom' else 'unbounded'}")
    branch = RealBranch(mp, -1, edge, G_edge, points)
    vals, vecs = np.linalg.eigh(branch.S(edge)[0])
    weight = np.sum(vecs[: law.theta_dims * law.m] ** 2, axis=0)
    along = weight >= THETA_WEIGHT_MIN
    if not np.any(along):
        raise ValueError(
            f"no eigenvector of the spike matrix at the edge lies mainly along Theta* "
            f"(largest weight {weight.max():.2f})"
        )
    return float(np.max(-vals[along]))
