"""The grokking-like delay: the plateau length of gradient descent, measured and predicted from
the theory at the end of the first phase (docs/theory.md section 7.7).

**Predicted.** For each ``delta`` the DMFT of the first phase gives the Hessian at its plateau
``W1`` as ``d -> inf`` (:func:`rmt.dmft_hessian`): the ``Theta*`` outlier, the bulk edges and the
bulk density (:func:`rmt.bulk_density` of its law).  :func:`rmt.dynamics.escape.plateau_length`
turns them into the number of steps the outlier needs to outgrow the ``m d`` directions of the
bulk: the plateau length at dimension ``d`` (:func:`plateau_law`).

**Measured.** :func:`plateau_run` reads it off one gradient-descent run: from the plateau step
(the plateau rule of section 7.2) to the escape step (the first step after it where the
``Theta*`` overlap reaches 1/2).  :func:`plateau_summary` gives the median and quartiles over
seeds at each ``(d, delta)``, a run that has not escaped within its step budget counting as
``+inf`` (:func:`censored_quantile`).  :func:`grokking` runs every ``(d, delta, seed)``, predicts
the law at the same points, and with ``out`` writes both (the runs resumable).
"""

from __future__ import annotations

import math
import pathlib
import time
from dataclasses import dataclass, replace

import numpy as np

from rmt.dynamics.dmft import (
    DMFTHessian,
    dmft_hessian,
    dmft_replicas,
    hessian_at_step,
    plateau_of_curves,
)
from rmt.dynamics.escape import (
    PlateauPrediction,
    outlier_growth,
    plateau_length,
    seeded_escape_table,
)
from rmt.experiments.config import parse_deltas, parse_sizes, parse_stop_after_escape
from rmt.experiments.learning import LEARNED_OVERLAP, run_descent
from rmt.experiments.store import (
    GROWING_FIELDS,
    ResumableCSV,
    check_resumable,
    write_manifest,
    write_table,
)
from rmt.freeprob import bulk_density
from rmt.freeprob.mp import ConvergenceError
from rmt.operators import distributed
from rmt.thresholds.asymptotic import dmft_plateau_rule
from rmt.validation import check_positive_float, check_positive_int

#: points of the bulk-density grid between the edges
DENSITY_POINTS = 400
#: DMFT replicas of :func:`outlier_lifetime` in :func:`grokking` (``lifetime_steps > 0``)
LIFETIME_REPLICAS = 4


@dataclass(frozen=True)
class PlateauLaw:
    """The predicted plateau at one ``delta``: the Hessian at the DMFT plateau (``hessian``)
    and the prediction at each dimension (``by_d``: ``{d: PlateauPrediction}``); ``reason``
    says why there is none when the DMFT gives no Hessian."""

    delta: float
    hessian: DMFTHessian
    by_d: dict
    reason: str = ""


def bulk_grid(hessian: DMFTHessian, points: int = DENSITY_POINTS):
    """The bulk density of ``hessian``'s law on a grid between its edges, and the atom at 0.

    Returns
    -------
    x, density : arrays (points,)
    atom : float

    Raises
    ------
    ConvergenceError
        When the density does not converge at a point.
    """
    lo, hi = hessian.edge_lo, hessian.edge_hi
    x = lo + (hi - lo) * 0.5 * (1.0 - np.cos(np.linspace(0.0, np.pi, points)))
    step = (hi - lo) / points
    dens = bulk_density(hessian.law, hessian.delta, x[1:-1], eta=step)
    density = np.concatenate([[0.0], np.maximum(dens.density, 0.0), [0.0]])
    return x, density, float(dens.atom)


def plateau_law(config, deltas, sizes) -> list[PlateauLaw]:
    """The predicted plateau length at each ``delta`` and dimension ``d`` (docs/theory.md 7.7).

    Parameters
    ----------
    config : rmt.RunConfig
        Target, network and training (``lr``, ``init_scale``, ``weight_decay``) and the DMFT's
        settings (``dmft_steps``, ``dmft_samples``, the seed ``seeds[0]``).
    deltas : sequence of float
        The sample ratios.
    sizes : sequence of int
        The dimensions ``d`` of the prediction.

    Returns
    -------
    list of PlateauLaw
        One per ``delta``: the DMFT Hessian at its plateau and ``{d: PlateauPrediction}``; a
        ``delta`` whose DMFT solve or density fails has ``by_d = {}`` and the reason.
    """
    options = config.dmft_hessian_options()
    out = []
    for delta in deltas:
        h = dmft_hessian(
            config.model(), config.net(), float(delta), stop_at_plateau=True, **options
        )
        if not h.converged:
            out.append(PlateauLaw(delta=float(delta), hessian=h, by_d={}, reason=h.message))
            continue
        try:
            x, rho, atom = bulk_grid(h)
        except ConvergenceError as exc:
            why = f"the bulk density did not converge: {exc}"
            out.append(PlateauLaw(delta=float(delta), hessian=h, by_d={}, reason=why))
            continue
        outlier = h.theta_outlier if np.isfinite(h.theta_outlier) else h.edge_lo
        by_d = {
            int(d): plateau_length(
                outlier, h.edge_lo, x, rho, atom=atom, width=config.width, d=int(d), lr=config.lr
            )
            for d in sizes
        }
        out.append(PlateauLaw(delta=float(delta), hessian=h, by_d=by_d))
    return out


def prediction_row(law: PlateauLaw, d: int, lifetime=None, width=1, row=None) -> dict:
    """One row of the comparison table: ``delta``, ``d``, the outlier, the edge, the gap and the
    predicted plateau (``None`` with the reason where there is none); with ``lifetime`` (an
    :class:`OutlierLifetime` at this ``delta``) the mean growth ``G`` of its replicas and the
    escape's regime at ``d`` for a network of ``width`` neurons (:func:`escape_regime`), else
    ``None`` and ``""``; with ``row`` (a :class:`RowEscape` at this ``delta``, or the reason
    there is none) the :data:`ROW_COLUMNS` (:func:`row_columns`)."""
    h = law.hessian
    pred: PlateauPrediction | None = law.by_d.get(int(d))
    growth, regime = None, ""
    if lifetime is not None:
        g = np.asarray(lifetime.growth, dtype=np.float64)
        growth = float(g[np.isfinite(g)].mean()) if np.isfinite(g).any() else None
        regime = lifetime.regime(int(d), width)
    return {
        "growth": growth,
        "regime": regime,
        "delta": law.delta,
        "d": int(d),
        "t1": h.t1,
        "outlier": h.theta_outlier if h.converged else None,
        "overlap": h.theta_overlap if h.converged else None,
        "edge": h.edge_lo if h.converged else None,
        "predicted_steps": None if pred is None else pred.steps,
        "reason": law.reason if pred is None else pred.reason,
        **row_columns(row, d),
    }


#: the quantiles over runs of :func:`row_escape` (the quartiles, as :func:`plateau_summary`)
ROW_QUANTILES = (0.25, 0.5, 0.75)
#: the columns of the plateau from the Theta* row (docs/theory.md 7.8): the mean over the DMFT
#: replicas of the plateau length at the quartiles over runs, and why a quantile is missing
ROW_COLUMNS = ["row_q25", "row_median", "row_q75", "row_reason"]


def row_columns(row, d) -> dict:
    """The :data:`ROW_COLUMNS` of ``row`` (a :class:`RowEscape`, a reason, or None) at ``d``."""
    out = dict.fromkeys(ROW_COLUMNS[:3])
    if row is None:
        return {**out, "row_reason": ""}
    if isinstance(row, str):
        return {**out, "row_reason": row}
    reasons = []
    for name, q in zip(ROW_COLUMNS[:3], ROW_QUANTILES):
        value, note = row.length(int(d), q)
        if value is None:
            reasons.append(f"q{round(100 * q)}: {note}")
        out[name] = value
    return {**out, "row_reason": "; ".join(reasons)}


#: the ``Theta*`` overlap at which a run has escaped, and at which it counts as learned
ESCAPE_OVERLAP = LEARNED_OVERLAP
#: the columns of ``grokking_runs.csv``: one run of :func:`plateau_run` per row
RUN_COLUMNS = [
    "d",
    "delta",
    "seed",
    "n",
    "plateau_step",
    "plateau_rule",
    "escape_step",
    "plateau_length",
    "plateau_time",
    "censored",
    "learned_in_first_phase",
    "overlap_at_plateau",
    "final_overlap",
    "learned",
    "diverged",
    "steps_made",
    "seconds",
    "gd_seconds",
    "compile_seconds",
    "ms_per_step",
]
#: the key of a run: a rerun into the same folder skips the keys already there
RUN_KEY = ("d", "delta", "seed")
#: the columns of :func:`plateau_summary`'s rows
SUMMARY_STATS = [
    "d",
    "delta",
    "runs",
    "censored",
    "learned",
    "before_escape_rule",
    "q25",
    "median",
    "q75",
    "q25_censored",
    "median_censored",
    "q75_censored",
    "median_plateau_step",
    "seconds",
]
#: the columns of ``grokking_summary.csv``: the summary next to the prediction of the law
SUMMARY_COLUMNS = [
    *SUMMARY_STATS,
    "predicted_steps",
    "ratio",
    "t1",
    "outlier",
    "overlap",
    "edge",
    "growth",
    "regime",
    "prediction_reason",
    *ROW_COLUMNS,
]
#: the files of :func:`grokking` in its ``out``
RUNS_FILE, SUMMARY_FILE = "grokking_runs.csv", "grokking_summary.csv"
#: what a rerun into the same folder may change: it adds runs (deltas, seeds, sizes) or changes
#: only the prediction, which is computed again each time (the DMFT's settings)
GROKKING_GROWING = (
    *GROWING_FIELDS,
    "d",
    "sizes",
    "dmft_steps",
    "dmft_samples",
    "lifetime_steps",
    "row_steps",
)
#: the steps a run of the delay-curve figure goes on after its escape (:func:`delay_curves`)
CURVE_STEPS_AFTER_ESCAPE = 1000


@dataclass(frozen=True)
class OutlierLifetime:
    """The ``Theta*`` outlier along the DMFT trajectory after its plateau, per replica
    (:func:`outlier_lifetime`, docs/theory.md 7.7).

    ``t1`` the plateau step, ``merge`` the first evaluated step where the outlier has merged
    with the bulk edge (None: it lasted to ``steps``), ``growth`` the outlier's growth ``G``
    from ``t1`` to the merge (a lower bound where ``merge`` is None); a replica that failed
    has ``t1 = None``, ``growth = nan`` and its reason in ``reasons``.
    """

    delta: float
    steps: int
    t1: tuple
    merge: tuple
    growth: tuple
    reasons: tuple = ()

    def regime(self, d, width) -> str:
        """Where the escape at dimension ``d`` falls (:func:`escape_regime`)."""
        return escape_regime(self.growth, d, width)


def escape_regime(growth, d, width) -> str:
    """Whether the ``Theta*`` component escapes before its outlier merges with the bulk edge
    (docs/theory.md 7.7): it starts at about ``(m d)^{-1/2}`` and must reach ``O(1)``, a climb
    of ``(1/2) log(m d)``; the outlier gives it ``G``.

    Parameters
    ----------
    growth : sequence of float
        ``G`` of each replica (:class:`OutlierLifetime`).
    d, width : int
        The dimension and the width ``m``.

    Returns
    -------
    str
        ``"before the merge"`` when every replica's ``G`` exceeds the bar (the plateau of the
        frozen law, ``log d``), ``"after the merge"`` when none does (a much longer plateau),
        ``"at the bar"`` otherwise, ``"unknown"`` without a finite ``G``.
    """
    g = np.asarray(growth, dtype=np.float64)
    g = g[np.isfinite(g)]
    if not g.size:
        return "unknown"
    bar = 0.5 * math.log(check_positive_int(width, "width") * check_positive_int(d, "d"))
    if g.min() > bar:
        return "before the merge"
    if g.max() < bar:
        return "after the merge"
    return "at the bar"


def outlier_lifetime(config, delta, steps=600, every=25, replicas=2) -> OutlierLifetime:
    """How long the ``Theta*`` outlier of the Hessian lasts after the DMFT plateau, and how much
    it grows the ``Theta*`` component meanwhile (docs/theory.md 7.7).

    Each replica solves the DMFT for ``steps`` steps (cost ``T^3``, docs/theory.md 8.8), finds
    its plateau ``t1`` (the rule of :func:`rmt.dmft_delta_nn`) and evaluates the Hessian law
    (:func:`rmt.dynamics.dmft.hessian_at_step`) at ``t1`` and every ``every`` steps after it;
    :func:`rmt.dynamics.escape.outlier_growth` gives ``G`` and the merge step.

    Parameters
    ----------
    config : rmt.RunConfig
        Target, network, ``lr``, ``init_scale``, ``weight_decay``; the DMFT's draws
        ``dmft_samples`` and seed ``seeds[0]`` (replica ``r`` draws from the ``r``-th child).
    delta : float
        The sample ratio.
    steps, every, replicas : int
        The steps solved, the spacing of the evaluations, the replicas (at least 2).

    Returns
    -------
    OutlierLifetime

    Raises
    ------
    TypeError, ValueError
        For bad input, before any solve.
    """
    delta = check_positive_float(delta, "delta")
    steps = check_positive_int(steps, "steps", minimum=2)
    every = check_positive_int(every, "every")
    replicas = check_positive_int(replicas, "replicas", minimum=2)
    net = config.net()
    t1s, merges, growths, reasons = [], [], [], []
    for r, (res, t1, why) in enumerate(_solves_past_plateau(config, delta, steps, replicas)):
        if t1 is None:
            t1s.append(None)
            merges.append(None)
            growths.append(float("nan"))
            reasons.append(why)
            continue
        at = [t1, *range(every * (t1 // every + 1), steps, every)]
        lam = []
        for t in at:
            h = hessian_at_step(res, net, t, weight_decay=config.weight_decay)
            if not h.converged:
                break
            lam.append(h.theta_outlier)
            if not np.isfinite(h.theta_outlier):
                break
        g, merge = outlier_growth(at[: len(lam)], lam, config.lr)
        t1s.append(int(t1))
        merges.append(merge)
        growths.append(g)
        if len(lam) < len(at) and np.isfinite(lam[-1] if lam else np.nan):
            reasons.append(f"replica {r}: the Hessian law failed at step {at[len(lam)]}")
    return OutlierLifetime(
        delta=delta, steps=steps, t1=tuple(t1s), merge=tuple(merges), growth=tuple(growths),
        reasons=tuple(reasons),
    )  # fmt: skip


@dataclass(frozen=True)
class RowEscape:
    """The plateau length at finite ``d`` from the ``Theta*`` row along the DMFT
    (:func:`row_escape`, docs/theory.md 7.8), per replica of the solve.

    ``t1`` the DMFT plateau step of each replica (None: no plateau, reason in ``reasons``);
    ``escape[r][d]`` the escape steps of replica ``r`` at the quantiles :data:`ROW_QUANTILES`
    over runs (None: later than ``steps``).
    """

    delta: float
    steps: int
    t1: tuple
    escape: tuple
    reasons: tuple = ()

    def length(self, d, q=0.5):
        """The plateau length (escape minus ``t1``) at quantile ``q`` over runs: mean and
        standard error over the replicas, or None with the reason.

        Parameters
        ----------
        d : int
            A dimension of the prediction.
        q : float
            One of :data:`ROW_QUANTILES`.

        Returns
        -------
        (float, float) or (None, str)
            ``(mean, stderr)``; or ``(None, reason)`` when a replica failed or escapes later
            than ``steps`` (then the length is ``> steps - t1``).

        Raises
        ------
        KeyError, ValueError
            For a ``d`` or ``q`` not predicted.
        """
        i = ROW_QUANTILES.index(float(q))
        if self.reasons:
            return None, "; ".join(self.reasons)
        ends = [e[int(d)][i] for e in self.escape]
        if any(e is None for e in ends):
            return None, f"later than step {self.steps} (t1 = {max(self.t1)})"
        # an escape before t1 is a run that learns in its first phase: length 0, as in GD
        lengths = np.array([max(e - t, 0) for e, t in zip(ends, self.t1)], dtype=float)
        return float(lengths.mean()), float(lengths.std(ddof=1) / math.sqrt(lengths.size))


def _solves_past_plateau(config, delta, steps, replicas, theta_row=False):
    """The replicas of one DMFT solve of ``steps`` steps (:func:`rmt.dmft_replicas`, the
    configuration's settings) with the plateau ``t1`` of each (the rule of
    :func:`rmt.dmft_delta_nn`): ``[(result, t1, reason)]``, ``t1`` None where the replica
    failed or has no plateau, and the reason then."""
    rep = dmft_replicas(
        config.model(), config.net(), delta, config.lr, steps, config.init_scale,
        replicas=replicas, weight_decay=config.weight_decay, n_samples=config.dmft_samples,
        rng=config.seeds[0], theta_row=theta_row,
    )  # fmt: skip
    rule = dmft_plateau_rule()
    out = []
    for r, res in enumerate(rep.results):
        t1 = None
        if res.converged:
            t1 = plateau_of_curves(res.train_loss, res.grad_norm, res.overlap, rule).plateau_step
        why = ""
        if t1 is None:
            why = res.message if not res.converged else f"no plateau within {steps} steps"
            why = f"replica {r}: {why}"
        out.append((res, t1, why))
    return out


def row_escape(config, delta, sizes, steps=600, replicas=2) -> RowEscape:
    """The plateau length of gradient descent at finite ``d``, its median and quartiles over
    runs, from the DMFT with the ``Theta*`` row (docs/theory.md 7.8).

    Each replica solves :func:`rmt.dmft_replicas` with ``theta_row=True`` for ``steps`` steps
    (cost ``T^3``, doubled by the row), finds its plateau ``t1`` (the rule of
    :func:`outlier_lifetime`), and :func:`rmt.dynamics.escape.seeded_escape_table` reads the
    escape of each quantile at each ``d``.  Unlike the frozen law of 7.7 this follows the
    drift of the plateau after ``t1``, and the start of the ``Theta*`` component (the finite
    sample's noise) comes out of the same equations.

    Parameters
    ----------
    config : rmt.RunConfig
        An even target with ``k = 1``; network, ``lr``, ``init_scale``, ``weight_decay``;
        the draws ``dmft_samples`` and seed ``seeds[0]``.
    delta : float
        The sample ratio.
    sizes : sequence of int
        The dimensions.
    steps, replicas : int
        The steps solved (the horizon of the prediction) and the replicas (at least 2).

    Returns
    -------
    RowEscape

    Raises
    ------
    TypeError, ValueError
        For bad input (a target that is not even with ``k = 1``, say), before any solve.

    Examples
    --------
    Phase retrieval, softplus/Huber, m = 2 (``rmt.RunConfig()``), far above the threshold
    (about two minutes on two cores; ``benchmarks/grokking_row_law.py`` runs the grid):

    >>> import rmt
    >>> row = rmt.row_escape(rmt.RunConfig(), 7.0, [1000, 4000], steps=400)  # doctest: +SKIP
    >>> [round(row.length(d)[0]) for d in (1000, 4000)]  # doctest: +SKIP
    [62, 90]
    """
    delta = check_positive_float(delta, "delta")
    steps = check_positive_int(steps, "steps", minimum=2)
    replicas = check_positive_int(replicas, "replicas", minimum=2)
    dims = [check_positive_int(d, "d") for d in sizes]
    t1s, escapes, reasons = [], [], []
    for res, t1, why in _solves_past_plateau(config, delta, steps, replicas, theta_row=True):
        if t1 is None:
            reasons.append(why)
        trace_q = np.trace(res.Q, axis1=1, axis2=2)
        if res.converged:
            table = seeded_escape_table(res.seed_cov, trace_q, dims, ROW_QUANTILES, ESCAPE_OVERLAP)
        else:
            table = {d: [None] * len(ROW_QUANTILES) for d in dims}
        escapes.append(table)
        t1s.append(None if t1 is None else int(t1))
    return RowEscape(
        delta=delta, steps=steps, t1=tuple(t1s), escape=tuple(escapes), reasons=tuple(reasons)
    )


def plateau_run(config, delta, seed, stop_after_escape=None) -> dict:
    """The plateau of one gradient-descent run: its start, its end and its length in steps
    (docs/theory.md section 7.7).

    The run is :func:`rmt.experiments.learning.run_descent` at ``(delta, seed)`` (the data and
    start every command draws there) without its test pass.  The plateau step is
    ``GDRun.plateau_step`` (the plateau rule of section 7.2), the escape step the first step
    after it where the ``Theta*`` overlap reaches :data:`ESCAPE_OVERLAP`
    (:func:`rmt.dynamics.escape.escape_step`), and the plateau length their difference.  A run
    whose overlap already reaches it at the plateau (learned in the first phase) has length 0;
    a run that does not escape within ``config.train_steps``, or has no plateau, is censored:
    its length is ``None``.

    Parameters
    ----------
    config : rmt.RunConfig
        Target, network, ``d``, the training settings (``lr``, ``init_scale``,
        ``weight_decay``) and the step budget ``train_steps``.
    delta : float
        The sample ratio ``n / d``.
    seed : int
        The run seed.
    stop_after_escape : int or None
        End the run this many steps after its escape: the same plateau and escape in fewer
        steps (``learned`` and ``final_overlap`` are then read there).  ``None``: the whole
        budget.

    Returns
    -------
    dict
        A :data:`RUN_COLUMNS` row: ``d``, ``delta``, ``seed``, ``n``, ``plateau_step`` and the
        rule that found it, ``escape_step``, ``plateau_length`` (``None``: censored) and
        ``plateau_time`` (times ``lr``: gradient-flow time), ``censored``,
        ``learned_in_first_phase``, the ``Theta*`` overlap at the plateau and at the end,
        ``learned``, ``diverged``, the steps made and the timings.

    Raises
    ------
    TypeError, ValueError
        For a ``delta`` that is not finite and > 0, a negative ``seed`` or a negative
        ``stop_after_escape``.

    Examples
    --------
    >>> import rmt
    >>> cfg = rmt.RunConfig(d=100, train_steps=1000)
    >>> r = rmt.plateau_run(cfg, 6.0, seed=0, stop_after_escape=5)
    >>> r["plateau_length"] == r["escape_step"] - r["plateau_step"], r["censored"]
    (True, False)
    """
    delta = check_positive_float(delta, "delta")
    seed = check_positive_int(seed, "seed", minimum=0)
    stop_after_escape = parse_stop_after_escape(stop_after_escape)
    t0 = time.perf_counter()
    _, run, _ = run_descent(
        config, delta, seed, with_test=False, stop_after_escape=stop_after_escape
    )
    wall = time.perf_counter() - t0
    plateau, escape = run.plateau_step, run.escape_step
    first_phase = bool(run.phases.learned_in_first_phase)
    length = escape - plateau if escape is not None else (0 if first_phase else None)
    final = float(run.overlap[-1])
    return {
        "d": config.d,
        "delta": delta,
        "seed": seed,
        "n": config.n_of(delta),
        "plateau_step": plateau,
        "plateau_rule": run.phases.rule,
        "escape_step": escape,
        "plateau_length": length,
        "plateau_time": None if length is None else length * config.lr,
        "censored": length is None,
        "learned_in_first_phase": first_phase,
        "overlap_at_plateau": None if plateau is None else float(run.overlap[plateau]),
        "final_overlap": final,
        "learned": bool(final >= ESCAPE_OVERLAP),
        "diverged": bool(run.diverged),
        "steps_made": int(run.steps),
        "seconds": wall,
        "gd_seconds": float(run.seconds),
        "compile_seconds": float(run.compile_seconds),
        "ms_per_step": 1e3 * run.seconds / max(1, len(run.loss)),
    }


def censored_quantile(values, q) -> float:
    """The quantile ``q`` of ``values`` by linear interpolation between order statistics (the
    default of :func:`numpy.quantile`), where a censored value is ``inf``: the quantile is
    ``inf`` as soon as the interpolation touches one.

    Parameters
    ----------
    values : sequence of float
        The values, ``inf`` for a censored one; not NaN.
    q : float
        The probability, in ``[0, 1]``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For no values, a NaN among them, or ``q`` outside ``[0, 1]``.

    Examples
    --------
    >>> inf = float("inf")
    >>> censored_quantile([4, 1, 3, 2], 0.5), censored_quantile([1, 2, 3, inf], 0.5)
    (2.5, 2.5)
    >>> censored_quantile([1, 2, inf, inf], 0.5)
    inf
    """
    ordered = sorted(float(v) for v in values)
    if not ordered or any(math.isnan(v) for v in ordered):
        raise ValueError(f"values must be a non-empty sequence without NaN; got {values!r}")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1]; got {q!r}")
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    a, b = ordered[lo], ordered[hi]
    if lo == hi:
        return a
    if math.isinf(b):
        return math.inf
    return a + (pos - lo) * (b - a)


def plateau_summary(runs) -> list[dict]:
    """Per ``(d, delta)``: the median and quartiles over seeds of the plateau length, a censored
    run counting as ``+inf`` (:func:`censored_quantile`; docs/theory.md section 7.7).

    Parameters
    ----------
    runs : iterable of dict
        Rows of :func:`plateau_run` (``d``, ``delta``, ``plateau_length``, ``censored``,
        ``plateau_step``, ``plateau_rule``, ``learned``, ``seconds``).

    Returns
    -------
    list of dict
        One :data:`SUMMARY_STATS` row per ``(d, delta)``, sorted: the number of runs, of
        censored and of learned runs, and of plateaus found by the ``before_escape`` rule;
        ``q25``, ``median``, ``q75`` (``None`` where the quantile is censored, which
        ``q25_censored``, ... say); the median plateau step and the runs' wall time.

    Examples
    --------
    >>> runs = [
    ...     {"d": 100, "delta": 4.0, "plateau_length": v, "censored": v is None,
    ...      "plateau_step": 90, "plateau_rule": "local_min", "learned": v is not None,
    ...      "seconds": 0.1}
    ...     for v in (120, 80, None)
    ... ]
    >>> s = plateau_summary(runs)[0]
    >>> s["median"], s["q75"], s["q75_censored"], s["censored"]
    (120.0, None, True, 1)
    """
    groups = {}
    for r in runs:
        groups.setdefault((int(r["d"]), float(r["delta"])), []).append(r)
    out = []
    for (d, delta), rs in sorted(groups.items()):
        lengths = [math.inf if r["censored"] else r["plateau_length"] for r in rs]
        q25, median, q75 = (censored_quantile(lengths, p) for p in (0.25, 0.5, 0.75))
        plateaus = [r["plateau_step"] for r in rs if r["plateau_step"] is not None]
        row = {"d": d, "delta": delta, "runs": len(rs)}
        row["censored"] = sum(bool(r["censored"]) for r in rs)
        row["learned"] = sum(bool(r["learned"]) for r in rs)
        row["before_escape_rule"] = sum(r["plateau_rule"] == "before_escape" for r in rs)
        for name, value in (("q25", q25), ("median", median), ("q75", q75)):
            row[name] = None if math.isinf(value) else value
            row[name + "_censored"] = math.isinf(value)
        row["median_plateau_step"] = censored_quantile(plateaus, 0.5) if plateaus else None
        row["seconds"] = sum(float(r["seconds"]) for r in rs)
        out.append(row)
    return out


def compare_with_law(summary, predictions) -> list[dict]:
    """The measured plateau next to the predicted one at each ``(d, delta)`` (docs/theory.md
    section 7.7).

    Parameters
    ----------
    summary : list of dict
        Rows of :func:`plateau_summary`.
    predictions : list of dict
        Rows of :func:`prediction_row`.

    Returns
    -------
    list of dict
        :data:`SUMMARY_COLUMNS` rows: each summary row with the predicted length, ``ratio``
        (the simulated median over the predicted length; ``None`` where either is missing),
        the DMFT's plateau step ``t1``, outlier, overlap and edge, the outlier's growth ``G``
        and the escape's regime (:func:`prediction_row`), and ``prediction_reason``
        (why there is no prediction; ``"no prediction"`` where none was made at that point).
    """
    at = {(int(p["d"]), float(p["delta"])): p for p in predictions}
    out = []
    for s in summary:
        p = at.get((int(s["d"]), float(s["delta"])), {})
        pred = p.get("predicted_steps")
        ratio = s["median"] / pred if pred and s["median"] is not None else None
        row = {**s, "predicted_steps": pred, "ratio": ratio}
        row.update({k: p.get(k) for k in ("t1", "outlier", "overlap", "edge", "growth")})
        row["regime"] = p.get("regime", "")
        row["prediction_reason"] = p.get("reason", "no prediction")
        row.update({k: p.get(k, "" if k == "row_reason" else None) for k in ROW_COLUMNS})
        out.append(row)
    return out


@dataclass(frozen=True)
class GrokkingDelay:
    """The grokking-like delay measured and predicted: ``runs`` (:data:`RUN_COLUMNS` rows, by
    ``(d, delta, seed)``), ``summary`` (:data:`SUMMARY_COLUMNS` rows, by ``(d, delta)``: the
    simulated median and quartiles next to the prediction) and ``predictions``
    (:func:`prediction_row` rows, by ``delta`` then ``d``).

    Examples
    --------
    >>> res = GrokkingDelay(runs=[], summary=[{"d": 500, "delta": 4.0, "median": 310.0}],
    ...                     predictions=[])
    >>> res.at(500, 4)["median"]
    310.0
    """

    runs: list
    summary: list
    predictions: list

    def at(self, d, delta) -> dict:
        """The summary row at ``(d, delta)`` (raises KeyError when there is none)."""
        for row in self.summary:
            if int(row["d"]) == int(d) and float(row["delta"]) == float(delta):
                return row
        raise KeyError(f"no summary at d = {d}, delta = {delta}")


def grokking_config(config, deltas, seeds, sizes, stop_after_escape=5):
    """The configuration of a measurement of the delay, checked: what :func:`grokking` runs and
    records in its manifest.

    Parameters
    ----------
    config : rmt.RunConfig
        The shared settings.
    deltas, seeds, sizes : sequence
        The sample ratios, run seeds and dimensions (as :func:`grokking` takes them).
    stop_after_escape : int or None
        The steps each run goes on after its escape (``None``: the whole budget).

    Returns
    -------
    rmt.RunConfig
        ``config`` with ``deltas`` and ``seeds`` sorted without repeats, ``d`` the least of
        ``sizes`` and ``sizes`` the others, and ``stop_after_escape``.

    Raises
    ------
    TypeError, ValueError
        For no deltas, seeds or sizes, a ``delta`` that is not finite and > 0, a negative seed,
        a size below 2 or a negative ``stop_after_escape``.
    """
    if isinstance(seeds, (int, np.integer)):
        raise TypeError(f"seeds must be a sequence of seeds (range(N) for 0..N-1); got {seeds!r}")
    for name, values in (("deltas", deltas), ("seeds", seeds), ("sizes", sizes)):
        if isinstance(values, str) or len(values) == 0:
            raise ValueError(f"{name} must be a non-empty sequence; got {values!r}")
    deltas = sorted(set(parse_deltas(deltas)))
    seeds = sorted({check_positive_int(s, "seed", minimum=0) for s in seeds})
    dims = sorted(set(parse_sizes(sizes)))
    return replace(
        config, deltas=tuple(deltas), seeds=tuple(seeds), d=dims[0], sizes=tuple(dims[1:]),
        stop_after_escape=parse_stop_after_escape(stop_after_escape),
    )  # fmt: skip


def _row_law(config, delta, dims):
    """:func:`row_escape` at ``delta``, or the reason why it does not apply."""
    model = config.model()
    if not model.even or model.k != 1:
        return "the Theta* row needs an even target with k = 1"
    return row_escape(config, delta, dims, config.row_steps, replicas=LIFETIME_REPLICAS)


def _open_runs_table(config, out):
    """The resumable table of runs in ``out`` (``None`` without ``out``), checked against the
    manifest there."""
    if out is None:
        return None
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = ResumableCSV(out / RUNS_FILE, RUN_COLUMNS, RUN_KEY)
    if table.rows:
        check_resumable(out, config, "grokking", "a grokking measurement", GROKKING_GROWING)
    return table


def _run_key(row) -> tuple:
    return int(row["d"]), float(row["delta"]), int(row["seed"])


def grokking(
    config, deltas, seeds, sizes, out=None, stop_after_escape=5, progress=None, scheduler=None
) -> GrokkingDelay:
    """The grokking-like delay: the plateau length of gradient descent at every
    ``(d, delta, seed)`` against the plateau-length law (docs/theory.md section 7.7).

    Each run is :func:`plateau_run`; :func:`plateau_summary` gives the median and quartiles per
    ``(d, delta)`` (censored runs as ``+inf``), and :func:`plateau_law` the predicted length at
    the same ``delta`` and ``d`` from the DMFT Hessian at its plateau.

    Parameters
    ----------
    config : rmt.RunConfig
        Target, network, training (``lr``, ``init_scale``, ``weight_decay``), the step budget
        ``train_steps`` and the DMFT's settings (``dmft_steps``, ``dmft_samples``; its draws
        use the least seed).
    deltas : sequence of float
        The sample ratios ``n / d``.
    seeds : sequence of int
        The run seeds.
    sizes : sequence of int
        The dimensions ``d``.
    out : path, optional
        A folder: each finished run is appended to ``grokking_runs.csv`` (a rerun into the same
        folder runs only what is not there yet; more deltas, seeds or sizes add runs), then
        ``grokking_summary.csv`` (the summary next to the prediction) and the manifest are
        written.
    stop_after_escape : int or None
        End each run this many steps after its escape (``None``: the whole budget).
    progress : bool or None
        A progress bar over the runs (default: when stderr is a terminal).
    scheduler : None, "local" or str, optional
        Where the runs go (:func:`rmt.operators.distributed.run_tasks`); default
        ``config.scheduler``.

    Returns
    -------
    GrokkingDelay
        The runs, old and new, of the points asked for; the summary next to the prediction;
        the predictions.

    Raises
    ------
    TypeError, ValueError
        For bad points (:func:`grokking_config`), before any run; or an ``out`` that holds a
        measurement of other settings.

    Examples
    --------
    >>> import rmt
    >>> cfg = rmt.RunConfig(train_steps=1500, dmft_samples=500)
    >>> res = rmt.grokking(cfg, deltas=[4.0, 7.0], seeds=[0, 1], sizes=[120])  # doctest: +SKIP
    >>> [(s["delta"], s["censored"]) for s in res.summary]  # doctest: +SKIP
    [(4.0, 0), (7.0, 0)]
    """
    cfg = grokking_config(config, deltas, seeds, sizes, stop_after_escape)
    dims = (cfg.d, *cfg.sizes)
    table = _open_runs_table(cfg, out)
    rows = {_run_key(r): r for r in (table.rows if table else [])}
    keys = [(d, x, s) for d in dims for x in cfg.deltas for s in cfg.seeds]
    tasks = [
        (replace(cfg, d=d, sizes=()), x, s, cfg.stop_after_escape)
        for d, x, s in keys
        if (d, x, s) not in rows
    ]
    started, status, files = time.perf_counter(), "interrupted", [RUNS_FILE]

    def on_result(task, row):
        rows[_run_key(row)] = row
        if table is not None:
            table.append([row])

    try:
        distributed.run_tasks(
            plateau_run, tasks, scheduler=cfg.scheduler if scheduler is None else scheduler,
            on_result=on_result, progress=progress,
        )  # fmt: skip
        runs = [rows[k] for k in keys]
        laws = plateau_law(cfg, cfg.deltas, dims)
        lives = {
            law.delta: outlier_lifetime(
                cfg, law.delta, cfg.lifetime_steps, replicas=LIFETIME_REPLICAS
            )
            for law in laws
            if cfg.lifetime_steps and law.hessian.converged
        }
        rows_law = {x: _row_law(cfg, x, dims) for x in cfg.deltas} if cfg.row_steps else {}
        predictions = [
            prediction_row(law, d, lives.get(law.delta), cfg.width, rows_law.get(law.delta))
            for law in laws
            for d in dims
        ]
        summary = compare_with_law(plateau_summary(runs), predictions)
        if table is not None:
            table.sort()
            write_table(pathlib.Path(out) / SUMMARY_FILE, summary, SUMMARY_COLUMNS)
            files.append(SUMMARY_FILE)
        status = "complete"
    finally:
        if table is not None and (status == "complete" or table.rows):
            timings = {"wall_time_s": time.perf_counter() - started}
            write_manifest(out, "grokking", cfg, cfg.seeds, timings, files, status=status)
    return GrokkingDelay(runs=runs, summary=summary, predictions=predictions)


def delay_curves(config, deltas, seed=0, after_escape=CURVE_STEPS_AFTER_ESCAPE) -> dict:
    """Gradient-descent runs with their test loss, for the figure of the delay: the plateau,
    then the fall of the train and test loss when ``Theta*`` is learned (docs/theory.md 7.7).

    Each run is :func:`rmt.experiments.learning.run_descent` at ``(delta, seed)`` with its test
    pass: the same data, start, plateau and escape as :func:`plateau_run` there.

    Parameters
    ----------
    config : rmt.RunConfig
        As for :func:`plateau_run` (``d``, the training settings and ``train_steps``).
    deltas : sequence of float
        The sample ratios to draw (a few).
    seed : int
        The run seed.
    after_escape : int or None
        End each run this many steps after its escape (``None``: the whole budget).

    Returns
    -------
    dict
        ``{delta: GDRun}``.

    Raises
    ------
    TypeError, ValueError
        For a ``delta`` that is not finite and > 0, a negative ``seed`` or ``after_escape``.

    Examples
    --------
    >>> import rmt
    >>> curves = delay_curves(rmt.RunConfig(d=100, train_steps=1000), [6.0], after_escape=50)
    >>> run = curves[6.0]
    >>> run.steps - run.escape_step, bool(run.test_loss[-1] < 0.9 * run.test_loss[run.plateau_step])
    (50, True)
    """
    seed = check_positive_int(seed, "seed", minimum=0)
    after_escape = parse_stop_after_escape(after_escape)
    curves = {}
    for delta in parse_deltas(deltas):
        curves[delta] = run_descent(config, delta, seed, stop_after_escape=after_escape)[1]
    return curves
