"""The asymptotic ``delta_NN``: the root in ``delta`` of the learning margin at the DMFT plateau.

docs/theory.md section 8.10.  At each ``delta``, :func:`dmft_margin` solves the DMFT of the first
phase in ``replicas`` independent replicas (their own draws, the same at every ``delta``) and
reads at each replica's plateau the learning margin of :class:`rmt.DMFTHessian`: positive iff
the Hessian at ``W1`` has a negative outlier along ``Theta*``.  The margin is continuous in
``delta``, so :func:`dmft_delta_nn` brackets its sign change with a pilot of fewer draws
(a secant walk, then regula falsi), evaluates once with all the draws at the pilot's root and
takes a Newton step in ``log delta`` with the pilot's slope, adding replicas there until the
standard error meets its goal.  The standard error is the jackknife over the replicas of that
root: the Monte Carlo error of the draws, the only random part of the method.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtrit

from rmt.dynamics.descent import PEAK_DROP, PlateauRule
from rmt.dynamics.dmft import (
    CURVE_SMOOTHING,
    RELU_SMOOTHING,
    check_seed,
    dmft_replicas,
    extend_replicas,
    hessian_at_step,
    plateau_of_curves,
    resampled_laws,
    smoothed_curve,
)
from rmt.freeprob.law import SpikeLaw
from rmt.kernels.threads import adaptive_threads
from rmt.validation import check_nonneg_float, check_positive_float, check_positive_int


@dataclass(frozen=True, kw_only=True)
class DMFTEvaluation:
    """The learning margin at one ``delta`` over independent replicas (:func:`dmft_margin`).

    Attributes
    ----------
    delta : float
        The sample ratio.
    t1 : int or None
        The plateau step of the replicas' mean curves (the rule's; the norm's minimum when
        the loss went flat just before it), shared by all replicas.
    margins : numpy.ndarray
        The learning margin of each replica (:class:`rmt.DMFTHessian`) at ``vertex``,
        interpolated linearly between the steps around it.
    loo_margins : numpy.ndarray
        The jackknife values: entry ``r`` is the mean margin of the other replicas at the
        vertex of *their* mean gradient norm.
    margin, margin_se : float
        The mean of ``margins`` and its jackknife standard error (NaN when ``converged`` is
        False).
    hessians : tuple of DMFTHessian
        The replicas' Hessians at the step nearest ``vertex``.
    converged : bool
        Whether the mean curves reached a plateau within ``max_steps`` and every replica
        gave a margin there.
    message : str
        What failed, or where the plateau is.
    vertex : float
        Where the margins are read (docs/theory.md 8.10): at a minimum of the smoothed mean
        gradient norm, the plateau to a fraction of a step (the minimum of the least-squares
        parabola through that norm over ``t1 +- VERTEX_WINDOW`` steps, ``t1`` when it is not
        convex or its minimum lies outside); after a flat loss without such a minimum, the
        step where the margin settled, ``t1 + PLATEAU_WINDOW`` or later.  NaN when
        ``converged`` is False.
    law_shifts : numpy.ndarray or None
        Each replica's learning margin at the plateau step nearest ``vertex`` from its law of
        ``law_draws`` draws, less the mean of the margins from its ``LAW_CHECK_FACTOR``
        disjoint parts of ``law_draws // LAW_CHECK_FACTOR`` draws
        (``dmft_margin(law_check=True)``; None otherwise): how far the margin still moves
        with the law's draws (docs/theory.md 8.10, "The law's draws").
    """

    delta: float
    t1: int | None
    margins: np.ndarray
    loo_margins: np.ndarray
    margin: float
    margin_se: float
    hessians: tuple
    converged: bool
    message: str
    vertex: float = float("nan")
    law_shifts: np.ndarray | None = None

    @property
    def law_shift(self) -> tuple[float, float]:
        """The mean of ``law_shifts`` and its standard error (the replicas are independent);
        ``(nan, nan)`` when they were not computed."""
        if self.law_shifts is None or not self.converged:
            return float("nan"), float("nan")
        v = np.asarray(self.law_shifts, dtype=float)
        return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))

    @property
    def sign(self) -> int:
        """``+1`` (a negative ``Theta*`` outlier), ``-1`` (none) or ``0`` (failed)."""
        return 0 if not self.converged else (1 if self.margin > 0 else -1)

    def mean(self, name: str) -> float:
        """The mean over the replicas of a number of their Hessians at ``t1``.

        Parameters
        ----------
        name : str
            One of :data:`HESSIAN_NUMBERS` (edges, the ``Theta*`` outlier and its overlap, the
            bottom, the margins).

        Returns
        -------
        float
            The mean; NaN when a replica has no such number (no ``Theta*`` outlier, say).

        Raises
        ------
        ValueError
            For another ``name``, or an evaluation that did not converge.
        """
        return float(np.mean(self._values(name)))

    def stderr(self, name: str) -> float:
        """The standard error of :meth:`mean`: the replicas' standard deviation over the square
        root of their number (independent draws).

        Parameters
        ----------
        name : str
            One of :data:`HESSIAN_NUMBERS`.

        Returns
        -------
        float
            The standard error; NaN when a replica has no such number.

        Raises
        ------
        ValueError
            For another ``name``, or an evaluation that did not converge.
        """
        v = self._values(name)
        return float(np.std(v, ddof=1) / np.sqrt(v.size))

    def _values(self, name):
        if name not in HESSIAN_NUMBERS:
            raise ValueError(f"name must be one of {HESSIAN_NUMBERS}; got {name!r}")
        if not self.converged:
            raise ValueError(f"the evaluation at delta = {self.delta:g} failed: {self.message}")
        return np.array([getattr(h, name) for h in self.hessians], dtype=float)


#: the numbers of a :class:`rmt.DMFTHessian` that :meth:`DMFTEvaluation.mean` averages
HESSIAN_NUMBERS = (
    "edge_lo",
    "edge_hi",
    "bottom",
    "theta_outlier",
    "theta_overlap",
    "theta_margin",
    "learning_margin",
)


#: the look-back and look-ahead of :func:`dmft_margin`'s default plateau rule, in steps.  The
#: rule reads the replicas' mean curves smoothed over ``2 CURVE_SMOOTHING + 1`` steps, far
#: smoother than one gradient-descent run (for which ``PlateauRule().window`` is 50); the solves
#: stop ``window + CURVE_SMOOTHING`` steps after the plateau, and the late steps are the dear
#: ones (a step costs ``O(t^2)``).  At least ``VERTEX_WINDOW``: the vertex's parabola needs them
PLATEAU_WINDOW = 20

#: the largest ``g_t / g_peak`` of a minimum of the mean curves that is a plateau
#: (``PlateauRule.minimum_depth`` of :func:`dmft_plateau_rule`): any minimum of the smoothed
#: mean gradient norm after the initial peak that the look-ahead confirms is a plateau,
#: however shallow.  The mean curves of
#: replicas are smooth on the scale of the look-ahead (docs/theory.md 8.10), so such a minimum
#: is the closest approach to a saddle: ``W1`` is the *first* one, even when the norm has
#: fallen only to a third of its peak
PLATEAU_DEPTH = PEAK_DROP


def dmft_plateau_rule() -> PlateauRule:
    """The plateau rule of DMFT curves (docs/theory.md 8.10): a look-ahead of
    ``PLATEAU_WINDOW`` steps, any confirmed minimum up to ``PLATEAU_DEPTH`` of the peak, and a
    flat loss at gradient descent's depth (0.2 of the peak; higher up, a slow stretch of the
    descent is not its end).

    Returns
    -------
    rmt.PlateauRule
    """
    return PlateauRule(window=PLATEAU_WINDOW, minimum_depth=PLATEAU_DEPTH)


#: a plateau that the rule finds by a flat loss, not by a minimum of the gradient norm, is the
#: end of a first phase that converges: the learning margin is read ``PLATEAU_WINDOW`` steps
#: later, and further on (the solve continued) until the drift still to come (the margin's
#: change over the last span times ``rho / (1 - rho)``, ``rho`` the gradient norm's decay over
#: it) is at most this fraction of its standard error (docs/theory.md 8.10)
SETTLED_FRACTION = 0.5

#: the default standard error goal of :func:`dmft_delta_nn`, relative to ``delta_NN``
STDERR_RTOL = 0.0075

#: the default draws of each replica's Hessian law (:func:`dmft_margin`, ``law_draws``)
LAW_DRAWS = 20_000
#: the second entry of the seed of those draws, ``[rng, LAW_STREAM, replica]``: a stream apart
#: from the solves' (the children of ``SeedSequence(rng)``)
LAW_STREAM = 7

#: the law check of :func:`dmft_margin` compares the margin from ``law_draws`` draws with the
#: mean margin of its ``LAW_CHECK_FACTOR`` disjoint parts
LAW_CHECK_FACTOR = 4
#: the two-sided level of :func:`dmft_delta_nn`'s test that the margin's bias from the law's
#: draws is within its error, shared by the evaluations it tests (Bonferroni): the chance of
#: withholding a value whose bias is at most its error.  A bias beyond the error, printed as a
#: value, is the worse mistake, so the level is not small (docs/theory.md 8.10)
LAW_CHECK_LEVEL = 0.05

#: test draws of the solves of :func:`dmft_margin`: the test loss enters neither the plateau
#: rule nor the Hessian, so few are kept
N_TEST = 1000


def _jackknife_se(loo) -> float:
    R = loo.size
    return float(np.sqrt((R - 1) / R * np.sum((loo - loo.mean()) ** 2)))


def _plateau(results, rule):
    """The plateau step of the mean curves of ``results`` and how the rule found it
    (``"local_min"``, ``"loss_flat"``), or ``(None, None)`` when the rule does not confirm one
    within the steps solved."""
    curves = ("train_loss", "grad_norm", "overlap")
    mean = [np.mean([getattr(r, k) for r in results], axis=0) for k in curves]
    phases = plateau_of_curves(*mean, rule)
    return (int(phases.plateau_step), phases.rule) if phases.detected else (None, None)


def dmft_margin(
    model,
    net,
    delta,
    *,
    replicas=4,
    n_samples=2500,
    rng=0,
    steps=300,
    max_steps=1200,
    lr=0.5,
    init_scale=1e-2,
    weight_decay=0.0,
    rule=None,
    progress=False,
    relu_smoothing=RELU_SMOOTHING,
    law_draws=LAW_DRAWS,
    first_replica=0,
    law_check=False,
) -> DMFTEvaluation:
    """The learning margin at the DMFT plateau, with its Monte Carlo error (docs/theory.md 8.10).

    The replicas are solved in lockstep (:func:`rmt.dynamics.dmft.dmft_replicas`) and stop at
    the plateau of their mean curves, ``t1``; each replica's Hessian at ``t1`` gives a
    learning margin.
    The standard error is the jackknife over the replicas, with the plateau itself found
    again on the mean curves of each leave-one-out set.

    Parameters
    ----------
    model : rmt.MultiIndexModel
    net : rmt.TwoLayerNet
    delta : float
        The sample ratio ``n / d``.
    replicas : int
        Independent replicas, each with its own draws; at least 2.
    n_samples : int
        Monte Carlo draws of each replica.
    rng : int
        Seed of the replicas' draws: the same draws at every ``delta``.
    steps, max_steps : int
        The first step budget, and the most it grows to (doubling) while the mean curves
        have no confirmed plateau; a solve is continued to the larger budget
        (:func:`rmt.dynamics.dmft.extend_replicas`), not solved again.
    lr, init_scale, weight_decay
        As in :func:`rmt.gradient_descent`.
    rule : rmt.PlateauRule, optional
        The plateau rule; default :func:`dmft_plateau_rule`.
        A plateau found by a minimum of the smoothed mean gradient norm is read at that
        minimum's vertex; one found by a flat loss (a first phase that converges without a
        minimum) ``rule.window`` steps later or further on, where the margin has settled
        (the solve continued as far as ``max_steps``).
    progress : bool
        A tqdm bar over the steps of each solve.
    relu_smoothing : float
        The width of the smoothed ReLU, as in :func:`rmt.dmft_gd` (other activations ignore it).
    law_draws : int or None
        Each replica's Hessian law at the plateau from this many fresh draws of the
        per-sample process at its solved kernels (:func:`rmt.dynamics.dmft.resampled_laws`,
        seeded from ``rng`` and the replica); None: from the solve's own ``n_samples`` draws.
    first_replica : int
        The index of the first replica (its seeds): a call with ``first_replica = R``
        extends one of ``R`` replicas with new, independent ones.
    law_check : bool
        Also read each replica's margin from each of the ``LAW_CHECK_FACTOR`` disjoint parts of
        its law's draws, at the plateau step nearest the vertex: ``law_shifts`` of the result
        (needs ``law_draws``).

    Returns
    -------
    DMFTEvaluation
        ``converged`` is False, with the reason, when no plateau came within ``max_steps``,
        a solve diverged, the spectrum at ``t1`` failed, or a first phase that converges
        without a minimum has a margin that still moves where it is read (more than
        ``SETTLED_FRACTION`` of its standard error still to come): never a number in their
        place.

    Raises
    ------
    TypeError, ValueError
        For bad input.

    Examples
    --------
    The learning margin is positive above ``delta_NN`` and negative below it:

    >>> import rmt
    >>> cfg = rmt.RunConfig()
    >>> [rmt.dmft_margin(cfg.model(), cfg.net(), x).margin > 0 for x in (1.5, 4.0)]  # doctest: +SKIP
    [False, True]
    """
    delta = check_positive_float(delta, "delta")
    steps = check_positive_int(steps, "steps", minimum=2)
    max_steps = check_positive_int(max_steps, "max_steps", minimum=steps)
    rule = dmft_plateau_rule() if rule is None else rule
    if not isinstance(rule, PlateauRule):
        raise TypeError(f"rule must be an rmt.PlateauRule or None; got {type(rule).__name__}")
    check_seed(rng)
    if law_draws is not None:
        law_draws = check_positive_int(law_draws, "law_draws", minimum=2)
    first = check_positive_int(first_replica, "first_replica", minimum=0)
    if law_check and law_draws is None:
        raise ValueError("law_check needs law_draws: the check reads a subset of the law's draws")
    if law_check and law_draws // LAW_CHECK_FACTOR < 2:
        raise ValueError(f"law_check needs law_draws >= {2 * LAW_CHECK_FACTOR}; got {law_draws}")

    def failed(message, t1=None, hs=()):
        nan = np.full(replicas, np.nan)
        return DMFTEvaluation(
            delta=delta,
            t1=t1,
            margins=nan,
            loo_margins=nan,
            margin=np.nan,
            margin_se=np.nan,
            hessians=tuple(hs),
            converged=False,
            message=message,
        )

    reps = None
    while True:
        if reps is not None and reps.extendable:
            # the same solve with the larger budget, its first steps not solved again
            reps = extend_replicas(reps, steps, progress)
        else:
            reps = dmft_replicas(
                model, net, delta, lr, steps, init_scale, replicas=replicas,
                weight_decay=weight_decay, n_samples=n_samples, n_test=N_TEST, rng=rng,
                progress=progress, stop_at_plateau=True, segment=rule,
                relu_smoothing=relu_smoothing, first_replica=first, resumable=True,
            )  # fmt: skip
        if not reps.converged:
            return failed(
                f"gradient descent diverges at lr = {lr:g} in the d -> inf limit (the DMFT "
                f"solve {reps.message}): no plateau at this step size"
            )
        t1, how = _plateau(reps.results, rule)
        if t1 is not None or steps >= max_steps:
            break
        unsettled = _not_settling(reps.results, rule, lr)
        if unsettled:
            return failed(f"no plateau of the mean DMFT curves within {steps} steps: {unsettled}")
        steps = min(2 * steps, max_steps)
    if t1 is None:
        return failed(f"no plateau of the mean DMFT curves within {max_steps} steps")
    laws = None
    if law_draws is not None:

        def laws(i, result, times):
            gen = np.random.default_rng([int(rng), LAW_STREAM, first + i])
            return resampled_laws(
                result, model, net, times, law_draws, gen, weight_decay, relu_smoothing
            )

    if how != "local_min":
        low = _lowest_after(reps.results, t1, rule.window)
        if low is None:  # the norm still falls at the end of the look-ahead: converging
            return _margins_when_settled(reps, net, t1, rule.window, max_steps, progress,
                                         weight_decay, failed, laws, law_check)  # fmt: skip
        t1 = low  # the loss went flat just before the norm's minimum
    return _margins_at_plateau(reps.results, net, t1, weight_decay, failed, laws, law_check)


#: the least fraction of the steps of the last plateau-rule window over which the smoothed
#: mean gradient norm falls, for a solve without a plateau to be continued with more steps
FALLING_FRACTION = 0.8
#: a smoothed mean gradient norm that ends at most this fraction of its peak has fallen to a
#: plateau that the rule has not confirmed yet (a local minimum is confirmed only once the norm
#: rises from it again): the solve is continued with more steps
LOW_OF_PEAK = 0.3


def _not_settling(results, rule, lr) -> str:
    """Why more steps would not bring a plateau ('' when they may): a first phase that is
    still under way has a smoothed mean gradient norm that falls step after step (at least
    ``FALLING_FRACTION`` of the steps of the last ``rule.window``) to below every value it had
    between its peak and that window, and one that has reached
    its plateau ends far below its peak (at most ``LOW_OF_PEAK`` of it), flat or rising from
    its bottom; one that rises back towards its peak, or wanders at a high level (gradient
    descent oscillating at a step size it cannot settle at), will not reach a plateau by going
    on, and each further step costs ``O(t^2)``."""
    g = _mean_norm(results)
    last = np.diff(g[-rule.window - 1 :])
    # the steps between the peak and the last window: a first phase under way ends below them
    # all, while a norm that wanders has falling stretches that stay above its earlier lows
    earlier = g[int(np.argmax(g)) if g.size else 0 : -rule.window - 1]
    new_low = earlier.size == 0 or g[-1] < earlier.min()
    if last.size and np.mean(last < 0) >= FALLING_FRACTION and new_low:
        return ""
    if g.size and g[-1] <= LOW_OF_PEAK * np.max(g):
        return ""
    peak = float(np.max(g)) if g.size else float("nan")
    low = f", above its low of {earlier.min() / peak:.2f} since the peak" if not new_low else ""
    return (
        f"the smoothed mean gradient norm is not falling at the end ({g[-1] / peak:.2f} of its "
        f"peak{low}; it fell over {np.mean(last < 0):.0%} of the last {last.size} steps): "
        f"gradient descent does not settle at lr = {lr:g}"
    )


#: the half-width of the window of steps around the rule's plateau ``t1`` over which a
#: least-squares parabola through the smoothed mean gradient norm locates its minimum
VERTEX_WINDOW = 20


def _mean_norm(results, drop=None) -> np.ndarray:
    """The smoothed mean gradient norm of ``results`` (leaving out replica ``drop``)."""
    keep = [r.grad_norm for i, r in enumerate(results) if i != drop]
    return smoothed_curve(np.mean(keep, axis=0))


def _vertex(results, t1, drop=None) -> float:
    """The minimum of the least-squares parabola through the smoothed mean gradient norm of
    ``results`` (leaving out replica ``drop``) over ``t1 +- VERTEX_WINDOW``; ``t1`` itself (the
    rule's minimum) when the parabola is not convex or its minimum lies outside that window."""
    g = _mean_norm(results, drop)
    lo, hi = max(t1 - VERTEX_WINDOW, 0), min(t1 + VERTEX_WINDOW, g.size - 1)
    ts = np.arange(lo, hi + 1)
    if ts.size < 3:
        return float(t1)
    a, b, _ = np.polyfit(ts - t1, g[ts], 2)
    v = t1 - b / (2 * a) if a > 0 else np.nan
    return float(v) if lo <= v <= hi else float(t1)


def _hessians_at(results, net, times, weight_decay, laws=None, full=()):
    """Each replica's Hessian at each step of ``times``, ``{t: [DMFTHessian per replica]}``,
    and each replica's laws there (``laws(i, result, times)``, or empty dicts: each law then
    from the solve's own draws).  Only at the steps of ``full`` is the right edge of the bulk
    computed; elsewhere the Hessians carry what the learning margin needs."""
    if laws is None:
        by_replica = [{} for _ in results]
    else:
        by_replica = [laws(i, r, times) for i, r in enumerate(results)]
    at = {
        t: [
            hessian_at_step(
                r, net, t, "mean curves", weight_decay, by_replica[i].get(t), right_edge=t in full
            )
            for i, r in enumerate(results)
        ]
        for t in times
    }
    return at, by_replica


def _failed_spectra(at, times) -> str:
    """The first three failures among the Hessians ``at[t]``, ``t`` in ``times`` ('' if none)."""
    bad = [f"replica {i} at step {t}: {h.message}" for t in times
           for i, h in enumerate(at[t]) if not h.converged]  # fmt: skip
    return "; ".join(bad[:3])


def _margins_at_plateau(results, net, t1, weight_decay, failed, laws=None, law_check=False):
    """Each replica's learning margin at the vertex of the plateau, and the jackknife values
    (docs/theory.md 8.10).

    ``laws(i, result, times)``, when given, returns replica ``i``'s laws at ``times`` (a dict
    by step); else each law is :func:`rmt.dynamics.dmft.dmft_law` of the solve's own draws.
    ``law_check``: also the shifts of :attr:`DMFTEvaluation.law_shifts` (needs ``laws``)."""
    R = len(results)
    v = _vertex(results, t1)
    loo_v = [_vertex(results, t1, drop=r) for r in range(R)]
    first = int(np.floor(min(v, *loo_v)))
    last = min(int(np.ceil(max(v, *loo_v))), results[0].steps - 1)
    rep = int(np.clip(round(v), first, last))
    # the steps that the linear interpolations at v and at each leave-one-out vertex read
    times = sorted({min(int(np.floor(x)) + k, last) for x in (v, *loo_v) for k in (0, 1)} | {rep})
    at, by_replica = _hessians_at(results, net, times, weight_decay, laws, full=(rep,))
    hs = at[rep]
    bad = _failed_spectra(at, times)
    if bad:
        return failed(bad, t1, hs)
    M = np.array([[h.learning_margin for h in at[t]] for t in times]).T  # (R, steps)
    margins = np.array([np.interp(v, times, M[i]) for i in range(R)])
    loo = np.array([np.interp(loo_v[r], times, np.delete(M, r, axis=0).mean(axis=0))
                    for r in range(R)])  # fmt: skip
    shifts = None
    if law_check:
        shifts = np.array([_law_shift(r, net, rep, weight_decay, by_replica[i][rep], at[rep][i])
                           for i, r in enumerate(results)])  # fmt: skip
    return DMFTEvaluation(
        delta=results[0].delta,
        t1=t1,
        margins=margins,
        loo_margins=loo,
        margin=float(margins.mean()),
        margin_se=_jackknife_se(loo),
        hessians=tuple(hs),
        converged=True,
        message=f"plateau of the mean curves at step {t1} (vertex {v:.1f})",
        vertex=v,
        law_shifts=shifts,
    )


def _lowest_after(results, t1, window):
    """The step of the least smoothed mean gradient norm over ``t1 .. t1 + window`` when the
    norm rises again before the end of those steps (a minimum that the loss's flatness
    anticipated), else None (the norm still falls)."""
    g = _mean_norm(results)[t1 : t1 + window + 1]
    low = int(np.argmin(g))
    return t1 + low if low < g.size - 1 else None


#: the one-sided t statistic by which the smoothed norm must rise after a minimum found while a
#: converging phase is continued, for that minimum to be a plateau: near the draws' noise floor
#: the mean norm wiggles by as much as a shallow escape rises (docs/theory.md 8.10)
ESCAPE_T = 3.0


def _escape_minimum(results, t1, b, window):
    """The step of the least smoothed mean gradient norm over ``t1 .. b`` when it is followed
    there by ``window`` steps and by a rise beyond the draws' noise; else None.

    The replicas are split in two halves (even and odd).  On the mean norm of one half, the
    least step over ``t1 .. b`` (with ``window`` steps after it) and the highest step after it
    are chosen; on the other half's replicas, the rise of their own smoothed norms between
    those two steps must exceed ``ESCAPE_T`` standard errors (the choice made on independent
    draws, so the test is not biased by it).  Both halves must confirm each other's rise;
    with fewer than 4 replicas nothing is confirmed."""
    G = np.array([smoothed_curve(r.grad_norm) for r in results])
    halves = (G[0::2], G[1::2])
    for pick, test in (halves, halves[::-1]):
        if test.shape[0] < 2:
            return None
        g = pick.mean(axis=0)
        low = t1 + int(np.argmin(g[t1 : b + 1]))
        if low + window > b:
            return None
        top = low + int(np.argmax(g[low : b + 1]))
        rise = test[:, top] - test[:, low]
        if not rise.mean() > ESCAPE_T * rise.std(ddof=1) / np.sqrt(rise.size):
            return None
    g = G.mean(axis=0)
    return t1 + int(np.argmin(g[t1 : b + 1]))


def _margins_when_settled(reps, net, t1, window, max_steps, progress, weight_decay, failed,
                          laws=None, law_check=False):  # fmt: skip
    """Each replica's learning margin along a first phase that converges, once it has settled,
    and the jackknife values; a failure when it has not within ``max_steps`` (docs/theory.md
    8.10).

    The smoothed mean gradient norm has no minimum near the rule's ``t1`` (found by a flat
    loss): ``W1`` is the limit of the first phase.  The margins are read at steps ``a = t1`` and
    ``b = t1 + window``; with ``Delta`` the mean margin's change between them and
    ``rho = g(b) / g(a)`` the decay of the smoothed mean gradient norm, a margin that
    approaches its limit as the norm does (geometrically) has ``|Delta| rho / (1 - rho)`` of its
    drift still to come.  The margins at ``b`` are the value when that is at most
    ``SETTLED_FRACTION`` of their standard error; else the replicas are continued
    (:func:`rmt.dynamics.dmft.extend_replicas`) and read again, from ``a = b``, at the step
    where the drift still to come would reach that goal at the norm's rate of decay over the
    last span (:func:`_settling_step`), kept between ``b + (b - a)`` and ``b + 2 (b - a)``.
    When the continued norm rises again from a minimum by more than its noise
    (:func:`_escape_minimum`), that minimum is the plateau after all.  While the norm known
    so far has a minimum ``low`` before its last step ``l``, the replicas are continued first
    to ``max(low + 2 window, l + window)``, where an escape from it can show, and tested
    there (the margins are read at the same steps either way).  ``laws`` and ``law_check`` as
    in :func:`_margins_at_plateau`."""
    R = len(reps.results)
    at, law = {}, [{} for _ in range(R)]

    def read(results, times):  # the Hessians at new steps; the laws' draws are causal
        new = [t for t in times if t not in at]
        if new:
            got, laws_got = _hessians_at(results, net, new, weight_decay, laws, full=times[-1:])
            at.update(got)
            for i, d in enumerate(laws_got):
                law[i].update(d)

    a, b = t1, t1 + window
    why, hs = "", ()  # the solve stopped at the plateau holds step b = t1 + window
    while True:
        need = b + CURVE_SMOOTHING + 1  # the smoothed norm known at b
        while reps.results[0].steps < need:
            if need > max_steps:
                return failed(f"no plateau reached within {max_steps} steps: {why}", t1, hs)
            # a minimum of the norm before the last step known: continue first to where an
            # escape from it can show
            g = _mean_norm(reps.results)
            last = g.size - 1
            low = t1 + int(np.argmin(g[t1:]))
            soon = max(low + 2 * window, last + window) + CURVE_SMOOTHING + 1
            reps = extend_replicas(
                reps, min(need, soon) if low < last else need, progress, stop_at_plateau=False
            )
            if not reps.converged:
                return failed(f"the DMFT solve continued past step {t1} {reps.message}", t1)
            escaped = _escape_minimum(
                reps.results, t1, reps.results[0].steps - CURVE_SMOOTHING - 1, window
            )
            if escaped is not None:  # the norm rose again from a minimum: a plateau after all
                return _margins_at_plateau(
                    reps.results, net, escaped, weight_decay, failed, laws, law_check
                )
        read(reps.results, (a, b))
        hs = tuple(at[b])
        bad = _failed_spectra(at, (a, b))
        if bad:
            return failed(bad, t1, hs)
        before = np.array([h.learning_margin for h in at[a]])
        margins = np.array([h.learning_margin for h in hs])
        loo = np.array([np.delete(margins, r).mean() for r in range(R)])
        se = _jackknife_se(loo)
        change = float(margins.mean() - before.mean())
        g = _mean_norm(reps.results)
        rho = float(g[b] / g[a])
        to_come = abs(change) * rho / (1 - rho) if rho < 1 else (np.inf if change else 0.0)
        if to_come <= SETTLED_FRACTION * se:
            break
        if rho < 1:
            drift = (
                f"the norm fell to {rho:.2f} of its value and the learning margin moved by "
                f"{change:+.2g}, so about {to_come:.2g} of its drift is still to come"
            )
        else:
            drift = (
                f"the norm rose to {rho:.2f} of its value without an escape beyond its noise "
                f"and the learning margin moved by {change:+.2g}"
            )
        why = (
            f"the smoothed mean gradient norm falls without a minimum (the loss is flat from "
            f"step {t1}); from step {a} to {b} {drift}, more than {SETTLED_FRACTION:g} of its "
            f"standard error {se:.2g}"
        )
        # the next read where the drift would have settled at the norm's last rate of decay,
        # within one to two spans; a norm levelling off before an escape reads as a slow
        # decay, so a far prediction is not a refusal: the doubling read, and the escape test
        span = b - a
        settles = _settling_step(span, rho, to_come, SETTLED_FRACTION * se)
        a, b = b, b + (2 * span if settles is None else min(max(settles, span), 2 * span))
    shifts = None
    if law_check:
        shifts = np.array([_law_shift(r, net, b, weight_decay, law[i][b], hs[i])
                           for i, r in enumerate(reps.results)])  # fmt: skip
    return DMFTEvaluation(
        delta=reps.results[0].delta,
        t1=t1,
        margins=margins,
        loo_margins=loo,
        margin=float(margins.mean()),
        margin_se=se,
        hessians=hs,
        converged=True,
        message=f"loss of the mean curves flat from step {t1}, margin settled at step {b} "
        f"(about {to_come:.2g} of its drift still to come)",
        vertex=float(b),
        law_shifts=shifts,
    )


def _settling_step(span, rho, to_come, goal):
    """Steps after a read until the margin's drift still to come falls to ``goal``, if the
    gradient norm goes on decaying at its rate over the last ``span`` steps (``rho`` of its
    value over them) and the drift with it, as :func:`_margins_when_settled` assumes; None
    when the norm did not fall (``rho >= 1``) or no positive goal is set.

    A norm whose decay slows (the usual way a converging phase approaches its limit) settles
    the margin no sooner than this (docs/theory.md 8.10)."""
    if not (0 < rho < 1) or not goal > 0 or not np.isfinite(to_come):
        return None
    if to_come <= goal:
        return 0
    return int(np.ceil(span * np.log(goal / to_come) / np.log(rho)))


def _law_shift(result, net, t, weight_decay, law, hessian) -> float:
    """The learning margin of ``hessian`` (from ``law``) less the mean margin of the
    ``LAW_CHECK_FACTOR`` disjoint parts of ``N // LAW_CHECK_FACTOR`` draws of ``law`` (the
    mean of the parts has the bias of one part and half the spread of one part's margin);
    NaN when a part gives none."""
    n = law.zhat.shape[0] // LAW_CHECK_FACTOR
    coarse = []
    for i in range(LAW_CHECK_FACTOR):
        part = SpikeLaw(
            law.zhat[i * n : (i + 1) * n], law.D[i * n : (i + 1) * n], None, law.theta_dims,
            shift=law.shift, kind=law.kind, unbounded_reason=law.unbounded_reason,
        )  # fmt: skip
        h = hessian_at_step(result, net, t, "mean curves", weight_decay, part, right_edge=False)
        if not h.converged:
            return float("nan")
        coarse.append(h.learning_margin)
    return float(hessian.learning_margin - np.mean(coarse))


@dataclass(frozen=True, kw_only=True)
class DMFTThreshold:
    """``delta_NN`` of the DMFT (:func:`dmft_delta_nn`).

    Attributes
    ----------
    value : float
        The root of the mean learning margin (NaN when ``converged`` is False): a Newton step
        in ``log delta`` from the full evaluation at the pilot's root, or interpolated
        linearly between two full evaluations that straddle it (``message`` says which).
    stderr : float
        Its Monte Carlo standard error: the jackknife over the replicas.
    lo, hi : float
        An interval known to hold the root: the closest evaluated ``delta`` with a negative
        and a positive mean margin (after a Newton step: the full evaluation, the pilot's
        point of the other sign, and the value).
    converged : bool
        Whether the sign change was bracketed and the root found to ``rtol``.
    message : str
        Why the search failed, or how it ended.
    evaluations : dict
        Every ``delta`` evaluated with ``n_samples`` draws, mapped to its
        :class:`DMFTEvaluation` (failed ones included).
    replicas, n_samples : int
        The replicas of the final evaluation (more than those of the others after a
        top-up; see ``stderr_rtol`` of :func:`dmft_delta_nn`) and the draws of each.
    pilot_evaluations : dict
        The evaluations of the pilot search (fewer draws), the same way.
    no_transition : bool
        True when the network cannot have a negative outlier at any ``delta`` (its Hessian is
        positive semidefinite at every ``W``: ``TwoLayerNet.hessian_is_psd``); then nothing
        was solved and ``message`` says why.
    law_shift, law_shift_se : float
        At the evaluation nearest the root: the mean change of the learning margin from
        laws of a quarter of the draws (the mean over the four disjoint quarters) to all of
        them, and its standard error (:attr:`DMFTEvaluation.law_shifts`); NaN when not
        computed.  A change significantly larger than the margin's standard error makes the
        result ``converged = False``.
    d : int or None
        The input dimension whose samples made each law (``d`` of :func:`dmft_delta_nn`:
        the value at that size); None: the limit.
    """

    value: float
    stderr: float
    lo: float
    hi: float
    converged: bool
    message: str
    evaluations: dict = field(default_factory=dict)
    replicas: int = 0
    n_samples: int = 0
    pilot_evaluations: dict = field(default_factory=dict)
    no_transition: bool = False
    law_shift: float = float("nan")
    law_shift_se: float = float("nan")
    d: int | None = None


#: why a network whose Hessian is positive semidefinite everywhere has no ``delta_NN``
PSD_REASON = (
    "no negative Theta* outlier at any delta: with {act} (sigma'' = 0 almost everywhere) and "
    "the {loss} loss (convex in the output) the Hessian is positive semidefinite at every W "
    "(docs/theory.md 8.11)"
)


def _interpolated_root(neg, pos):
    """The root of the line through the mean margins at ``neg`` and ``pos`` (signs opposite),
    and its jackknife standard error (from the leave-one-out margins at both points)."""

    def root(g_neg, g_pos):
        return neg.delta + (pos.delta - neg.delta) * g_neg / (g_neg - g_pos)

    value = root(neg.margin, pos.margin)
    loo = np.array([root(a, b) for a, b in zip(neg.loo_margins, pos.loo_margins)])
    return float(value), _jackknife_se(loo)


class _Search:
    """The evaluations of one search: ``delta -> DMFTEvaluation``, in the order tried."""

    def __init__(self, evaluate, max_evals, progress):
        self.evaluate, self.max_evals, self.progress = evaluate, max_evals, progress
        self.evals = {}

    def __call__(self, delta) -> DMFTEvaluation:
        if len(self.evals) >= self.max_evals:
            raise _OutOfEvaluations
        ev = self.evaluate(float(delta))
        self.evals[float(delta)] = ev
        if self.progress is not None:
            self.progress(ev)
        return ev

    def failures(self) -> str:
        """The failed evaluations, one entry per kind of failure (messages that differ only in
        their numbers): the deltas, then the first message of that kind."""
        kinds = {}
        for x, ev in self.evals.items():
            if not ev.sign:
                key = re.sub(r"[-+]?\d[\d.e+-]*", "#", ev.message)
                kinds.setdefault(key, ([], ev.message))[0].append(f"{x:.4g}")
        return " | ".join(f"delta = {', '.join(xs)}: {msg}" for xs, msg in kinds.values())


class _OutOfEvaluations(Exception):
    """The search used its ``max_evals`` evaluations."""


def _bracket(search, start, lo, hi):
    """Walk from ``start`` within ``[lo, hi]`` to the sign change of the mean margin: a first
    step of a factor 1.5 (down while the margin is positive, up while it is negative), then
    secant steps through the last two points that aim 10% past their root (at most a factor
    2 a step, and a factor 2 when the secant points the wrong way).  Points far below the
    threshold, where the plateau is long and a solve slow, are so avoided.  A failed point is
    replaced once by the geometric midpoint towards the last good one.  Returns
    ``(ev_neg, ev_pos)`` or ``None``."""
    x, last = start, None
    while True:
        ev = search(x)
        if not ev.sign and last is not None:
            ev = search(np.sqrt(x * last.delta))
        if not ev.sign:
            if last is None and x < hi:  # the first point failed: more data, then
                x = min(2 * x, hi)
                continue
            return None
        if last is not None and last.sign != ev.sign:
            return (ev, last) if ev.sign < 0 else (last, ev)
        nxt = _next_point(ev, last, search.evals)
        nxt = min(max(nxt, lo), hi)
        if nxt == ev.delta:
            return None
        x, last = nxt, ev


def _next_point(ev, last, evals=None) -> float:
    """The next point of :func:`_bracket` after ``ev`` (``last`` the point before, or None;
    ``evals`` every evaluation so far).  When the secant through ``ev`` and ``last`` does not
    rise (two close points whose margins differ by less than their noise), the secant
    through ``ev`` and the farthest good point is taken instead."""
    x, down = ev.delta, ev.sign > 0
    plain = x / 1.5 if down else x * 1.5
    if last is None:
        return plain
    slope = (ev.margin - last.margin) / (x - last.delta)
    if not slope > 0 and evals:
        far = max((e for e in evals.values() if e.sign), key=lambda e: abs(e.delta - x))
        if far.delta != x:
            slope = (ev.margin - far.margin) / (x - far.delta)
    if not slope > 0:  # the margin grows with delta near a BBP point; else plain steps
        return x / 2 if down else 2 * x
    root = x - ev.margin / slope
    aim = root - 0.1 * (x - root)
    return float(np.clip(aim, x / 2, 2 * x))


def _refine(search, neg, pos, rtol):
    """Regula falsi with the Illinois rule on the mean margin until ``pos / neg`` (or its
    inverse) is within ``1 + rtol``; a failed point is replaced by the geometric midpoint.
    Returns the final ``(neg, pos)`` and whether the width was reached."""
    g_neg, g_pos, side = neg.margin, pos.margin, 0
    while max(pos.delta, neg.delta) / min(pos.delta, neg.delta) > 1 + rtol:
        a, b = neg.delta, pos.delta
        x = a + (b - a) * g_neg / (g_neg - g_pos)
        x = float(np.clip(x, min(a, b) + 0.1 * abs(b - a), max(a, b) - 0.1 * abs(b - a)))
        ev = search(x)
        if not ev.sign:
            ev = search(np.sqrt(a * b))
            if not ev.sign:
                return neg, pos, False
        if ev.sign < 0:
            neg, g_neg = ev, ev.margin
            g_pos = g_pos / 2 if side < 0 else g_pos
            side = -1
        else:
            pos, g_pos = ev, ev.margin
            g_neg = g_neg / 2 if side > 0 else g_neg
            side = 1
    return neg, pos, True


@adaptive_threads
def dmft_delta_nn(
    model,
    net,
    lo=0.5,
    hi=64.0,
    *,
    start=4.0,
    rtol=0.1,
    max_evals=12,
    replicas=8,
    n_samples=2500,
    pilot=4,
    law_draws=LAW_DRAWS,
    stderr_rtol=STDERR_RTOL,
    max_replicas=None,
    rng=0,
    d=None,
    progress=None,
    **kwargs,
) -> DMFTThreshold:
    """The asymptotic ``delta_NN``: where a negative ``Theta*`` outlier appears in the Hessian
    at the DMFT plateau, with its Monte Carlo error (docs/theory.md 8.10).

    Parameters
    ----------
    model : rmt.MultiIndexModel
    net : rmt.TwoLayerNet
    lo, hi : float
        The range searched.
    start : float
        The first ``delta`` (clipped into ``[lo, hi]``); the search walks from it (a factor
        1.5, then secant steps of at most a factor 2) until the mean learning margin changes
        sign, then refines the root by regula falsi.
    rtol : float
        The search stops when the bracket's ends are within a factor ``1 + rtol``; the value
        is interpolated linearly between them.
    max_evals : int
        The most ``delta`` evaluated (each costs ``replicas`` DMFT solves).
    replicas, n_samples, rng
        As in :func:`dmft_margin`: independent replicas of ``n_samples`` draws each, seeded
        from ``rng``, the same at every ``delta``.
    pilot : int
        The walk and the refinement use ``n_samples // pilot`` draws a replica (and
        ``law_draws // pilot`` for the laws); then one evaluation with ``n_samples`` draws at
        the pilot's root gives the value by a Newton step with the pilot's slope (when that
        step exceeds ``NEWTON_STEP``, further full evaluations go past the Newton value
        until one has the other sign, and the value is interpolated between the two closest
        that straddle the root, without further replicas).  ``pilot=1``: every
        evaluation with ``n_samples`` draws, the value interpolated.
    law_draws : int or None
        As in :func:`dmft_margin`: the fresh draws of each replica's Hessian law.
    stderr_rtol : float or None
        After the Newton step, further replicas (new seeds) are solved at its ``delta`` until
        the standard error is at most ``stderr_rtol`` times the value, or ``max_replicas``
        are used; None: no further replicas.  The error falls like ``R^{-1/2}``, so each
        batch is sized by that law.
    max_replicas : int, optional
        The most replicas of that final evaluation (default ``4 * replicas``).
    d : int, optional
        The input dimension of a finite network: at each ``delta`` every replica's Hessian
        law comes from ``n = ceil(delta d)`` fresh draws, the samples of that network, in
        place of ``law_draws`` (the pilot's too), and the law check is not made.  Where the
        left edge of the law is set by rare draws (the square loss with phase retrieval's
        heavy-tailed labels), it moves out as the sample grows, and so does the threshold
        that a network of that size shows (docs/theory.md 8.10): this is the value at the
        size asked.  None: the limit, with the law check.
    progress : callable, optional
        Called with each :class:`DMFTEvaluation` as it is found.
    **kwargs
        Passed to :func:`dmft_margin` (``steps``, ``max_steps``, ``lr``, ``init_scale``, ...).

    Returns
    -------
    DMFTThreshold
        ``converged`` is False, with the reason and every evaluation, when no sign change was
        bracketed in ``[lo, hi]``, an evaluation failed where the search needed it,
        ``max_evals`` ran out, or the margin of the full evaluation at the pilot's root
        (without a pilot: where the value is read) still moves with the number of the law's
        draws (``law_shift``: a change from parts of a quarter of
        ``law_draws`` to all of them that a test at level ``LAW_CHECK_LEVEL`` finds larger
        than the margin's standard error); ``value`` and ``stderr`` are then NaN.  A network
        whose Hessian is positive semidefinite at every ``W`` (``net.hessian_is_psd``: ReLU
        with a convex loss) is answered without a solve: ``no_transition`` is True.

    Raises
    ------
    TypeError, ValueError
        For bad input, before any solve.

    Examples
    --------
    Phase retrieval, softplus/Huber, m = 2 (about a minute on two cores;
    ``benchmarks/bench_dmft_threshold.py`` times it):

    >>> import rmt
    >>> cfg = rmt.RunConfig()
    >>> res = rmt.dmft_delta_nn(cfg.model(), cfg.net())  # doctest: +SKIP
    >>> res.converged, round(res.value, 1), res.stderr < 0.02  # doctest: +SKIP
    (True, 2.6, True)
    """
    lo, hi = check_positive_float(lo, "lo"), check_positive_float(hi, "hi")
    if not hi > lo:
        raise ValueError(f"hi must exceed lo; got lo = {lo!r}, hi = {hi!r}")
    start = min(max(check_positive_float(start, "start"), lo), hi)
    rtol = check_positive_float(rtol, "rtol")
    max_evals = check_positive_int(max_evals, "max_evals", minimum=2)
    replicas = check_positive_int(replicas, "replicas", minimum=2)
    check_seed(rng)  # validate before any solve
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable or None; got {type(progress).__name__}")
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    pilot = check_positive_int(pilot, "pilot")
    if law_draws is not None:
        law_draws = check_positive_int(law_draws, "law_draws", minimum=2)
    if d is not None:
        d = check_positive_int(d, "d", minimum=2)
    if stderr_rtol is not None:
        stderr_rtol = check_positive_float(stderr_rtol, "stderr_rtol")
    max_replicas = check_positive_int(
        4 * replicas if max_replicas is None else max_replicas, "max_replicas", minimum=replicas
    )
    if getattr(net, "hessian_is_psd", False):  # weight decay >= 0 keeps it so
        check_nonneg_float(kwargs.get("weight_decay", 0.0), "weight_decay")
        reason = PSD_REASON.format(act=net.activation, loss=net.loss)
        return _no_value(lo, hi, reason, replicas=0, n_samples=0, no_transition=True)
    check = law_draws is not None and d is None
    laws_at = _law_draws_at(law_draws, d)
    evaluate = _evaluator(model, net, replicas, n_samples, laws_at, rng, kwargs, check)
    full = search = _Search(evaluate, max_evals, progress)
    if pilot > 1:
        few = max(n_samples // pilot, 2)
        few_laws_at = _law_draws_at(law_draws, d, pilot)
        evaluate = _evaluator(model, net, replicas, few, few_laws_at, rng, kwargs)
        search = _Search(evaluate, max_evals, progress)

    def failed(message, used=replicas, law_shift=(np.nan, np.nan)):
        return _no_value(
            lo, hi, message, evaluations=full.evals, replicas=used, n_samples=n_samples,
            pilot_evaluations=search.evals, law_shift=law_shift[0], law_shift_se=law_shift[1],
            d=d,
        )  # fmt: skip

    def moved_with_law(evs, used=replicas):
        """No value when the law check finds the margins of ``evs`` still moving, else None."""
        moving = _law_not_converged(evs) if check else ""
        return failed(moving, used, _nearest(evs).law_shift) if moving else None

    try:
        ends = _bracket(search, start, lo, hi)
        if ends is None:
            return failed(
                f"no sign change of the learning margin found in [{lo:g}, {hi:g}]: "
                f"{search.failures() or _same_sign(search.evals)}"
            )
        neg, pos, done = _refine(search, *ends, rtol)
        newton = first = None
        if done and pilot > 1:
            newton, guess, first = _newton(full, search.evals, neg, pos)
            if newton is None:  # the pilot missed the root: bracket it with full draws
                guess_se = _interpolated_root(neg, pos)[1]
                guess = min(max(guess, lo), hi)
                if first is None:
                    neg, pos, done = _straddle(full, guess, guess_se, lo, hi)
                else:  # the law check at the pilot's root, then one point past the guess
                    refused = moved_with_law([first])
                    if refused:
                        return refused
                    neg, pos, done = _past_guess(full, first, guess, guess_se, lo, hi)
                if done:  # moved out: narrow again with the full draws
                    neg, pos, done = _refine(full, neg, pos, rtol)
    except _OutOfEvaluations:
        return failed(f"{max_evals} evaluations did not bracket the root to rtol = {rtol:g}")
    if not done:
        return failed(
            f"the root near [{neg.delta:.4g}, {pos.delta:.4g}] was not bracketed: "
            f"{full.failures() or search.failures() or 'the margin kept its sign'}"
        )
    used = replicas
    if newton is not None:

        def more(delta, count, start):
            return dmft_margin(
                model, net, delta, replicas=count, n_samples=n_samples, rng=rng,
                law_draws=laws_at(delta), first_replica=start, law_check=check, **kwargs,
            )  # fmt: skip

        ev, value, se, a, b, note = _top_up(more, newton, stderr_rtol, max_replicas, progress)
        full.evals[ev.delta], used = ev, ev.margins.size
        how = f"a Newton step from delta = {newton[3]:.4g}, {used} replicas"
        how += note
    else:
        ev = None
        value, se = _interpolated_root(neg, pos)
        a, b = sorted((neg.delta, pos.delta))
        how = "interpolated"
    # the law check reads the full evaluation at the pilot's root (with its further replicas)
    # or, without one, the two that give the value; a missed root's was read above
    checked = [ev] if ev is not None else [first] if first is not None else [neg, pos]
    shift, shift_se = _nearest(checked).law_shift
    refused = moved_with_law(checked, used) if first is None else None
    if refused:
        return refused
    return DMFTThreshold(
        value=value,
        stderr=se,
        lo=a,
        hi=b,
        converged=True,
        message=f"root of the learning margin between delta = {a:.4g} and {b:.4g} ({how})",
        evaluations=full.evals,
        replicas=used,
        n_samples=n_samples,
        pilot_evaluations=search.evals if pilot > 1 else {},
        law_shift=shift,
        law_shift_se=shift_se,
        d=d,
    )


def _nearest(evs):
    """The evaluation whose mean margin is closest to 0 (the one nearest the root)."""
    return min(evs, key=lambda e: abs(e.margin))


def _law_not_converged(evs) -> str:
    """Why the margins of ``evs`` (the evaluations that give the value) still move with the
    law's draws, or ''.  For each, the mean shift ``s`` of :attr:`DMFTEvaluation.law_shifts`,
    with its standard error ``e`` over the ``n`` replicas, is tested against the margin's
    standard error ``se``: the margin has not converged when ``|s| - z e > se``, ``z`` the
    two-sided quantile of Student's t with ``n - 1`` degrees of freedom (``e`` is estimated
    from ``n`` values) at ``LAW_CHECK_LEVEL`` shared by the ``len(evs)`` tests (docs/theory.md
    8.10)."""
    p = 1.0 - LAW_CHECK_LEVEL / (2 * len(evs))
    for ev in evs:
        if ev.law_shifts is None:
            continue
        shift, err = ev.law_shift
        n = int(ev.law_shifts.size)
        z = float(stdtrit(max(n - 1, 1), p))
        if not np.isfinite(shift):
            return (
                f"the law check failed at delta = {ev.delta:.4g}: a law of a quarter of the "
                "draws gave no learning margin"
            )
        if abs(shift) - z * err > ev.margin_se:
            return (
                f"not converged in the law's draws: at delta = {ev.delta:.4g} the learning "
                f"margin moves by {shift:+.3g} +- {err:.2g} ({n} replicas) from quarters of "
                f"the law's draws to all of them, against its standard error "
                f"{ev.margin_se:.2g}: the left edge of the Hessian's law at W1 is set by rare "
                "draws that the law does not resolve; d = ... gives the value at a finite size "
                "(docs/theory.md 8.10)"
            )
    return ""


def _no_value(lo, hi, message, **fields) -> DMFTThreshold:
    """A :class:`DMFTThreshold` without a number: the searched range, the reason, ``fields``."""
    return DMFTThreshold(
        value=np.nan, stderr=np.nan, lo=lo, hi=hi, converged=False, message=message, **fields
    )


def _same_sign(evals) -> str:
    """Why a walk that met no failure found no sign change: the sign it saw, and where."""
    xs = sorted(evals)
    if all(evals[x].sign > 0 for x in xs):
        return (
            f"a negative Theta* outlier already at every delta tried, down to {xs[0]:.4g} "
            "(delta_NN lies below the range)"
        )
    return f"no negative Theta* outlier at any delta tried, up to {xs[-1]:.4g}"


def _law_draws_at(law_draws, d, part=1):
    """The law's draws of an evaluation as a function of ``delta``: the ``n = ceil(delta d)``
    samples of a network of input dimension ``d`` when it is given (whatever the part), else
    ``law_draws // part`` (at least 2; None: each law from the solve's own draws)."""
    if d is not None:
        return lambda delta: max(int(np.ceil(delta * d - 1e-9)), 2)
    count = None if law_draws is None else max(law_draws // part, 2)
    return lambda delta: count


def _evaluator(model, net, replicas, n_samples, laws_at, rng, kwargs, law_check=False):
    def evaluate(delta):
        return dmft_margin(
            model, net, delta, replicas=replicas, n_samples=n_samples, rng=rng,
            law_draws=laws_at(delta), law_check=law_check, **kwargs,
        )  # fmt: skip

    return evaluate


#: the largest Newton step from the pilot's root, in ``log delta``, that :func:`_newton`
#: takes; a larger one means the pilot missed the root, and full evaluations bracket it
NEWTON_STEP = 0.05

#: the pilot's evaluations within this factor of its root enter the slope of the margin in
#: ``log delta`` (:func:`_pilot_slope`)
SLOPE_SPAN = 2.0


def _pilot_slope(pilot, r0, neg, pos):
    """The slope in ``log delta`` of the pilot's mean margin at its root ``r0``, and its
    leave-one-out values: the least-squares line through every converged pilot evaluation
    within a factor ``SLOPE_SPAN`` of ``r0`` (the bracket's ends ``neg`` and ``pos`` among
    them).  Near a BBP point the margin is close to linear in ``log delta``; the far points
    keep the slope from resting on two close, noisy ones."""
    evs = {
        e.delta: e
        for e in pilot.values()
        if e.sign and abs(np.log(e.delta / r0)) <= np.log(SLOPE_SPAN)
    }
    evs[neg.delta], evs[pos.delta] = neg, pos
    evs = list(evs.values())
    x = np.log([e.delta for e in evs]) - np.log(r0)
    Y = np.array([np.concatenate([[e.margin], e.loo_margins]) for e in evs])
    A = np.column_stack([np.ones_like(x), x])
    coef = np.linalg.lstsq(A, Y, rcond=None)[0]
    return float(coef[1, 0]), coef[1, 1:]


def _newton(search, pilot, neg, pos):
    """One evaluation at the root of the line through the pilot's ends ``neg`` and ``pos``,
    ``r0``, and a Newton step from it in ``log delta`` with the pilot's slope ``s``
    (:func:`_pilot_slope`): ``r0 exp(-g(r0) / s)``.

    Returns ``(newton, guess, ev)``: ``newton = (ev, s, slopes, r0, other)`` (``other`` the
    pilot's end of the sign opposite to ``ev``) and ``guess = None``; or ``newton = None``
    when the evaluation failed, a slope has the wrong sign, or the step exceeds
    ``NEWTON_STEP`` (the pilot missed the root), with ``guess`` the Newton value (``r0`` when
    there is none) and ``ev`` the full evaluation at ``r0`` when the step alone was too large
    (else None)."""
    r0, _ = _interpolated_root(neg, pos)
    slope, slopes = _pilot_slope(pilot, r0, neg, pos)
    ev = search(r0)
    if not ev.sign or not (slope > 0 and np.all(slopes > 0)):
        return None, r0, None
    if not abs(ev.margin / slope) <= NEWTON_STEP:
        return None, float(r0 * np.exp(-ev.margin / slope)), ev
    return (ev, slope, slopes, r0, pos.delta if ev.sign < 0 else neg.delta), None, None


def _newton_value(ev, slope, slopes, r0, other):
    """The Newton value ``r0 exp(-g / s)`` of the evaluation ``ev`` at ``r0``, its jackknife
    standard error and the interval spanning ``r0``, ``other`` and the value.

    The jackknife values are ``r0 exp(-g_{-r} / s_{-r})`` to first order in the leave-one-out
    changes, ``r0 exp(-g_{-r} / s + g (s_{-r} - s) / s^2)``, with ``s_{-r}`` the slope of the
    pilot's leave-one-out margins: replica ``r`` of the pilot and of the full evaluation share
    a seed, so they leave together (a replica beyond the pilot's leaves ``s`` as it is).
    Dividing by each leave-one-out slope would let one noisy slope of the pilot dominate the
    error."""
    value = float(r0 * np.exp(-ev.margin / slope))
    R = ev.loo_margins.size
    s_loo = np.full(R, slope)
    s_loo[: min(R, slopes.size)] = slopes[:R]
    loo = r0 * np.exp(-ev.loo_margins / slope + ev.margin * (s_loo - slope) / slope**2)
    return value, _jackknife_se(loo), min(r0, other, value), max(r0, other, value)


def _pooled(evs) -> DMFTEvaluation:
    """One evaluation from independent batches of replicas at the same ``delta``: the mean
    margin over all replicas, each batch's margins read at its own plateau; the jackknife
    value of a replica is the pooled mean with its batch's leave-one-out mean in place."""
    if len(evs) == 1:
        return evs[0]
    sizes = np.array([e.margins.size for e in evs])
    total, sums = sizes.sum(), sizes * np.array([e.margin for e in evs])
    loo = np.concatenate(
        [(sums.sum() - sums[b] + (sizes[b] - 1) * e.loo_margins) / (total - 1)
         for b, e in enumerate(evs)]
    )  # fmt: skip
    margins = np.concatenate([e.margins for e in evs])
    vertex = float(np.sum(sizes * np.array([e.vertex for e in evs])) / total)
    plateaus = ", ".join(str(e.t1) for e in evs)
    shifts = None
    if all(e.law_shifts is not None for e in evs):
        shifts = np.concatenate([e.law_shifts for e in evs])
    return DMFTEvaluation(
        delta=evs[0].delta,
        t1=evs[0].t1,
        margins=margins,
        loo_margins=loo,
        margin=float(margins.mean()),
        margin_se=_jackknife_se(loo),
        hessians=sum((e.hessians for e in evs), ()),
        converged=True,
        message=f"{total} replicas in {len(evs)} batches ({' + '.join(map(str, sizes))}), plateaus of "
        f"their mean curves at steps {plateaus}",
        vertex=vertex,
        law_shifts=shifts,
    )


def _top_up(evaluate_more, newton, goal_rtol, max_replicas, progress):
    """Add replicas at the Newton evaluation's ``delta`` until the standard error of the
    Newton value is at most ``goal_rtol`` of it, or ``max_replicas`` are used: each batch
    has the replicas that the error's ``R^{-1/2}`` law says are missing, at least
    ``MIN_BATCH`` and at most half the replicas so far (the error estimated from ``R``
    replicas is itself uncertain, by about ``(2 (R - 1))^{-1/2}`` relative, so the first
    estimates often ask for too many; docs/theory.md 8.10).  Returns the pooled evaluation,
    the value, its standard error, the interval and a note on the top-up."""
    ev, slope, slopes, r0, other = newton
    batches = [ev]
    value, se, a, b = _newton_value(ev, slope, slopes, r0, other)
    note = ""
    while goal_rtol is not None and se > goal_rtol * value:
        total = sum(e.margins.size for e in batches)
        if total >= max_replicas:
            note = (
                f"; the standard error goal {goal_rtol:g} x delta_NN was not reached with "
                f"max_replicas = {max_replicas}"
            )
            break
        want = int(np.ceil(total * ((se / (goal_rtol * value)) ** 2 - 1)))
        count = min(max(want, MIN_BATCH), max(total // 2, MIN_BATCH), max_replicas - total)
        more = evaluate_more(r0, count, total)
        if progress is not None:
            progress(more)
        if not more.sign:
            note = f"; a batch of further replicas failed ({more.message})"
            break
        batches.append(more)
        ev = _pooled(batches)
        value, se, a, b = _newton_value(ev, slope, slopes, r0, other)
    return ev, value, se, a, b, note


#: the fewest replicas that :func:`_top_up` adds at once
MIN_BATCH = 4


def _past_guess(search, first, guess, guess_se, lo, hi, tries=3):
    """Full evaluations past ``guess``, the Newton value from the full evaluation ``first``
    at the pilot's root (a step larger than ``NEWTON_STEP``), on the far side from ``first``:
    ``guess_se`` beyond it (between 2% and 5% of ``guess``); while such a point keeps
    ``first``'s sign it takes ``first``'s place and a point twice as far out is added.
    Returns ``(neg, pos, found)``: ``first`` (or its replacement) and the last point make the
    bracket."""
    h = float(np.clip(guess_se, 0.02 * guess, 0.05 * guess))
    up, near = guess > first.delta, first
    for _ in range(tries + 1):
        x = min(max(guess + h if up else guess - h, lo), hi)
        ev = search(x)
        if ev.sign and ev.sign != near.sign:
            return ((ev, near) if ev.sign < 0 else (near, ev)) + (True,)
        if not ev.sign or x in (lo, hi):
            break
        near, h = ev, 2 * h
    return near, ev, False


def _straddle(search, guess, guess_se, lo, hi, tries=3):
    """Two evaluations on either side of ``guess`` (a pilot's root, standard error
    ``guess_se``), ``guess_se`` away (between 2% and 5% of ``guess``); while both have one
    sign, a point twice as far out on the other side.  Returns ``(neg, pos, found)``."""
    h = float(np.clip(guess_se, 0.02 * guess, 0.05 * guess))
    a = search(min(max(guess - h, lo), hi))
    b = search(min(max(guess + h, lo), hi))
    for i in range(tries + 1):
        if a.sign and b.sign and a.sign != b.sign:
            return ((a, b) if a.sign < 0 else (b, a)) + (True,)
        if not (a.sign and b.sign) or i == tries:
            return a, b, False
        h *= 2
        if a.sign > 0:  # both positive: the root is lower
            a, b = search(min(max(guess - h, lo), hi)), a
        else:
            a, b = b, search(min(max(guess + h, lo), hi))
    return a, b, False
