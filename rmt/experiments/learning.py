"""What gradient descent does across ``delta`` (docs/theory.md section 7).

One *run* is a pair ``(delta, seed)``: sample a training set and a held-out test set of the same
model, run full-batch gradient descent from a small random start (:func:`rmt.gradient_descent`),
segment it into its two phases, and at the plateau ``W1`` compute the bottom Hessian eigenpairs,
their ``Theta*`` overlaps, the order parameter and the decision "negative ``Theta*`` outlier or
not" (:func:`rmt.thresholds.statistics.order_parameter`,
:func:`rmt.thresholds.statistics.descent_outlier_decision`), the plug-in prediction, and the
predicted escape (:func:`rmt.dynamics.escape.predict_escape`).  :func:`trained_thresholds` reads
``delta_NN`` off the order parameter and ``delta_GD`` off the runs that learned.  Functions
here return data (dataclasses; the per-run rows are flat dicts, the rows of the tidy tables).
With ``out``, :func:`run_learn` appends each finished run to the resumable tables of the result
store (:mod:`rmt.experiments.store`), so that an interrupted sweep loses nothing; the figures
and summaries are the application's (:mod:`rmt.app.commands`).
"""

from __future__ import annotations

import pathlib
import time
from dataclasses import dataclass, replace

import numpy as np
from threadpoolctl import threadpool_limits

from rmt.dynamics.descent import gradient_descent
from rmt.dynamics.escape import predict_escape
from rmt.eigen import extreme_eigs, overlaps
from rmt.experiments.store import ResumableCSV, check_resumable, write_manifest
from rmt.experiments.theory import theory_at
from rmt.freeprob import delta_alg
from rmt.freeprob.plugin import FirstPhaseTrajectory, cavity_self_term, plugin_law, sample_gradients
from rmt.kernels.threads import adaptive_threads
from rmt.operators import distributed
from rmt.operators.hessian import Hessian
from rmt.thresholds.points import PopulationPoint
from rmt.thresholds.population import population_threshold
from rmt.thresholds.statistics import (
    FWER,
    INTERVAL_ALPHA,
    ORDER_LEVEL,
    CrossingEstimate,
    TransitionEstimate,
    bisect_order_parameter,
    bisect_transition,
    crossing_estimate,
    descent_outlier_decision,
    order_level,
    order_parameter,
    overlap_null_level,
    significance_interval,
)

#: one row per run
LEARN_COLUMNS = [
    "delta",
    "seed",
    "n",
    "d",
    "learned",
    "final_overlap",
    "final_train_loss",
    "final_test_loss",
    "peak_step",
    "plateau_step",
    "plateau_rule",
    "overlap_at_plateau",
    "grad_norm_at_plateau",
    "escape_step",
    "escape_steps",
    "predicted_escape_steps",
    "race_won",
    "bottom_eigenvalue",
    "bottom_overlap",
    "has_descent_outlier",
    "outlier_value",
    "outlier_overlap",
    "gap_ratio",
    "plugin_edge_lo",
    "plugin_outlier",
    "plugin_overlap",
    "plugin_bottom",
    "steps",
    "diverged",
    "time_gd_s",
    "time_eigs_s",
    "time_theory_s",
]
LEARN_KEY = ("delta", "seed")
#: one row per bottom eigenpair at W1
EIG_COLUMNS = ["delta", "seed", "index", "eigenvalue", "overlap_theta", "residual"]
EIG_KEY = ("delta", "seed", "index")
#: learning curves, one row every CURVE_STRIDE steps
CURVE_COLUMNS = ["delta", "seed", "step", "train_loss", "test_loss", "grad_norm", "overlap"]
CURVE_KEY = ("delta", "seed", "step")
CURVE_STRIDE = 5
#: eigenpairs computed at W1 (the separation rule needs a few above the outliers)
N_EIGS_AT_W1 = 8
#: gradient descent has learned Theta* when the final overlap reaches this
LEARNED_OVERLAP = 0.5


@dataclass(frozen=True)
class LearnTables:
    """The tables of a learn sweep at one ``d``, sorted by their keys.

    ``rows``: one :data:`LEARN_COLUMNS` row per run; ``eigs``: the bottom eigenpairs at ``W1``
    (:data:`EIG_COLUMNS`); ``curves``: the learning curves every :data:`CURVE_STRIDE` steps
    (:data:`CURVE_COLUMNS`).
    """

    rows: list
    eigs: list
    curves: list


@dataclass(frozen=True)
class ReferenceThresholds:
    """``delta_alg`` (spectral methods) and ``delta_pop`` (population point) of a configuration.

    ``delta_pop`` is ``None`` when the population point or its threshold could not be had;
    ``reason`` then says why (and otherwise notes what the threshold search reported).
    """

    delta_alg: float
    delta_pop: float | None
    reason: str


@dataclass(frozen=True)
class GridThresholds:
    """The simulated thresholds read off one ``d``'s grid of runs (docs/theory.md 7.4).

    ``delta_nn``: where the seed mean of the order parameter at ``W1`` crosses its level;
    ``delta_gd``: where the seed majority of runs learns (``None`` when the runs did not train
    to the end).
    """

    delta_nn: CrossingEstimate
    delta_gd: TransitionEstimate | None

    def as_dict(self) -> dict:
        """Both estimates as plain values (``None`` where there is no number)."""
        gd = None if self.delta_gd is None else self.delta_gd.as_dict()
        return {"delta_nn": self.delta_nn.as_dict(), "delta_gd": gd}


@dataclass(frozen=True)
class TrainedThresholds(GridThresholds):
    """:class:`GridThresholds` found by bisection, with the runs it evaluated (``runs``,
    :data:`LEARN_COLUMNS` rows sorted by ``delta`` and seed)."""

    runs: list


@dataclass(frozen=True)
class LearnSweep:
    """A learn sweep at ``config.d`` and every ``config.sizes``.

    ``by_d``: ``{d: LearnTables}``; ``per_d``: ``{d: GridThresholds}``; ``reference``: the
    thresholds of theory at the same configuration; ``d``: the main size.
    """

    by_d: dict
    per_d: dict
    reference: ReferenceThresholds
    d: int

    @property
    def grid(self) -> GridThresholds:
        """The thresholds at the main size ``d``."""
        return self.per_d[self.d]


def sample_pair(config, delta, seed):
    """Training set (``n = delta d``) and an independent test set of the same size and model."""
    rng = config.rng_for(delta, seed)
    model = config.model()
    data = model.sample(config.n_of(delta), config.d, rng=rng)
    test = model.sample(config.n_of(delta), config.d, rng=rng, theta=data.theta)
    return data, test, rng


def run_descent(
    config,
    delta,
    seed,
    progress=False,
    *,
    with_test=True,
    stop_at_plateau=False,
    stop_after_escape=None,
):
    """The gradient-descent run of ``(delta, seed)``: ``(data, GDRun, rng)``.

    The test set is always drawn (it keeps the generator in step, so that every caller gets
    the same start); ``with_test=False`` skips its pass at each step.  ``stop_at_plateau``
    stops the run once the plateau is confirmed, ``stop_after_escape`` that many steps after
    the escape (:func:`rmt.gradient_descent`)."""
    data, test, rng = sample_pair(config, delta, seed)
    run = gradient_descent(
        config.net(),
        data,
        test=test if with_test else None,
        init_scale=config.init_scale,
        lr=config.lr,
        steps=config.train_steps,
        weight_decay=config.weight_decay,
        escape_overlap=LEARNED_OVERLAP,
        stop_at_plateau=stop_at_plateau,
        stop_after_escape=stop_after_escape,
        rng=rng,
        progress=progress,
    )
    return data, run, rng


def hessian_at_plateau(config, data, run, rng):
    """Bottom eigenpairs of ``H(W1)``, their overlaps, the outlier decision and the gradient."""
    net = config.net()
    H = Hessian(net, data, run.W1, weight_decay=config.weight_decay)
    q = min(N_EIGS_AT_W1, H.shape[0] - 1)
    res = extreme_eigs(H, k=q, which="smallest", method=config.method, tol=1e-8, rng=rng)
    ov = overlaps(res.vectors, data.theta, net.width)
    decision = descent_outlier_decision(res.values, ov, data.d, data.theta.shape[1], net.width)
    return H, res, ov, decision


@adaptive_threads
def plateau_point(config, delta, seed) -> dict:
    """The order parameter of ``(delta, seed)`` at ``W1`` alone (docs/theory.md section 7.4).

    The same data, start and ``W1`` as :func:`learn_point`, but gradient descent stops once
    the plateau is confirmed, and there is no test set pass, continuation or plug-in law.

    Parameters
    ----------
    config : rmt.RunConfig
        Model, network, ``d`` and training options.
    delta : float
        Sample ratio ``n / d``.
    seed : int
        Run seed.

    Returns
    -------
    dict
        ``delta``, ``seed``, ``d``, ``plateau_step``, ``bottom_eigenvalue``,
        ``bottom_overlap``, ``order_parameter``, ``has_descent_outlier``, ``gap_ratio``,
        ``eigenvalues`` and ``overlaps`` (the bottom :data:`N_EIGS_AT_W1`), ``seconds``; the
        spectral entries are ``None`` (order parameter 0) when no plateau was found.
    """

    t0 = time.perf_counter()
    row = {"delta": float(delta), "seed": int(seed), "d": config.d, "plateau_step": None}
    row.update(dict.fromkeys(PLATEAU_SPECTRUM, None))
    with threadpool_limits(limits=1, user_api="blas"):
        data, run, rng = run_descent(config, delta, seed, with_test=False, stop_at_plateau=True)
        if run.W1 is not None:
            _, res, ov, dec = hessian_at_plateau(config, data, run, rng)
            row.update(
                plateau_step=run.plateau_step,
                bottom_eigenvalue=float(res.values[0]),
                bottom_overlap=float(ov[0]),
                has_descent_outlier=dec.has_outlier,
                gap_ratio=dec.gap_ratio,
                eigenvalues=[float(v) for v in res.values],
                overlaps=[float(o) for o in ov],
            )
    row["order_parameter"] = order_parameter(row["bottom_eigenvalue"], row["bottom_overlap"])
    row["seconds"] = time.perf_counter() - t0
    return row


#: the spectral entries of a :func:`plateau_point` row
PLATEAU_SPECTRUM = (
    "bottom_eigenvalue",
    "bottom_overlap",
    "has_descent_outlier",
    "gap_ratio",
    "eigenvalues",
    "overlaps",
)


def plateau_trajectory(config, data, run):
    """The iterates ``W_0 .. W_T`` of ``run`` up to its plateau ``T``, replayed in numpy (the
    response kernel of the cavity correction needs them; docs/theory.md section 7.5)."""
    net, W = config.net(), run.W0.copy()
    iterates, gnorm = [], []
    for _ in range(run.plateau_step + 1):
        grad = data.X.T @ sample_gradients(net, data, W) / data.n + config.weight_decay * W
        iterates.append(W)
        gnorm.append(float(np.linalg.norm(grad)))
        W = W - run.lr * grad
    return FirstPhaseTrajectory(np.array(iterates), np.array(gnorm), run.lr, True)


def plugin_at_plateau(config, data, run, delta, rng) -> dict:
    """The cavity-corrected plug-in prediction at ``W1`` (:mod:`rmt.freeprob.plugin`)."""
    net = config.net()
    traj = plateau_trajectory(config, data, run)
    self_term = cavity_self_term(net, data, traj, rng=rng)
    law = plugin_law(net, data, run.W1, self_term=self_term, weight_decay=config.weight_decay)
    return theory_at(law, delta, 1)


@adaptive_threads
def learn_point(config, delta, seed) -> dict:
    """Everything recorded for one gradient-descent run (docs/theory.md sections 7.1-7.5).

    Gradient descent from the stream of ``(delta, seed)``, the bottom eigenpairs of the
    Hessian at its plateau ``W1``, the outlier decision, the predicted escape and the
    cavity-corrected plug-in prediction.  BLAS runs on one thread, as on a single-threaded
    Dask worker, so a run gives the same numbers wherever it runs.

    Parameters
    ----------
    config : rmt.RunConfig
        Model, network, ``d`` and training options (``train_steps``, ``lr``, ...).
    delta : float
        The sample ratio ``n / d``.
    seed : int
        The run seed.

    Returns
    -------
    dict
        ``{"row": ..., "eigs": [...], "curves": [...]}``: the run's row
        (:data:`LEARN_COLUMNS`; the spectral entries are ``None`` without a plateau), one
        row per bottom eigenpair at ``W1``, and one row per step of the curves.

    Examples
    --------
    Phase retrieval at ``delta = 6``: the run learns (final overlap at least
    :data:`LEARNED_OVERLAP`) after its plateau, and the row's bottom eigenpair is the first
    of the eigenpairs at ``W1``:

    >>> import rmt
    >>> cfg = rmt.RunConfig(d=60, point="trained", train_steps=400)
    >>> out = rmt.learn_point(cfg, 6.0, 0)
    >>> row = out["row"]
    >>> row["learned"], row["final_overlap"] >= 0.5, row["plateau_step"] < row["escape_step"]
    (True, True, True)
    >>> row["bottom_eigenvalue"] == out["eigs"][0]["eigenvalue"]
    True
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _learn_point(config, float(delta), int(seed))


def _learn_point(config, delta, seed) -> dict:
    t0 = time.perf_counter()
    data, run, rng = run_descent(config, delta, seed)
    row = _run_summary(config, delta, seed, data, run)
    eigs = []
    t1 = time.perf_counter()
    if run.W1 is not None:
        H, res, ov, dec = hessian_at_plateau(config, data, run, rng)
        t2 = time.perf_counter()
        grad = H.net.loss_and_grad(data, run.W1, config.weight_decay)[1]
        pred = predict_escape(
            res.values, res.vectors, grad, run.W1, run.lr, data.theta, LEARNED_OVERLAP
        )
        row.update(_plateau_columns(res, ov, dec, pred))
        try:
            th = plugin_at_plateau(config, data, run, delta, rng)
            row.update(
                plugin_edge_lo=th["edge_lo"],
                plugin_outlier=th["outliers"][0] if th["outliers"] else None,
                plugin_overlap=th["overlaps"][0] if th["overlaps"] else None,
                plugin_bottom=th["bottom"],
            )
        except RuntimeError:  # a failed theory solve leaves the cells empty, never a number
            pass
        t3 = time.perf_counter()
        row.update(time_eigs_s=t2 - t1, time_theory_s=t3 - t2)
        eigs = [
            {
                "delta": delta,
                "seed": seed,
                "index": i,
                "eigenvalue": float(res.values[i]),
                "overlap_theta": float(ov[i]),
                "residual": float(res.residuals[i]),
            }
            for i in range(res.k)
        ]
    row["time_gd_s"] = t1 - t0
    return {"row": row, "eigs": eigs, "curves": _curve_rows(delta, seed, run)}


def _run_summary(config, delta, seed, data, run) -> dict:
    row = {c: None for c in LEARN_COLUMNS}
    p = run.plateau_step
    final = float(run.overlap[-1]) if run.overlap.size else float("nan")
    row.update(
        delta=delta,
        seed=seed,
        n=data.n,
        d=data.d,
        learned=bool(final >= LEARNED_OVERLAP),
        final_overlap=final,
        final_train_loss=float(run.loss[-1]),
        final_test_loss=float(run.test_loss[-1]),
        peak_step=run.peak_step,
        plateau_step=p,
        plateau_rule=run.phases.rule,
        overlap_at_plateau=None if p is None else float(run.overlap[p]),
        grad_norm_at_plateau=None if p is None else float(run.grad_norm[p]),
        escape_step=run.escape_step,
        escape_steps=None if run.escape_step is None else run.escape_step - p,
        steps=run.steps,
        diverged=run.diverged,
    )
    return row


def _plateau_columns(res, ov, dec, pred) -> dict:
    return dict(
        bottom_eigenvalue=float(res.values[0]),
        bottom_overlap=float(ov[0]),
        has_descent_outlier=dec.has_outlier,
        outlier_value=dec.value,
        outlier_overlap=dec.overlap,
        gap_ratio=dec.gap_ratio,
        predicted_escape_steps=pred.steps,
        race_won=pred.race_won if pred.steps is not None else None,
    )


def _curve_rows(delta, seed, run) -> list[dict]:
    steps = np.arange(0, run.loss.size, CURVE_STRIDE)
    return [
        {
            "delta": delta,
            "seed": seed,
            "step": int(t),
            "train_loss": float(run.loss[t]),
            "test_loss": float(run.test_loss[t]),
            "grad_norm": float(run.grad_norm[t]),
            "overlap": float(run.overlap[t]),
        }
        for t in steps
    ]


def threshold_from_grid(rows, column, alpha=0.1) -> dict:
    """Where the seed majority of ``column`` (a boolean per run) switches on a grid of ``delta``.

    Parameters
    ----------
    rows : list of dict
        Runs with ``delta`` and ``column`` (``None`` entries are skipped).
    column : str
        The boolean outcome, e.g. ``"learned"``.
    alpha : float
        One-sided level of :func:`rmt.thresholds.statistics.significance_interval`.

    Returns
    -------
    TransitionEstimate
        ``delta``: the geometric midpoint between the last ``delta`` with a "no" majority below
        the first with a "yes" majority (``bracket``); ``found`` is False with a ``reason`` when
        the grid does not bracket it; ``interval`` at level ``alpha``; ``evaluations``.
    """
    by = {}
    for r in rows:
        if r.get(column) is not None:
            by.setdefault(float(r["delta"]), []).append(bool(r[column]))
    evals = [(x, sum(v), len(v)) for x, v in sorted(by.items())]
    nan = float("nan")
    if not evals:
        return TransitionEstimate(
            delta=nan,
            bracket=(nan, nan),
            interval=(nan, nan),
            alpha=alpha,
            found=False,
            reason="no runs",
        )
    yes = [x for x, k, s in evals if 2 * k >= s]
    no = [x for x, k, s in evals if 2 * k < s]
    first_yes = min(yes) if yes else None
    below = [x for x in no if first_yes is None or x < first_yes]
    delta, bracket, reason = nan, (nan, nan), ""
    if first_yes is None:
        reason = f"the majority is still 'no' at delta = {evals[-1][0]:g}"
    elif not below or first_yes == evals[0][0]:
        reason = f"the majority is already 'yes' at delta = {evals[0][0]:g}"
    else:
        bracket = (max(below), first_yes)
        delta = float(np.sqrt(bracket[0] * bracket[1]))
    limits = (evals[0][0], evals[-1][0])
    return TransitionEstimate(
        delta=delta,
        bracket=bracket,
        interval=tuple(significance_interval(evals, alpha, limits)),
        alpha=alpha,
        found=not reason,
        reason=reason,
        evaluations=[tuple(e) for e in evals],
    )


def order_parameter_from_grid(rows, config, alpha=None) -> CrossingEstimate:
    """``delta_NN`` from the order parameter of a sweep's runs (docs/theory.md section 7.4).

    Parameters
    ----------
    rows : list of dict
        :data:`LEARN_COLUMNS` rows of one ``d``.
    config : rmt.RunConfig
        Gives ``k`` and the width ``m`` of the null law.
    alpha : float, optional
        Two-sided level of the interval (default
        :data:`rmt.thresholds.statistics.INTERVAL_ALPHA`).

    Returns
    -------
    CrossingEstimate
        The crossing, its level counting every run of the grid; ``found`` False with the reason
        "no runs" without rows.
    """
    by = {}
    for r in rows:
        phi = order_parameter(r.get("bottom_eigenvalue"), r.get("bottom_overlap"))
        by.setdefault(float(r["delta"]), []).append(phi)
    alpha = INTERVAL_ALPHA if alpha is None else alpha
    if not by:
        return CrossingEstimate(
            delta=None,
            bracket=None,
            interval=None,
            level=ORDER_LEVEL,
            alpha=alpha,
            found=False,
            reason="no runs",
        )
    d, k, m = int(rows[0]["d"]), config.model().k, config.width
    level = order_level(d, k, m, len(rows))
    est = crossing_estimate(by.items(), level, alpha)
    null = overlap_null_level(d, k, m, 1.0 - FWER, len(rows))
    return replace(est, stated_level=ORDER_LEVEL, null_level=null)


@adaptive_threads
def trained_thresholds(
    config, lo, hi, *, rtol=0.1, max_evals=8, alpha=0.1, level=None, gd=True, progress=None
) -> TrainedThresholds:
    """``delta_NN`` at the trained point and the learning threshold of GD, by bisection.

    Implements docs/theory.md section 7.4.  ``delta_NN`` is where the seed mean of the order
    parameter at ``W1`` (:func:`rmt.thresholds.statistics.order_parameter`) crosses its level
    (:func:`rmt.thresholds.statistics.bisect_order_parameter`); ``delta_GD`` is where the seed
    majority learns (:func:`rmt.thresholds.statistics.bisect_transition`; final overlap at least
    :data:`LEARNED_OVERLAP` after ``config.train_steps`` steps).  Both run over
    ``config.seeds`` at ``config.d`` and share one cache of runs (:func:`learn_point`).

    Parameters
    ----------
    config : rmt.RunConfig
        Model, network, ``d``, seeds and training options.
    lo, hi : float
        Search range of ``delta``.
    rtol : float
        Relative width at which each bisection stops.
    max_evals : int
        Evaluated ``delta`` per bisection; that of ``delta_NN`` adds up to 4 that confirm
        the ends of its interval (its null level counts them all).
    alpha : float
        Level of both intervals.
    level : float, optional
        Stated level of the order parameter (default
        :data:`rmt.thresholds.statistics.ORDER_LEVEL`).
    gd : bool
        Also locate ``delta_GD``.  Without it each run stops at its plateau
        (:func:`plateau_point`), a fraction of the cost, and ``delta_gd`` is ``None``.
    progress : callable, optional
        Called with a short text after each evaluation.

    Returns
    -------
    TrainedThresholds
        ``delta_nn`` (a crossing estimate), ``delta_gd`` (``None`` without ``gd``) and the
        evaluated runs.

    Examples
    --------
    The simulated ``delta_NN`` of phase retrieval, softplus/Huber, m = 2, at d = 1000 with 4 seeds
    (about 20 s; ``tests/test_learning.py`` checks it lies in [2, 3.25]):

    >>> import rmt
    >>> res = rmt.trained_thresholds(rmt.RunConfig(seeds=(0, 1, 2, 3)), 1.5, 4.0, gd=False)  # doctest: +SKIP
    >>> res.delta_nn.found, 2.0 <= res.delta_nn.delta <= 3.25  # doctest: +SKIP
    (True, True)
    """
    cache = {}
    point = learn_point if gd else plateau_point

    def run(x, s):
        key = (round(float(x), 12), int(s))
        if key not in cache:
            out = point(config, x, s)
            cache[key] = out["row"] if gd else out
        return cache[key]

    def phi(x, s):
        r = run(x, s)
        return order_parameter(r["bottom_eigenvalue"], r["bottom_overlap"])

    def labelled(name):
        return None if progress is None else (lambda text: progress(f"{name}: {text}"))

    opts = dict(rtol=rtol, max_evals=max_evals, alpha=alpha)
    k, m = config.model().k, config.width
    level = ORDER_LEVEL if level is None else level
    nn = bisect_order_parameter(
        phi,
        lo,
        hi,
        config.seeds,
        config.d,
        k,
        m,
        level=level,
        progress=labelled("delta_NN"),
        **opts,
    )
    gd_estimate = None
    if gd:
        learned = lambda x, s: bool(run(x, s)["learned"])  # noqa: E731
        gd_estimate = bisect_transition(
            learned, lo, hi, config.seeds, progress=labelled("delta_GD"), **opts
        )
    runs = sorted(cache.values(), key=lambda r: (r["delta"], r["seed"]))
    return TrainedThresholds(delta_nn=nn, delta_gd=gd_estimate, runs=runs)


def trained_thresholds_by_size(config, lo, hi, progress=None) -> dict:
    """:func:`trained_thresholds` at ``config.d`` and at each of ``config.sizes``.

    Parameters
    ----------
    config : rmt.RunConfig
        The configuration; its ``sizes`` are the further dimensions of the finite-size trend.
    lo, hi : float
        Search range of ``delta``.
    progress : callable, optional
        Called with a short text before each size and after each evaluation.

    Returns
    -------
    dict
        ``{d: TrainedThresholds}``, in the order ``config.d``, then ``config.sizes``.
    """
    by_d = {}
    for d in (config.d, *config.sizes):
        cfg = replace(config, d=int(d), sizes=())
        if progress is not None:
            progress(f"d = {d}: bisection over delta in [{lo:g}, {hi:g}], seeds {list(cfg.seeds)}")
        by_d[int(d)] = trained_thresholds(cfg, lo, hi, progress=progress)
    return by_d


def _open_learn_tables(config, out):
    """The three resumable tables of a learn sweep in ``out`` (or ``None`` without ``out``)."""

    if out is None:
        return None
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {
        "row": ResumableCSV(out / "learn.csv", LEARN_COLUMNS, LEARN_KEY),
        "eigs": ResumableCSV(out / "learn_eigs.csv", EIG_COLUMNS, EIG_KEY),
        "curves": ResumableCSV(out / "learning_curves.csv", CURVE_COLUMNS, CURVE_KEY),
    }
    if tables["row"].rows:
        check_resumable(out, config, "learn", "a learn sweep")
    return tables


@adaptive_threads
def run_learn(config, out=None, scheduler=None, progress=None) -> LearnTables:
    """Every ``(delta, seed)`` of ``config`` through :func:`learn_point`; resumable.

    With ``out`` the rows go to ``learn.csv`` (one per run), ``learn_eigs.csv`` (bottom
    eigenpairs at ``W1``) and ``learning_curves.csv`` as each run finishes; a rerun with more
    deltas or seeds adds only the new runs.  Returns the :class:`LearnTables` of every run, old
    and new, sorted.  ``scheduler`` is passed to :func:`rmt.operators.distributed.run_tasks`.

    Examples
    --------
    Gradient descent at two values of ``delta``, d = 200, one seed:

    >>> import rmt
    >>> cfg = rmt.RunConfig(d=200, deltas=(1.0, 6.0), train_steps=1500, point="trained")
    >>> tables = rmt.run_learn(cfg)  # doctest: +SKIP
    >>> [row["learned"] for row in tables.rows]  # doctest: +SKIP
    [False, True]
    """
    scheduler = config.scheduler if scheduler is None else scheduler
    tables = _open_learn_tables(config, out)
    got = {k: list(t.rows) for k, t in tables.items()} if tables else {"row": [], "eigs": []}
    got.setdefault("curves", [])
    done = {(r["delta"], r["seed"]) for r in got["row"]}
    tasks = [(config, x, s) for x in config.deltas for s in config.seeds if (x, s) not in done]
    tasks.sort(key=lambda t: -config.n_of(t[1]))
    started, new = time.perf_counter(), []

    def on_result(task, result):
        for key in ("curves", "eigs", "row"):  # the run's row last: it marks the run done
            part = result[key] if key != "row" else [result["row"]]
            got[key].extend(part)
            if tables:
                tables[key].append(part)
        new.append(task)

    status = "interrupted"
    try:
        distributed.run_tasks(
            learn_point, tasks, scheduler=scheduler, on_result=on_result, progress=progress
        )
        status = "complete"
        for table in (tables or {}).values():
            table.sort()  # a finished sweep's tables are sorted by their keys
    finally:
        # a run that stopped before its first point (a scheduler that cannot be reached, an
        # early Ctrl-C) leaves the folder as it was: no manifest of a run that never ran
        if tables and (status == "complete" or new):
            files = ["learn.csv", "learn_eigs.csv", "learning_curves.csv"]
            timings = {"wall_time_s": time.perf_counter() - started}
            write_manifest(out, "learn", config, config.seeds, timings, files, status=status)
    order = ("delta", "seed", "index", "step")
    return LearnTables(
        rows=sorted(got["row"], key=lambda r: (r["delta"], r["seed"])),
        eigs=sorted(got["eigs"], key=lambda r: tuple(r[k] for k in order[:3])),
        curves=sorted(got["curves"], key=lambda r: (r["delta"], r["seed"], r["step"])),
    )


def reference_thresholds(config) -> ReferenceThresholds:
    """``delta_pop`` (population point, free probability) and ``delta_alg`` of ``config``'s
    model and network; ``None`` with a reason when the population point cannot be had."""
    model, net = config.model(), config.net()
    alg = float(delta_alg(model).value)
    try:
        res = population_threshold(model, net, point=PopulationPoint.from_model(model, net))
    except (RuntimeError, ValueError, TypeError) as exc:  # reported, never a made-up number
        return ReferenceThresholds(delta_alg=alg, delta_pop=None, reason=f"failed: {exc}")
    return ReferenceThresholds(delta_alg=alg, delta_pop=float(res.delta_pop), reason=res.reason)


@adaptive_threads
def learn_sweep(config, out=None, progress=None) -> LearnSweep:
    """``run_learn`` at ``config.d`` and every ``config.sizes``, with the thresholds read off.

    Parameters
    ----------
    config : rmt.RunConfig
        The sweep (``deltas``, ``seeds``, ``d`` and ``sizes``).
    out : path, optional
        Each ``d`` writes its resumable tables to ``out/d<d>/``.
    progress : bool or None
        Show progress bars (default: when stderr is a terminal,
        :func:`rmt.progress.progress_enabled`).

    Returns
    -------
    LearnSweep
        ``by_d`` (``{d: LearnTables}``); ``per_d`` (``{d: GridThresholds}``): ``delta_gd``
        (seed majority learns, :func:`threshold_from_grid`) and ``delta_nn`` (the order
        parameter at ``W1`` crosses its level, :func:`order_parameter_from_grid`,
        docs/theory.md section 7.4) at every ``d``, ``grid`` those at ``config.d``;
        ``reference``, ``delta_pop`` and ``delta_alg`` (:func:`reference_thresholds`).
    """
    by_d = {}
    for d in (config.d, *config.sizes):
        cfg = replace(config, d=int(d), sizes=())
        sub = None if out is None else pathlib.Path(out) / f"d{d}"
        by_d[int(d)] = run_learn(cfg, sub, progress=progress)
    per_d = {
        d: GridThresholds(
            delta_nn=order_parameter_from_grid(r.rows, config),
            delta_gd=threshold_from_grid(r.rows, "learned"),
        )
        for d, r in by_d.items()
    }
    return LearnSweep(by_d=by_d, per_d=per_d, reference=reference_thresholds(config), d=config.d)


#: the configurations of ``rmt threshold --point trained --table``
TRAINED_TABLE_CONFIGS = [
    dict(target="phase_retrieval", activation="softplus", loss="huber", width=1),
    dict(target="phase_retrieval", activation="softplus", loss="huber", width=2),
    dict(target="phase_retrieval", activation="softplus", loss="huber", width=3),
    dict(target="abs", activation="softplus", loss="huber", width=1),
    dict(target="abs", activation="softplus", loss="huber", width=2),
    dict(target="abs", activation="softplus", loss="huber", width=3),
    dict(target="phase_retrieval", activation="quadratic", loss="huber", width=2),
    dict(target="phase_retrieval", activation="erf", loss="huber", width=2),
]
TRAINED_TABLE_COLUMNS = [
    "target", "activation", "loss", "width", "d", "seeds",
    "delta_nn", "delta_nn_lo", "delta_nn_hi", "delta_gd", "delta_gd_lo", "delta_gd_hi",
    "delta_pop", "delta_alg", "seconds",
]  # fmt: skip


@adaptive_threads
def trained_threshold_table(base, lo, hi, variants=None, progress=None) -> list[dict]:
    """``delta_NN``, ``delta_GD`` (with intervals), ``delta_pop`` and ``delta_alg`` per variant.

    Parameters
    ----------
    base : rmt.RunConfig
        ``d``, seeds and training options shared by every row.
    lo, hi : float
        Search range of ``delta`` (:func:`trained_thresholds`).
    variants : list of dict, optional
        ``RunConfig`` fields replaced in ``base`` (default :data:`TRAINED_TABLE_CONFIGS`).
    progress : callable, optional
        Called with a short text after each evaluation.

    Returns
    -------
    list of dict
        :data:`TRAINED_TABLE_COLUMNS` rows; a threshold that was not found, or an open end of
        its interval, is ``None``.
    """
    rows = []
    for v in TRAINED_TABLE_CONFIGS if variants is None else variants:
        cfg = replace(base, **v)
        t0 = time.perf_counter()
        res = trained_thresholds(cfg, lo, hi, progress=progress)
        ref = reference_thresholds(cfg)
        row = {k: getattr(cfg, k) for k in ("target", "activation", "loss", "width", "d")}
        row["seeds"] = len(cfg.seeds)
        for key in ("delta_nn", "delta_gd"):
            est = getattr(res, key).as_dict()
            ends = est["interval"] or [None, None]
            row.update({key: est["delta"], f"{key}_lo": ends[0], f"{key}_hi": ends[1]})
        row.update(delta_pop=ref.delta_pop, delta_alg=ref.delta_alg)
        rows.append({**row, "seconds": time.perf_counter() - t0})
    return rows
