"""Theory against simulation across ``delta`` (docs/theory.md sections 3, 4 and 6).

One *point* of a sweep is a pair ``(delta, seed)``: sample the data, build the post-first-phase
weights, compute the extreme eigenpairs of the Hessian and their overlaps with ``Theta*``, and
record the predictions next to them.  Rows are tidy: one per ``(delta, seed, index)``, where
``index`` counts the smallest eigenvalues from the bottom.
"""

from __future__ import annotations

import pathlib
import time
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from rmt.eigen import extreme_eigs, overlaps
from rmt.experiments.config import RunConfig
from rmt.experiments.simulation import prepare_point, simulate_point
from rmt.experiments.spectra import DENSE_LIMIT, spectrum_panel
from rmt.experiments.store import (
    ResumableCSV,
    check_resumable,
    timestamp,
    to_jsonable,
    write_json,
    write_manifest,
)
from rmt.experiments.theory import point_law, theory_at, theory_curve
from rmt.freeprob import SpikeLaw
from rmt.kernels.threads import adaptive_threads
from rmt.operators import distributed
from rmt.thresholds.population import population_threshold

SWEEP_COLUMNS = [
    "delta",
    "seed",
    "index",
    "n",
    "d",
    "point",
    "eigenvalue",
    "overlap_theta",
    "residual",
    "n_matvec",
    "theory_edge_lo",
    "theory_edge_hi",
    "theory_outlier",
    "theory_overlap_theta",
    "theory_bottom",
    "plugin_edge_lo",
    "plugin_outlier",
    "plugin_overlap_theta",
    "plugin_bottom",
    "plugin_error",
    "time_point_s",
    "time_eigs_s",
    "time_theory_s",
]
SWEEP_KEY = ("delta", "seed", "index")
#: the column dictionary of sweep.csv, written beside it as columns.json.  An empty cell is a
#: value that does not exist (no predicted outlier at this index); nan is never written for it
SWEEP_COLUMN_DOCS = {
    "delta": "sample ratio n/d",
    "seed": "run seed; the data are drawn from default_rng([seed, round(1e6 delta)])",
    "index": "0 for the smallest eigenvalue, 1 for the next, ...",
    "n": "number of samples",
    "d": "dimension",
    "point": "kind of post-first-phase point W (population, trained, zero, given)",
    "eigenvalue": "index-th smallest eigenvalue of the simulated Hessian at W",
    "overlap_theta": "overlap of its eigenvector with Theta* (rmt.overlaps), in [0, 1]",
    "residual": "||H v - lambda v|| of the returned pair",
    "n_matvec": "Hessian-vector products of the eigensolver",
    "theory_edge_lo": "left bulk edge of the Gaussian law at W (docs/theory.md section 4)",
    "theory_edge_hi": "right bulk edge of the Gaussian law at W (inf when D is unbounded above)",
    "theory_outlier": "index-th predicted outlier left of the bulk; empty when there is none",
    "theory_overlap_theta": "its predicted Theta* overlap; empty when there is no outlier",
    "theory_bottom": "predicted smallest eigenvalue: the first outlier, else the left edge",
    "plugin_edge_lo": "left bulk edge of the plug-in law of the sample (section 6)",
    "plugin_outlier": "index-th plug-in outlier; empty when there is none",
    "plugin_overlap_theta": "its plug-in Theta* overlap; empty when there is no outlier",
    "plugin_bottom": "plug-in smallest eigenvalue",
    "plugin_error": "eigenvalue at index 0 minus plugin_bottom",
    "time_point_s": "seconds to sample the data and build W and the Hessian",
    "time_eigs_s": "seconds of the eigensolver and the overlaps",
    "time_theory_s": "seconds of the two predictions",
}


def _theory_pair(config, sim, delta, point=None):
    """Gaussian-law and plug-in predictions for the Hessian at ``W`` (docs/theory.md section 6).

    At a data-independent ``point`` the Gaussian law is the point's (``point_law``: built once
    per configuration and reused at every ``delta`` and seed); otherwise it is built from
    ``Q = W^T W`` and ``M = W^T Theta*`` of this sample's ``W``."""
    W, theta = sim.W, sim.data.theta
    law = None if point is None else point_law(config, point)
    if law is None:
        law = SpikeLaw.from_network(
            config.model(), config.net(), W.T @ W, W.T @ theta, weight_decay=config.weight_decay
        )
    plug = SpikeLaw.from_hessian(sim.hessian, theta)
    return theory_at(law, delta, config.n_eigs), theory_at(plug, delta, config.n_eigs)


@adaptive_threads
def run_point(config: RunConfig, delta: float, seed: int, point=None) -> list[dict]:
    """Simulate and predict one ``(delta, seed)`` point; return its tidy rows.

    The smallest eigenpairs of the simulated Hessian next to the predictions of the Gaussian
    law and of the plug-in law (docs/theory.md sections 3, 4 and 6).  BLAS runs on one thread
    here, as it does on a single-threaded Dask worker, and the Numba products sum fixed row
    chunks, so a point gives bit-identical rows wherever it runs.

    Parameters
    ----------
    config : rmt.RunConfig
        Model, network, point, ``d``, ``n_eigs`` and eigensolver.
    delta : float
        The sample ratio ``n / d``.
    seed : int
        The run seed.
    point : rmt.Point, optional
        Default: :func:`prepare_point` of ``config``.

    Returns
    -------
    list of dict
        ``config.n_eigs`` rows with the columns :data:`SWEEP_COLUMNS`
        (:data:`SWEEP_COLUMN_DOCS`), smallest eigenvalue first.

    Raises
    ------
    RuntimeError
        When the point fails (:func:`prepare_point`).

    Examples
    --------
    One ``(delta, seed)`` at the population point, d = 200 (a few seconds):

    >>> import rmt
    >>> rows = rmt.run_point(rmt.RunConfig(d=200, n_eigs=2), 4.0, 0)  # doctest: +SKIP
    >>> [r["index"] for r in rows]  # doctest: +SKIP
    [0, 1]
    """
    point = prepare_point(config) if point is None else point
    with threadpool_limits(limits=1, user_api="blas"):
        return _run_point(config, delta, seed, point)


def _run_point(config: RunConfig, delta: float, seed: int, point) -> list[dict]:
    t0 = time.perf_counter()
    sim = simulate_point(config, point, delta, seed)
    t1 = time.perf_counter()
    res = extreme_eigs(
        sim.hessian, k=config.n_eigs, which="smallest", method=config.method, tol=1e-8, rng=sim.rng
    )
    ov = overlaps(res.vectors, sim.data.theta, config.width)
    t2 = time.perf_counter()
    theory, plug = _theory_pair(config, sim, delta, point)
    t3 = time.perf_counter()
    common = {"delta": delta, "seed": seed, "n": sim.data.n, "d": sim.data.d, "point": point.kind}
    times = {"time_point_s": t1 - t0, "time_eigs_s": t2 - t1, "time_theory_s": t3 - t2}
    rows = [{**common, **_row(res, ov, theory, plug, i), **times} for i in range(config.n_eigs)]
    return [{c: r[c] for c in SWEEP_COLUMNS} for r in rows]


def _row(res, ov, theory, plug, i) -> dict:
    return {
        "index": i,
        "eigenvalue": float(res.values[i]),
        "overlap_theta": float(ov[i]),
        "residual": float(res.residuals[i]),
        "n_matvec": res.n_matvec,
        "theory_edge_lo": theory["edge_lo"],
        "theory_edge_hi": theory["edge_hi"],
        "theory_outlier": _nth(theory["outliers"], i),
        "theory_overlap_theta": _nth(theory["overlaps"], i),
        "theory_bottom": theory["bottom"],
        "plugin_edge_lo": plug["edge_lo"],
        "plugin_outlier": _nth(plug["outliers"], i),
        "plugin_overlap_theta": _nth(plug["overlaps"], i),
        "plugin_bottom": plug["bottom"],
        "plugin_error": float(res.values[0]) - plug["bottom"],
    }


def _nth(values, i):
    return float(values[i]) if i < len(values) else None


@adaptive_threads
def run_sweep(config: RunConfig, out=None, scheduler=None, progress=None, point=None) -> list[dict]:
    """Run every ``(delta, seed)`` of ``config`` (:func:`run_point`); return all rows, old and
    new.

    With ``out``, rows go to ``out/sweep.csv`` as each point finishes and ``out/manifest.json``
    records the configuration, versions, seeds, timings and status.  A rerun with the same
    ``out`` skips the points already in the CSV, so an interrupted sweep resumes where it
    stopped.  ``scheduler`` (default ``config.scheduler``) is passed to
    :func:`rmt.operators.distributed.run_tasks` (``None``: serial; ``"local"``: a Dask
    ``LocalCluster``; or a scheduler address or Client).  ``point`` is the :class:`rmt.Point` when the caller has
    built it already (:func:`prepare_point`).

    Parameters
    ----------
    config : rmt.RunConfig
    out : path-like, optional
        The folder of ``sweep.csv``, ``columns.json`` and ``manifest.json``.
    scheduler : None, "local", str or distributed.Client, optional
        Default ``config.scheduler``.
    progress : bool or None
        A bar over the points.
    point : rmt.Point, optional

    Returns
    -------
    list of dict
        The rows (:data:`SWEEP_COLUMNS`), sorted by ``delta``, seed and index.

    Raises
    ------
    TypeError
        When ``config`` is not an :class:`rmt.RunConfig`.
    ValueError
        When ``out`` holds a sweep of another configuration.
    rmt.TasksFailedError
        When some points raised (the others are written).

    Examples
    --------
    Two values of ``delta``, one seed, d = 200 (``rmt sweep`` writes the same rows to a
    resumable ``sweep.csv`` with ``out``):

    >>> import rmt
    >>> rows = rmt.run_sweep(rmt.RunConfig(d=200, deltas=(2.0, 4.0), n_eigs=1))  # doctest: +SKIP
    >>> sorted({r["delta"] for r in rows})  # doctest: +SKIP
    [2.0, 4.0]
    """
    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be an rmt.RunConfig; got {type(config).__name__}")
    scheduler = config.scheduler if scheduler is None else scheduler
    table = _open_table(config, out)
    done = {(r["delta"], r["seed"]) for r in table.rows} if table else set()
    tasks = [(config, x, s) for x in config.deltas for s in config.seeds if (x, s) not in done]
    # largest points first ("longest processing time first"): on a cluster the workers then
    # finish together instead of one of them running the biggest point alone at the end
    tasks.sort(key=lambda t: -config.n_of(t[1]))
    started, start_time = time.perf_counter(), timestamp()
    if point is None and tasks:
        point = prepare_point(config)
    tasks = [t + (point,) for t in tasks]
    rows = list(table.rows) if table else []
    new = []

    def on_result(task, result):
        rows.extend(result)
        new.append(task)
        if table:
            _write_column_docs(out)
            table.append(result)

    status = "interrupted"
    try:
        distributed.run_tasks(
            run_point, tasks, scheduler=scheduler, on_result=on_result, progress=progress
        )
        status = "complete"
        if table:
            table.sort()
    except Exception as err:  # not a Ctrl-C: the manifest says what failed
        status = f"failed: {type(err).__name__}: {' '.join(str(err).split())[:300]}"
        raise
    finally:
        # a run that stopped before its first point (a scheduler that cannot be reached, an
        # early Ctrl-C) leaves the folder as it was: no manifest of a run that never ran
        if table and (status == "complete" or new):
            extra = dict(status=status, started=start_time, new_points=len(tasks))
            extra.update(scheduler=None if scheduler is None else str(scheduler))
            extra.update(points_done=len({(r["delta"], r["seed"]) for r in rows}))
            extra.update(point=None if point is None else to_jsonable(point.describe()))
            timings = {"wall_time_s": time.perf_counter() - started}
            _write_column_docs(out)
            files = ["sweep.csv", "columns.json"]
            write_manifest(out, "sweep", config, config.seeds, timings, files, **extra)
    return sorted(rows, key=lambda r: (r["delta"], r["seed"], r["index"]))


def _open_table(config, out):
    """The resumable table in ``out`` (its column dictionary ``columns.json`` is written with
    the first row, :func:`_write_column_docs`).

    A folder that holds a sweep of the same configuration grows: other deltas and seeds add
    points.  A sweep that differs in any other field that can change a result is refused, and
    the message names those fields.
    """
    if out is None:
        return None
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = ResumableCSV(out / "sweep.csv", SWEEP_COLUMNS, SWEEP_KEY)
    if table.rows:
        check_resumable(out, config, "sweep", "a sweep")
    return table


def _write_column_docs(out) -> None:
    """``out/columns.json``, the column dictionary of ``sweep.csv``, once the table has rows
    (a run that never ran a point leaves the folder as it was)."""
    path = pathlib.Path(out) / "columns.json"
    if not path.exists():
        write_json(path, SWEEP_COLUMN_DOCS)


@dataclass
class SweepTheory:
    """What a sweep's figures draw besides its rows.

    ``curve``: :func:`theory_curve` on a geometric grid over the swept range (``None`` for a
    point without a Gaussian law); ``thresholds``: ``delta_alg``, ``delta_bbp`` and
    ``delta_pop`` of the point (empty without a law); ``panels``: full spectra at up to
    ``n_spectra`` of the swept ``delta`` (empty above the dense limit); ``reason``: why the
    point has no transition (empty when it has one), written in the figure.
    """

    curve: dict | None
    thresholds: dict = field(default_factory=dict)
    panels: list = field(default_factory=list)
    reason: str = ""


@adaptive_threads
def sweep_theory(config: RunConfig, point, n_curve=40, n_spectra=4) -> SweepTheory:
    """The predicted curves, the thresholds they mark, and a row of full spectra.

    Parameters
    ----------
    config : rmt.RunConfig
    point : rmt.Point
    n_curve : int
        Points of the geometric grid of the curves over the swept range.
    n_spectra : int
        The most full spectra (:func:`spectrum_panel`), at swept ``delta``.

    Returns
    -------
    SweepTheory
    """
    law = point_law(config, point)
    lo, hi = min(config.deltas), max(config.deltas)
    theory = SweepTheory(None)
    if law is not None:
        theory.curve = theory_curve(law, np.geomspace(lo, hi, n_curve))
        res = population_threshold(config.model(), config.net(), point=point)
        theory.thresholds = {
            "delta_alg": float(res.delta_alg),
            "delta_bbp": float(res.delta_bbp),
            "delta_pop": float(res.delta_pop),
        }
        theory.reason = res.reason
    if config.width * config.d <= DENSE_LIMIT:
        idx = np.unique(np.linspace(0, len(config.deltas) - 1, n_spectra).round().astype(int))
        theory.panels = [
            spectrum_panel(config, point, config.deltas[i], config.seeds[0], law) for i in idx
        ]
    return theory
