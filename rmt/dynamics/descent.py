"""Full-batch gradient descent with train/test curves and its two phases (docs/theory.md section 7).

:func:`gradient_descent` runs ``W_{t+1} = W_t - lr grad L(W_t)`` on

    L(W) = (1/n) sum_i l(y_i, a^T sigma(W^T x_i)) + (weight_decay/2) ||W||_F^2

from a small random start, one pass over ``X`` per step (the fused kernels of
``rmt/kernels/descent.py``), and records at every iterate the train loss, the test loss, the
gradient norm and the overlap with ``Theta*``.  :func:`segment_phases` cuts these curves into
the first phase (the fall from the initial gradient peak to the plateau ``W1``) and the second
(the escape along the most negative Hessian directions); it is a pure function of the curves,
the rule is stated in its docstring.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from rmt.dynamics.escape import escape_step
from rmt.kernels.descent import step_kernels
from rmt.kernels.hessian import default_chunks
from rmt.kernels.threads import adaptive_threads
from rmt.problem.models import Dataset
from rmt.problem.network import TwoLayerNet
from rmt.progress import progress_enabled
from rmt.validation import check_nonneg_float, check_positive_float, check_positive_int

#: the initial peak ends once the gradient norm falls below this fraction of its running max
PEAK_DROP = 0.5


# ---------------------------------------------------------------------------------------------
# the phase rule
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlateauRule:
    """Parameters of the plateau rule of :func:`segment_phases` (validated).

    ``window`` steps of look-back and look-ahead, ``depth`` the largest ``g_t / g_peak`` at a
    plateau, ``flat_rtol`` the largest fraction of the total loss fall in the last window, and
    ``minimum_depth`` the largest ``g_t / g_peak`` at a local minimum (rule (a) of
    :func:`segment_phases`; None: ``depth``), so that a confirmed minimum may count at a depth
    where a flat loss does not.
    """

    window: int = 50
    depth: float = 0.2
    flat_rtol: float = 0.01
    minimum_depth: float | None = None

    def __post_init__(self):
        def fraction_of_peak(value, name):
            value = check_positive_float(value, name)
            if value > PEAK_DROP:
                raise ValueError(f"{name} must be in (0, {PEAK_DROP}]; got {value!r}")
            return value

        object.__setattr__(self, "window", check_positive_int(self.window, "window"))
        object.__setattr__(self, "depth", fraction_of_peak(self.depth, "depth"))
        low = self.depth if self.minimum_depth is None else self.minimum_depth
        object.__setattr__(self, "minimum_depth", fraction_of_peak(low, "minimum_depth"))
        object.__setattr__(self, "flat_rtol", check_nonneg_float(self.flat_rtol, "flat_rtol"))


@dataclass(frozen=True, kw_only=True)
class Phases:
    """Result of :func:`segment_phases`.

    ``peak_step`` is the initial gradient peak ``p`` (``None`` when the gradient norm never
    falls below half its running maximum).  ``plateau_step`` is the end of the first phase
    (``None`` when ``detected`` is False) and ``rule`` how it was found: ``"local_min"``,
    ``"loss_flat"`` or ``"before_escape"`` (the fallback: the overlap crossed the threshold
    before the rule fired, the plateau is the argmin of ``g`` over ``[p, crossing)``).
    ``escape_step`` (:func:`escape_step`) is ``None`` without escape;
    ``learned_in_first_phase`` is set when the overlap is already ``>= escape_overlap`` at the
    plateau.  ``depth_ratio = g[plateau] / g[peak]``.
    """

    peak_step: int | None
    plateau_step: int | None
    detected: bool
    rule: str | None
    escape_step: int | None
    learned_in_first_phase: bool
    depth_ratio: float
    settings: PlateauRule
    escape_overlap: float


class PhaseSegmenter:
    """Online form of the rule of :func:`segment_phases`: fed one step at a time.

    ``push(T)`` reads entries ``<= T`` of the curves (numpy arrays filled by the caller) and
    returns ``"plateau"`` when step ``T - window`` is confirmed as the plateau, ``"argmin"``
    when the fallback fixes the plateau at the tracked argmin (``argmin_step``), else ``None``.
    The caller keeps the iterates that these answers refer to.
    """

    def __init__(self, loss, grad_norm, overlap, rule, escape_overlap):
        self.loss, self.g, self.overlap = loss, grad_norm, overlap
        self.rule, self.thr = rule, escape_overlap
        self.gmax_step = 0
        self.peak = self.plateau = self.how = self.crossing = None
        self.argmin_step = 0

    def push(self, T) -> str | None:
        g = self.g
        self._track_peak(T)
        if self.crossing is None and self.overlap[T] >= self.thr:
            self.crossing = T
        if self.crossing is None or T < self.crossing:  # the fallback's argmin is over [p, c)
            if g[T] < g[self.argmin_step]:
                self.argmin_step = T
        if self.plateau is not None or self.peak is None:
            return None
        t = T - self.rule.window
        c = self.crossing
        if t > self.peak and (c is None or c <= self.peak or t < c):
            how = self._fires(t)
            if how is not None:
                self.plateau, self.how = t, how
                return "plateau"
        if self._fallback_due(T):
            return self._take_fallback()
        return None

    def _track_peak(self, T):
        g = self.g
        if self.peak is not None:
            return
        if g[T] > g[self.gmax_step]:
            self.gmax_step = self.argmin_step = T
        elif g[T] < PEAK_DROP * g[self.gmax_step]:
            self.peak = self.gmax_step

    def _fires(self, t) -> str | None:
        """Rule (a) local minimum or (b) flat loss at a deep step ``t`` (curves known to t+w)."""
        g, L, w = self.g, self.loss, self.rule.window
        if g[t] <= self.rule.minimum_depth * g[self.peak]:
            if g[t] <= np.min(g[max(0, t - w) : t + w + 1]):
                return "local_min"
        if not g[t] <= self.rule.depth * g[self.peak]:
            return None
        fall = max(L[0] - L[t], 0.0)
        if L[max(0, t - w)] - L[t] <= self.rule.flat_rtol * fall:
            return "loss_flat"
        return None

    def _fallback_due(self, T) -> bool:
        """All candidates before the crossing are decided and none fired."""
        c = self.crossing
        return c is not None and c > self.peak and T >= c - 1 + self.rule.window

    def _take_fallback(self) -> str:
        self.plateau, self.how = self.argmin_step, "before_escape"
        return "argmin"

    def finish(self, n_steps) -> Phases:
        """The :class:`Phases` after ``n_steps`` steps (undecided fallback taken at the end)."""
        c = self.crossing
        if self.plateau is None and self.peak is not None and c is not None and c > self.peak:
            self._take_fallback()
        g = self.g[:n_steps]
        plateau = self.plateau
        esc = escape_step(self.overlap[:n_steps], plateau, self.thr)
        learned = plateau is not None and bool(self.overlap[plateau] >= self.thr)
        ratio = float(g[plateau] / g[self.peak]) if plateau is not None else float("nan")
        return Phases(
            peak_step=self.peak,
            plateau_step=plateau,
            detected=plateau is not None,
            rule=self.how,
            escape_step=esc,
            learned_in_first_phase=learned,
            depth_ratio=ratio,
            settings=self.rule,
            escape_overlap=self.thr,
        )


def segment_phases(
    loss,
    grad_norm,
    overlap=None,
    *,
    window=50,
    depth=0.2,
    flat_rtol=0.01,
    escape_overlap=0.5,
    minimum_depth=None,
) -> Phases:
    """Cut gradient-descent curves into the two phases (docs/theory.md section 7.2).

    ``loss[t]``, ``grad_norm[t] = g_t`` and optionally ``overlap[t]`` are recorded at the
    iterate before update ``t``.  With ``w = window``:

    1. **Initial peak** ``p``: the argmax of ``g`` over ``[0, T_half]``, where ``T_half`` is
       the first step with ``g_T < 0.5 max_{s < T} g_s`` (``p = 0`` when ``g`` only
       decreases).  Without such a step there is no peak and nothing is detected.
    2. **Plateau** (end of the first phase): the first step ``t > p`` with ``t + w`` within the
       curves and either

       (a) ``g_t <= minimum_depth * g_p`` and ``g_t = min g`` over ``[t - w, t + w]`` (a local
           minimum: the closest approach to a saddle, after which the escape makes ``g``
           grow; ``minimum_depth`` is ``depth`` unless given), or
       (b) ``g_t <= depth * g_p`` (deep) and ``L_{t-w} - L_t <= flat_rtol * max(L_0 - L_t, 0)``
           (the last window covered a tiny fraction of the total fall of the loss: slow
           convergence, no escape);

       (indices below 0 are clipped to 0).  The plateau is confirmed ``w`` steps after ``t``.
    3. **Escape fallback**: let ``c`` be the first step with ``overlap >= escape_overlap``.
       The first phase ends before any escape, so only steps ``t < c`` are candidates in 2;
       when ``c > p`` and none of them qualifies, the plateau is the argmin of ``g`` over
       ``[p, c)`` (``rule = "before_escape"``).
    4. **Escape**: :func:`escape_step` from the plateau.

    The rule compares ``g`` and ``L`` only with themselves, so it does not change when the
    loss or the gradient is rescaled.

    Parameters
    ----------
    loss, grad_norm : array (T,)
        Finite training loss and gradient norm per recorded iterate.
    overlap : array (T,), optional
        ``Theta*`` overlap per iterate (NaN: unknown, never an escape).
    window, depth, flat_rtol, minimum_depth : int, float, float, float or None
        The :class:`PlateauRule` (``minimum_depth`` in place of ``depth`` in (a)).
    escape_overlap : float
        The overlap that counts as an escape.

    Returns
    -------
    Phases

    Raises
    ------
    ValueError
        For curves that are empty, not finite or of different lengths, or an invalid rule.

    Examples
    --------
    A gradient norm ``e^{-t/20} + 10^{-3} e^{t/40}`` has its minimum at
    ``t = (40/3) log 2000``, about 101: that local minimum is the plateau.

    >>> import numpy as np
    >>> import rmt
    >>> t = np.arange(400.0)
    >>> g = np.exp(-t / 20) + 1e-3 * np.exp(t / 40)
    >>> overlap = (t >= 300).astype(float)
    >>> ph = rmt.segment_phases(np.exp(-t / 20), g, overlap, window=20)
    >>> ph.detected, ph.rule, ph.peak_step, ph.plateau_step, ph.escape_step
    (True, 'local_min', 0, 101, 300)
    >>> ph.plateau_step == round(40 / 3 * np.log(2000))
    True
    """
    rule = PlateauRule(window, depth, flat_rtol, minimum_depth)
    thr = check_positive_float(escape_overlap, "escape_overlap")
    loss = _curve(loss, "loss")
    g = _curve(grad_norm, "grad_norm")
    if g.shape != loss.shape:
        raise ValueError(f"grad_norm must have the length of loss ({loss.size}); got {g.size}")
    if overlap is None:
        overlap = np.full(loss.size, np.nan)
    overlap = np.asarray(overlap, dtype=np.float64)
    if overlap.shape != loss.shape:
        raise ValueError(f"overlap must have the length of loss ({loss.size}); got {overlap.size}")
    seg = PhaseSegmenter(loss, g, overlap, rule, thr)
    for T in range(loss.size):
        seg.push(T)
    return seg.finish(loss.size)


def _curve(x, name) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"{name} must be a non-empty 1-D array; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; it has non-finite entries")
    return arr


# ---------------------------------------------------------------------------------------------
# gradient descent
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class GDRun:
    """Result of :func:`gradient_descent` (docs/theory.md section 7.2).

    ``steps`` is the number of updates made.  Curves have one entry per iterate ``W^t``,
    ``t = 0..steps`` (``steps + 1`` entries; ``steps`` when the run diverged, whose last iterate
    is not recorded): ``loss`` (train, with weight decay), ``test_loss`` (mean loss on the
    held-out set, without weight decay; NaN without one), ``grad_norm`` (Frobenius) and ``overlap``
    (``||Theta*^T W||_F^2 / ||W||_F^2``; NaN when ``data.theta`` is unknown).

    ``W1`` is the iterate at ``plateau_step`` (``None`` when no plateau was detected),
    ``W_final`` the last iterate ``W^steps`` (of a diverged run: the one whose loss was
    non-finite), ``W0`` the start.  ``peak_step``, ``plateau_step`` and ``escape_step`` come
    from ``phases`` (:func:`segment_phases`).  ``diverged`` is set when the loss or the
    gradient became non-finite: the run ended there and that step is not recorded.
    ``seconds`` is the wall time of the steps, ``compile_seconds`` that of compiling (or
    loading from the cache) the kernels, measured on a one-row problem before the run.
    """

    loss: np.ndarray
    test_loss: np.ndarray
    grad_norm: np.ndarray
    overlap: np.ndarray
    W1: np.ndarray | None
    W_final: np.ndarray
    W0: np.ndarray
    plateau_step: int | None
    peak_step: int | None
    escape_step: int | None
    phases: Phases
    lr: float
    steps: int
    weight_decay: float
    diverged: bool
    seconds: float
    compile_seconds: float

    @property
    def escape_time(self) -> float | None:
        """``(escape_step - plateau_step) * lr``: the plateau's length in gradient-flow time."""
        if self.escape_step is None:
            return None
        return (self.escape_step - self.plateau_step) * self.lr


@dataclass(kw_only=True)
class _Problem:
    """Everything a step needs, validated: kernels, arrays, settings."""

    net: TwoLayerNet
    data: Dataset
    test: Dataset | None
    grad_kernel: object
    loss_kernel: object
    lr: float
    wd: float
    n_chunks: int

    def args(self, data):
        net = self.net
        return data.y, net.a, net.act_code, net.loss_code, net.huber_delta, self.n_chunks


def _check_inputs(net, data, test, lr, steps, weight_decay, escape_overlap, stop_after_escape):
    if not isinstance(net, TwoLayerNet):
        raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
    if not isinstance(data, Dataset):
        raise TypeError(f"data must be an rmt.Dataset; got {type(data).__name__}")
    if test is not None and not isinstance(test, Dataset):
        raise TypeError(f"test must be an rmt.Dataset or None; got {type(test).__name__}")
    if test is not None and test.d != data.d:
        raise ValueError(f"test must have the dimension of data (d = {data.d}); got d = {test.d}")
    net.check_labels(data.y)
    if test is not None:
        net.check_labels(test.y)
    lr = check_positive_float(lr, "lr")
    steps = check_positive_int(steps, "steps")
    wd = check_nonneg_float(weight_decay, "weight_decay")
    thr = check_positive_float(escape_overlap, "escape_overlap")
    if stop_after_escape is not None:
        stop_after_escape = check_positive_int(stop_after_escape, "stop_after_escape", minimum=0)
    return lr, steps, wd, thr, stop_after_escape


def _initial_weights(net, data, W0, init_scale, rng) -> np.ndarray:
    """``W0`` (checked) or ``init_scale * N(0, 1/d)`` entries, returned transposed (``m x d``)."""
    if W0 is None:
        scale = check_nonneg_float(init_scale, "init_scale")
        W = scale * np.random.default_rng(rng).standard_normal((data.d, net.width))
        W /= np.sqrt(data.d)
    else:
        W = net.check_weights(W0, data.d)
    return np.ascontiguousarray(W.T)


def _warm_up(prob) -> float:
    """Compile (or load from the cache) both kernels on one row; return the seconds taken."""
    t0 = time.perf_counter()
    one = Dataset(prob.data.X[:1], prob.data.y[:1])
    Wt = np.zeros((prob.net.width, prob.data.d))
    prob.grad_kernel(one.X, Wt, *prob.args(one))
    if prob.test is not None:
        prob.loss_kernel(one.X, Wt, *prob.args(one))
    return time.perf_counter() - t0


def _evaluate(prob, Wt, theta):
    """``(loss, test_loss, gradient (m x d), overlap)`` at ``W = Wt^T``."""
    data, n = prob.data, prob.data.n
    total, G = prob.grad_kernel(data.X, Wt, *prob.args(data))
    sq = float(np.sum(Wt * Wt))
    value = total / n + 0.5 * prob.wd * sq
    G /= n
    if prob.wd:
        G += prob.wd * Wt
    test_value = np.nan
    if prob.test is not None:
        test_value = prob.loss_kernel(prob.test.X, Wt, *prob.args(prob.test)) / prob.test.n
    overlap = np.nan
    if theta is not None:
        P = Wt @ theta
        overlap = float(np.sum(P * P)) / sq if sq > 0 else 0.0
    return value, test_value, G, overlap


@adaptive_threads
def gradient_descent(
    net,
    data,
    *,
    test=None,
    W0=None,
    init_scale=1e-2,
    lr=0.5,
    steps=5000,
    weight_decay=0.0,
    escape_overlap=0.5,
    stop_after_escape=None,
    stop_at_plateau=False,
    rng=None,
    progress=None,
    segment=None,
) -> GDRun:
    """Full-batch gradient descent with its phases (docs/theory.md section 7.2).

    ``W_{t+1} = W_t - lr grad L(W_t)`` for ``steps`` updates from ``W0`` or, by default,
    ``init_scale * N(0, 1/d)`` entries drawn from ``rng`` (each neuron has norm about
    ``init_scale``).  Each iterate ``W^0..W^steps`` costs one pass over ``data.X`` (fused loss
    and gradient kernel), plus one forward pass over ``test.X`` when a held-out ``test`` set
    (same model) is given; the curves record all ``steps + 1``.
    The curves are cut by :func:`segment_phases` with the rule ``segment`` (a
    :class:`PlateauRule`, default ``PlateauRule()``), online: ``W1`` is kept from a ring buffer
    of the last ``window + 1`` iterates when the plateau is confirmed ``window`` steps later.
    With ``stop_after_escape = k`` the run stops ``k`` steps after the escape; with
    ``stop_at_plateau`` it stops as soon as the plateau is confirmed (``window`` steps after
    it: all a trained point needs).  ``W0`` of the result is the starting point.  A non-finite
    loss or gradient ends the run with ``diverged = True``.  A tqdm bar shows progress when
    stderr is a terminal (``progress=None``, :func:`rmt.progress.progress_enabled`);
    ``progress=True`` forces it and ``False`` hides it.

    Parameters
    ----------
    net : TwoLayerNet
        The network.
    data : Dataset
        The training set.
    test : Dataset, optional
        A held-out set of the same model (its loss is recorded).
    W0 : array (d, m), optional
        The start (default ``init_scale * N(0, 1/d)`` entries).
    init_scale, lr, steps, weight_decay
        Scale of the random start, step, number of updates and weight decay.
    escape_overlap : float
        The ``Theta*`` overlap that counts as an escape.
    stop_after_escape : int, optional
        Stop this many steps after the escape.
    stop_at_plateau : bool
        Stop once the plateau is confirmed.
    rng : None, int or Generator
        Seeds the random start.
    progress : bool, optional
        Progress bar (default: when stderr is a terminal).
    segment : PlateauRule, optional
        The phase rule (default ``PlateauRule()``).

    Returns
    -------
    GDRun
        The curves, the phases, ``W1``, ``W_final`` and ``W0``.

    Raises
    ------
    TypeError
        For a ``segment`` that is not a :class:`PlateauRule`.
    ValueError
        For invalid steps, rates or shapes.

    Examples
    --------
    Phase retrieval at ``delta = 8``: the first phase ends on a plateau, then the overlap
    with ``Theta*`` passes 1/2.  The recorded loss at the start is the Huber loss computed
    with numpy:

    >>> import numpy as np
    >>> import rmt
    >>> data = rmt.MultiIndexModel("phase_retrieval").sample(800, 100, rng=0)
    >>> net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    >>> run = rmt.gradient_descent(net, data, steps=400, lr=0.5, rng=1)
    >>> run.phases.detected, run.W1 is not None, run.phases.escape_step is not None
    (True, True, True)
    >>> r = net.forward(data.X, run.W0) - data.y
    >>> bool(np.isclose(run.loss[0], np.mean(np.where(abs(r) <= 1, r**2 / 2, abs(r) - 0.5))))
    True
    >>> bool(run.overlap[run.phases.escape_step] >= 0.5 > run.overlap[run.phases.plateau_step])
    True
    """
    lr, steps, wd, thr, stop_after = _check_inputs(
        net, data, test, lr, steps, weight_decay, escape_overlap, stop_after_escape
    )
    rule = PlateauRule() if segment is None else segment
    if not isinstance(rule, PlateauRule):
        raise TypeError(f"segment must be an rmt.PlateauRule or None; got {type(rule).__name__}")
    grad_kernel, loss_kernel = step_kernels(net.width)
    prob = _Problem(
        net=net,
        data=data,
        test=test,
        grad_kernel=grad_kernel,
        loss_kernel=loss_kernel,
        lr=lr,
        wd=wd,
        n_chunks=default_chunks(),
    )
    Wt = _initial_weights(net, data, W0, init_scale, rng)
    start = np.ascontiguousarray(Wt.T)
    compile_seconds = _warm_up(prob)
    curves = np.full((4, steps + 1), np.nan)
    t0 = time.perf_counter()
    show = progress_enabled(progress)
    # a run that blows up overflows on its way to a non-finite loss or gradient, which ends
    # it with diverged = True: that is its report, not a warning
    with (
        np.errstate(over="ignore", invalid="ignore"),
        tqdm(total=steps, disable=not show, desc="gradient descent", leave=False) as bar,
    ):
        state = _run_loop(prob, Wt, curves, rule, thr, stop_after, bar, bool(stop_at_plateau))
    seconds = time.perf_counter() - t0
    return _finish(state, curves, prob, seconds, compile_seconds, start)


def _run_loop(prob, Wt, curves, rule, thr, stop_after, bar, stop_at_plateau=False) -> dict:
    """The steps; returns the loop state (segmenter, kept iterates, last iterate, flags)."""
    seg = PhaseSegmenter(curves[0], curves[2], curves[3], rule, thr)
    ring = np.empty((rule.window + 1,) + Wt.shape)
    state = {"seg": seg, "W1": None, "W_argmin": Wt.copy(), "escape": None, "diverged": False}
    theta = prob.data.theta
    T = -1
    for T in range(curves.shape[1]):
        value, test_value, G, overlap = _evaluate(prob, Wt, theta)
        if not _finite(prob, value, test_value, G):
            state["diverged"] = True
            break
        curves[:, T] = value, test_value, np.linalg.norm(G), overlap
        ring[T % ring.shape[0]] = Wt
        _segment_step(state, T, Wt, ring, curves[3], thr)
        esc = state["escape"]
        if stop_at_plateau and state["W1"] is not None:
            break
        if stop_after is not None and esc is not None and T >= esc + stop_after:
            break
        if T == curves.shape[1] - 1:
            break
        Wt = Wt - prob.lr * G
        bar.update(1)
    # T updates were made; W^0..W^T are recorded, or W^0..W^(T-1) when W^T diverged
    state["steps"], state["W_final"] = T, Wt
    state["recorded"] = T if state["diverged"] else T + 1
    return state


def _finite(prob, value, test_value, G) -> bool:
    """Whether the step's loss, test loss (when there is a test set) and gradient are finite."""
    test_ok = prob.test is None or np.isfinite(test_value)
    return bool(np.isfinite(value) and test_ok and np.isfinite(G).all())


def _segment_step(state, T, Wt, ring, overlap, thr) -> None:
    """Feed step ``T`` to the segmenter; keep ``W1`` and the fallback iterate; find the escape."""
    seg = state["seg"]
    answer = seg.push(T)
    if seg.argmin_step == T:
        state["W_argmin"] = Wt.copy()
    if answer == "plateau":
        state["W1"] = ring[seg.plateau % ring.shape[0]].copy()
    elif answer == "argmin":
        state["W1"] = state["W_argmin"].copy()
    if answer is not None:
        state["escape"] = escape_step(overlap[: T + 1], seg.plateau, thr)
    elif state["escape"] is None and seg.plateau is not None and T > seg.plateau:
        if overlap[seg.plateau] < thr <= overlap[T]:
            state["escape"] = T


def _finish(state, curves, prob, seconds, compile_seconds, start) -> GDRun:
    """Assemble the :class:`GDRun` from the loop state."""
    n = state["recorded"]
    seg = state["seg"]
    phases = seg.finish(n)
    W1 = state["W1"]
    if W1 is None and phases.rule == "before_escape":
        W1 = state["W_argmin"]
    loss, test_loss, gnorm, overlap = (c[:n].copy() for c in curves)
    return GDRun(
        loss=loss,
        test_loss=test_loss,
        grad_norm=gnorm,
        overlap=overlap,
        W1=None if W1 is None else np.ascontiguousarray(W1.T),
        W_final=np.ascontiguousarray(state["W_final"].T),
        W0=start,
        plateau_step=phases.plateau_step,
        peak_step=phases.peak_step,
        escape_step=phases.escape_step,
        phases=phases,
        lr=prob.lr,
        steps=state["steps"],
        weight_decay=prob.wd,
        diverged=state["diverged"],
        seconds=seconds,
        compile_seconds=compile_seconds,
    )
