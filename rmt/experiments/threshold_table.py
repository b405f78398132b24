"""The population-point threshold ``delta_pop`` of one configuration, and over a table of configurations (docs/theory.md sec. 6)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from tqdm.auto import tqdm

from rmt.experiments.config import MIN_DELTA
from rmt.kernels.threads import adaptive_threads
from rmt.progress import progress_enabled
from rmt.thresholds.points import POINT_KINDS, make_point
from rmt.thresholds.population import population_threshold

TABLE_CONFIGS = [
    dict(activation="softplus", loss="huber", width=2),
    dict(activation="softplus", loss="huber", width=1),
    dict(activation="softplus", loss="huber", width=3),
    dict(activation="softplus", loss="huber", width=2, noise=0.3),
    dict(target="abs", activation="softplus", loss="huber", width=2),
    dict(target="sign_z1z2", activation="softplus", loss="logistic", width=2),
    dict(activation="erf", loss="huber", width=2),
    dict(activation="tanh", loss="huber", width=2),
    dict(activation="softplus", loss="square", width=2),
    dict(activation="tanh", loss="square", width=2),
]

TABLE_COLUMNS = [
    "target",
    "noise",
    "activation",
    "loss",
    "width",
    "point",
    "status",
    "delta_pop",
    "delta_bbp",
    "delta_alg",
    "ratio",
    "reason",
    "converged",
    "seconds",
]


@adaptive_threads
def threshold_summary(config) -> tuple[dict, object]:
    """``delta_pop``, ``delta_BBP`` and ``delta_alg`` of ``config``, searched over
    ``(MIN_DELTA, config.max_delta)``; returns ``(summary, ThresholdResult)``.

    ``summary`` is JSON-able: the configuration, the result, its bracket and notes, and the
    wall time.  A point that depends on the sample raises ValueError before any work.
    """
    if POINT_KINDS[config.point].sample_dependent:
        raise ValueError(
            f"delta_pop needs a data-independent point; the {config.point} point depends on "
            "the sample"
        )
    t0 = time.perf_counter()
    model, net = config.model(), config.net()
    point = make_point(config, model, net)
    res = population_threshold(model, net, point=point, delta_range=(MIN_DELTA, config.max_delta))
    summary = {
        "config": config.to_dict(),
        **res.as_dict(),
        "bracket": list(res.bracket),
        "notes": res.notes,
        "wall_time_s": time.perf_counter() - t0,
    }
    return summary, res


def _table_row(cfg) -> dict:
    row = {
        "target": cfg.target,
        "noise": cfg.noise,
        "activation": cfg.activation,
        "loss": cfg.loss,
        "width": cfg.width,
        "point": cfg.point,
    }
    try:
        model, net = cfg.model(), cfg.net()
        res = population_threshold(model, net, point=make_point(cfg, model, net))
    except RuntimeError as exc:  # one failed configuration is reported, not fatal
        row.update(
            delta_pop=np.nan,
            delta_bbp=np.nan,
            delta_alg=np.nan,
            ratio=None,
            reason=f"solver failure: {type(exc).__name__}: {exc}",
            converged=False,
            status="failed",
        )
    else:
        row.update(
            delta_pop=float(res.delta_pop),
            delta_bbp=float(res.delta_bbp),
            delta_alg=float(res.delta_alg),
            ratio=_ratio(res),
            reason=res.reason,
            converged=bool(res.converged),
            status=res.status,
        )
    return row


def _ratio(res):
    """``delta_pop / delta_alg``; ``None`` for a failure (no number may stand for it)."""
    if res.status == "failed" or not res.delta_alg:
        return None
    return float(res.delta_pop / res.delta_alg)


@adaptive_threads
def threshold_table(base, variants=TABLE_CONFIGS, progress=None) -> list[dict]:
    """``delta_pop``, ``delta_BBP`` and ``delta_alg`` over activations, losses and widths.

    One row per variant (a dict of ``RunConfig`` fields replaced in ``base``), with the
    columns :data:`TABLE_COLUMNS`.  A solver failure is reported in its row, not raised:
    ``status`` is ``"found"`` (a finite ``delta_pop``), ``"none"`` (no transition,
    ``delta_pop = inf``, ``reason`` says why) or ``"failed"`` (``delta_pop = nan``, ``reason``
    carries the solver's message).  ``progress``: a bar over the variants
    (:func:`rmt.progress.progress_enabled`: by default only when stderr is a terminal).
    """

    rows = []
    for v in tqdm(variants, desc="threshold table", disable=not progress_enabled(progress)):
        t0 = time.perf_counter()
        row = _table_row(replace(base, **v))
        rows.append({**row, "seconds": time.perf_counter() - t0})
    return rows
