"""The phase diagram: the asymptotic ``delta_NN`` over a grid of network and training settings.

Each cell of the grid is one configuration (a :class:`rmt.RunConfig` with some fields
replaced): its asymptotic ``delta_NN`` with the Monte Carlo standard error
(:func:`rmt.dmft_delta_nn`, docs/theory.md section 8.10), and beside it ``delta_alg`` and
``delta_pop`` (:func:`rmt.experiments.learning.reference_thresholds`).  A cell without a number
says why in ``status`` and ``reason``: ``"none"`` when no negative ``Theta*`` outlier appears at
any ``delta`` searched, ``"not determined"`` when the solves do not reach a plateau (gradient
descent diverges or does not settle at that step size) or the search fails.  It is never a
number that means "failed".

With ``out``, each finished cell is appended to ``phase_diagram.csv`` (a resumable tidy table:
a rerun with more values adds only the new cells), and a manifest is written; the cells run
through :func:`rmt.operators.distributed.run_tasks`, serially or on a Dask cluster.
"""

from __future__ import annotations

import itertools
import pathlib
import time
from dataclasses import dataclass, replace

import numpy as np

from rmt.experiments.learning import reference_thresholds
from rmt.experiments.store import ResumableCSV, check_resumable, write_manifest
from rmt.operators import distributed
from rmt.thresholds.asymptotic import dmft_delta_nn

#: the fields of :class:`rmt.RunConfig` a grid may vary, with the type of their values
AXES = {
    "width": int,
    "activation": str,
    "loss": str,
    "init_scale": float,
    "lr": float,
    "weight_decay": float,
    "target": str,
}
#: the grid of ``rmt phase-diagram`` without ``--grid``: widths 1-4, three activations, two losses
DEFAULT_GRID = {
    "width": (1, 2, 3, 4),
    "activation": ("softplus", "tanh", "relu"),
    "loss": ("huber", "square"),
}
#: the columns of ``phase_diagram.csv``: the axes, then the thresholds of the cell
PHASE_COLUMNS = [
    *AXES,
    "delta_nn",
    "stderr",
    "status",
    "reason",
    "bracket_lo",
    "bracket_hi",
    "replicas",
    "n_samples",
    "delta_alg",
    "delta_pop",
    "pop_reason",
    "seconds",
]
#: ``status`` of a cell: a number, no transition in the range searched, or no answer
STATUSES = ("found", "none", "not determined")
#: the least ``delta`` of the search of every cell
MIN_DELTA = 0.5


def parse_grid(spec) -> dict:
    """The grid of a phase diagram from ``"width=1,2,3;activation=softplus,tanh"`` or a dict.

    Parameters
    ----------
    spec : str or dict or None
        Axes separated by ``;``, each ``name=value,value,...``; ``name`` one of :data:`AXES`.
        A dict ``{name: values}`` passes through the same checks; ``None`` or ``""`` gives
        :data:`DEFAULT_GRID`.

    Returns
    -------
    dict
        ``{name: tuple of values}`` in the order given, each value of the axis's type and
        each axis with distinct values.

    Raises
    ------
    ValueError
        For an unknown axis, an axis given twice, an empty axis, a repeated value, or a value
        that is not of the axis's type.

    Examples
    --------
    >>> parse_grid("width=1,2;activation=softplus,tanh")
    {'width': (1, 2), 'activation': ('softplus', 'tanh')}
    """
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return dict(DEFAULT_GRID)
    if isinstance(spec, str):
        items = []
        for part in (p.strip() for p in spec.split(";")):
            if not part:
                continue
            name, sep, values = part.partition("=")
            if not sep:
                raise ValueError(f"grid axes are 'name=v1,v2'; got {part!r} in {spec!r}")
            items.append((name.strip(), [v.strip() for v in values.split(",") if v.strip()]))
    elif isinstance(spec, dict):
        items = [(name, list(values)) for name, values in spec.items()]
    else:
        raise TypeError(f"grid must be a string or a dict; got {type(spec).__name__}")
    grid = {}
    for name, values in items:
        if name not in AXES:
            raise ValueError(f"grid axis must be one of {', '.join(AXES)}; got {name!r}")
        if name in grid:
            raise ValueError(f"grid axis {name!r} is given twice")
        if not values:
            raise ValueError(f"grid axis {name!r} has no values")
        try:
            typed = tuple(AXES[name](v) for v in values)
        except ValueError:
            raise ValueError(f"grid axis {name!r} takes {AXES[name].__name__} values; got {values}")
        if len(set(typed)) != len(typed):
            raise ValueError(f"grid axis {name!r} repeats a value: {values}")
        grid[name] = typed
    return grid


def grid_cells(config, grid) -> list[dict]:
    """Every cell of ``grid`` as ``{axis: value}``, each checked as a :class:`rmt.RunConfig`.

    Raises
    ------
    ValueError
        When a cell is not a valid configuration (an unknown activation, a width below 1, ...),
        before anything is computed.
    """
    names = list(grid)
    cells = [dict(zip(names, values)) for values in itertools.product(*grid.values())]
    for cell in cells:
        replace(config, **cell)  # validates the cell
    return cells


def cell_row(config, cell) -> dict:
    """One cell of the phase diagram: ``delta_NN`` of the DMFT with its error, ``delta_alg`` and
    ``delta_pop``, as a :data:`PHASE_COLUMNS` row.

    Parameters
    ----------
    config : rmt.RunConfig
        The settings every cell shares (the DMFT's ``dmft_steps``, ``dmft_samples``,
        ``dmft_replicas``, the seed of its draws ``seeds[0]``, ``max_delta``).  The standard
        error is that of the ``dmft_replicas`` replicas of the last evaluation: a cell adds no
        further replicas to reach a set error (``stderr_rtol=None`` of
        :func:`rmt.dmft_delta_nn`).
    cell : dict
        The fields of ``config`` this cell replaces (:data:`AXES`).

    Returns
    -------
    dict
        The cell's axes (all of :data:`AXES`, from the cell or from ``config``), ``delta_nn``
        and ``stderr`` (``None`` unless ``status == "found"``), ``status`` and ``reason``,
        the bracket of the root, the replicas and draws used, ``delta_alg``, ``delta_pop``
        (``None`` with ``pop_reason`` where the population point gives none) and the wall time.
    """
    cfg = replace(config, **cell)
    t0 = time.perf_counter()
    res = cell_threshold(cfg)
    ref = reference_thresholds(cfg)
    row = {name: getattr(cfg, name) for name in AXES}
    found = bool(res.converged)
    row.update(
        delta_nn=res.value if found else None,
        stderr=res.stderr if found else None,
        status="found" if found else _status_of(res),
        reason="" if found else res.message,
        bracket_lo=res.lo if found else None,
        bracket_hi=res.hi if found else None,
        replicas=res.replicas,
        n_samples=res.n_samples,
        delta_alg=ref.delta_alg,
        delta_pop=ref.delta_pop,
        pop_reason=ref.reason,
        seconds=time.perf_counter() - t0,
    )
    return row


def cell_threshold(cfg, progress=None):
    """The search of one cell: :func:`rmt.dmft_delta_nn` over ``[MIN_DELTA, cfg.max_delta]``
    with the configuration's DMFT settings (at its finite ``dmft_d``, if set) and no further
    replicas (docs/theory.md 8.12).

    Parameters
    ----------
    cfg : rmt.RunConfig
        The cell's configuration (the shared settings with the cell's axes replaced).
    progress : callable, optional
        As in :func:`rmt.dmft_delta_nn`: called with each evaluation.

    Returns
    -------
    rmt.thresholds.asymptotic.DMFTThreshold
    """
    return dmft_delta_nn(
        cfg.model(), cfg.net(), MIN_DELTA, cfg.max_delta, replicas=cfg.dmft_replicas,
        stderr_rtol=None, progress=progress, d=cfg.dmft_d or None, **cfg.dmft_options(),
    )  # fmt: skip


def _status_of(res) -> str:
    """``"none"`` when every evaluation of the search reached its plateau and none had a
    negative ``Theta*`` outlier, or when the network cannot have one (``res.no_transition``);
    ``"not determined"`` when some solve failed on the way, or when the search found the root
    but its margin still moved with the law's draws (``res.law_shift`` is set)."""
    if res.no_transition:
        return "none"
    if np.isfinite(res.law_shift):
        return "not determined"
    evaluations = [*res.pilot_evaluations.values(), *res.evaluations.values()]
    if evaluations and all(ev.converged for ev in evaluations):
        return "none"
    return "not determined"


@dataclass(frozen=True)
class PhaseDiagram:
    """A phase diagram: its ``grid`` (``{axis: values}``) and its ``rows``
    (:data:`PHASE_COLUMNS`, one per cell, in the order of the grid)."""

    grid: dict
    rows: list

    def cell(self, **values) -> dict:
        """The row whose axes have ``values`` (raises KeyError when there is none)."""
        for row in self.rows:
            if all(row[k] == v for k, v in values.items()):
                return row
        raise KeyError(f"no cell with {values}")


def phase_diagram(config, grid=None, out=None, scheduler=None, progress=None) -> PhaseDiagram:
    """The asymptotic ``delta_NN`` over a grid of settings (docs/theory.md section 8.10).

    Parameters
    ----------
    config : rmt.RunConfig
        The settings every cell shares; each cell replaces the fields of its axes.
    grid : str or dict, optional
        As :func:`parse_grid` reads it (default :data:`DEFAULT_GRID`).
    out : path, optional
        A folder: every finished cell is appended to ``phase_diagram.csv`` and the manifest is
        written; a rerun into the same folder computes only the cells that are not there yet.
    scheduler : None, "local" or str, optional
        Where the cells run (:func:`rmt.operators.distributed.run_tasks`); default
        ``config.scheduler``.
    progress : bool or None
        A progress bar over the cells (default: when stderr is a terminal).

    Returns
    -------
    PhaseDiagram
        The grid and one row per cell, old and new.

    Raises
    ------
    ValueError
        For a bad grid, a cell that is not a valid configuration, or an ``out`` that holds a
        phase diagram of other shared settings.
    """
    grid = parse_grid(grid)
    cells = grid_cells(config, grid)
    scheduler = config.scheduler if scheduler is None else scheduler
    table = None
    if out is not None:
        out = pathlib.Path(out)
        out.mkdir(parents=True, exist_ok=True)
        table = ResumableCSV(out / "phase_diagram.csv", PHASE_COLUMNS, tuple(AXES))
        if table.rows:
            check_resumable(out, config, "phase-diagram", "a phase diagram")
    rows = {}
    for row in table.rows if table else []:
        rows[_key(row)] = row
    todo = [(config, c) for c in cells if _key({**_axes_of(config), **c}) not in rows]
    todo.sort(key=lambda task: -_cost(config, task[1]))  # the longest first: a shorter makespan
    started = time.perf_counter()

    def on_result(task, row):
        rows[_key(row)] = row
        if table is not None:
            table.append([row])

    status = "interrupted"
    try:
        distributed.run_tasks(
            cell_row, todo, scheduler=scheduler, on_result=on_result, progress=progress
        )
        status = "complete"
    finally:
        if table is not None and (status == "complete" or len(table.rows)):
            timings = {"wall_time_s": time.perf_counter() - started}
            grid_text = {k: list(v) for k, v in grid.items()}
            write_manifest(
                out, "phase-diagram", config, config.seeds[:1], timings,
                ["phase_diagram.csv"], status=status, grid=grid_text,
            )  # fmt: skip
    ordered = [rows[_key({**_axes_of(config), **c})] for c in cells]
    return PhaseDiagram(grid=grid, rows=ordered)


def _cost(config, cell) -> float:
    """The relative cost of a cell's DMFT solves: ``m^3`` (the responses, docs/theory.md (D3))."""
    return float(cell.get("width", config.width)) ** 3


def _axes_of(config) -> dict:
    return {name: getattr(config, name) for name in AXES}


def _key(row) -> tuple:
    """The axes of a row, with numbers as floats (a CSV reads ``1`` and ``1.0`` alike)."""
    return tuple(
        float(row[name]) if AXES[name] in (int, float) else str(row[name]) for name in AXES
    )
