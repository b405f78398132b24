"""Theory against simulation across ``delta`` (THEORY.md sections 3, 4 and 6).

One *point* of a sweep is a pair ``(delta, seed)``: sample the data, build the post-first-phase
weights, compute the extreme eigenpairs of the Hessian and their overlaps with ``Theta*``, and
record the predictions next to them.  Rows are tidy: one per ``(delta, seed, index)``, where
``index`` counts the smallest eigenvalues from the bottom.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np

from .config import RunConfig
from .tables import ResumableCSV, environment_versions, timestamp, write_json

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


def theory_at(law, delta: float, n_out: int) -> dict:
    """Left bulk edge, right edge and the ``n_out`` lowest predicted outliers at ``delta``.

    ``bottom`` is the predicted smallest eigenvalue: the lowest outlier when there is one,
    otherwise the left edge.
    """
    from .freeprob import bulk_edges, outliers

    edges = bulk_edges(law, delta)
    outs = sorted(outliers(law, delta, side="left", edges=edges), key=lambda o: o.value)
    values = [o.value for o in outs[:n_out]]
    overlaps = [o.overlap_theta for o in outs[:n_out]]
    bottom = values[0] if values else edges.lo
    return {
        "edge_lo": edges.lo,
        "edge_hi": edges.hi,
        "outliers": values,
        "overlaps": overlaps,
        "bottom": bottom,
    }


def point_weights(config: RunConfig, data, spec, rng):
    """The weights ``W`` of the configured post-first-phase point for this sample."""
    if config.point == "zero":
        return np.zeros((data.d, config.width))
    if config.point == "population":
        return spec.draw(data.d, data.theta, rng)
    return train_point(config, data, rng).W


def train_point(config: RunConfig, data, rng, continue_steps=0, progress=False):
    """:func:`rmt.train_first_phase` with the configuration's learning rate, steps and decay."""
    from .points import train_first_phase

    return train_first_phase(
        config.net(),
        data,
        lr=config.lr,
        max_steps=config.train_steps,
        weight_decay=config.weight_decay,
        rng=rng,
        continue_steps=continue_steps,
        progress=progress,
    )


def _theory_pair(config, hessian, data, W, delta):
    """Gaussian-law and plug-in predictions for the Hessian at ``W`` (THEORY.md section 6)."""
    from .freeprob import SpikeLaw

    model, net = config.model(), config.net()
    law = SpikeLaw.from_network(model, net, W.T @ W, W.T @ data.theta)
    plug = SpikeLaw.from_hessian(hessian, data.theta)
    return theory_at(law, delta, config.n_eigs), theory_at(plug, delta, config.n_eigs)


def run_point(config: RunConfig, delta: float, seed: int, spec=None) -> list[dict]:
    """Simulate and predict one ``(delta, seed)`` point; return its tidy rows.

    BLAS runs on one thread here, as it does on a single-threaded Dask worker, and the Numba
    products sum fixed row chunks, so a point gives bit-identical rows wherever it runs.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _run_point(config, delta, seed, spec)


def _run_point(config: RunConfig, delta: float, seed: int, spec=None) -> list[dict]:
    from .eigen import extreme_eigs, overlaps
    from .hessian import Hessian

    rng = config.rng_for(delta, seed)
    t0 = time.perf_counter()
    data = config.model().sample(config.n_of(delta), config.d, rng=rng)
    W = point_weights(config, data, spec, rng)
    H = Hessian(config.net(), data, W, weight_decay=config.weight_decay)
    t1 = time.perf_counter()
    res = extreme_eigs(
        H, k=config.n_eigs, which="smallest", method=config.method, tol=1e-8, rng=rng
    )
    ov = overlaps(res.vectors, data.theta, config.width)
    t2 = time.perf_counter()
    theory, plug = _theory_pair(config, H, data, W, delta)
    t3 = time.perf_counter()
    rows = []
    for i in range(config.n_eigs):
        rows.append(
            {
                "delta": delta,
                "seed": seed,
                "index": i,
                "n": data.n,
                "d": data.d,
                "point": config.point,
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
                "time_point_s": t1 - t0,
                "time_eigs_s": t2 - t1,
                "time_theory_s": t3 - t2,
            }
        )
    return rows


def _nth(values, i):
    return float(values[i]) if i < len(values) else None


def prepare_point(config: RunConfig):
    """The population point of the configuration (``None`` for the other kinds)."""
    if config.point != "population":
        return None
    from .points import population_point

    spec = population_point(config.model(), config.net())
    if not spec.converged:
        raise RuntimeError(f"the population point did not converge: {spec.message}")
    return spec


def _spec_summary(spec):
    if spec is None:
        return None
    return {
        "Q": spec.Q,
        "M": spec.M,
        "risk": spec.risk,
        "converged": spec.converged,
        "grad_norm": spec.grad_norm,
    }


def run_sweep(config: RunConfig, out=None, scheduler=None, progress=True, spec=None) -> list[dict]:
    """Run every ``(delta, seed)`` of ``config``; return all rows, old and new.

    With ``out``, rows go to ``out/sweep.csv`` as each point finishes and ``out/manifest.json``
    records the configuration, versions, seeds, timings and status.  A rerun with the same
    ``out`` skips the points already in the CSV, so an interrupted sweep resumes where it
    stopped.  ``scheduler`` is passed to :func:`rmt.distributed.run_tasks` (``None``: serial;
    ``"local"``: a Dask ``LocalCluster``; or a scheduler address).  ``spec`` is the population
    point when the caller has computed it already (:func:`prepare_point`).
    """
    from .distributed import run_tasks

    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be an rmt.RunConfig; got {type(config).__name__}")
    table, manifest_path = _open_outputs(config, out)
    done = {(r["delta"], r["seed"]) for r in table.rows} if table else set()
    tasks = [(config, x, s) for x in config.deltas for s in config.seeds if (x, s) not in done]
    # largest points first ("longest processing time first"): on a cluster the workers then
    # finish together instead of one of them running the biggest point alone at the end
    tasks.sort(key=lambda t: -config.n_of(t[1]))
    started = time.perf_counter()
    if spec is None and tasks:
        spec = prepare_point(config)
    tasks = [t + (spec,) for t in tasks]
    rows = list(table.rows) if table else []
    manifest = _manifest(config, spec, len(tasks), scheduler)

    def on_result(task, result):
        rows.extend(result)
        if table:
            table.append(result)

    status = "interrupted"
    try:
        run_tasks(run_point, tasks, scheduler=scheduler, on_result=on_result, progress=progress)
        status = "complete"
    finally:
        if manifest_path:
            manifest.update(
                status=status,
                finished=timestamp(),
                wall_time_s=time.perf_counter() - started,
                points_done=len({(r["delta"], r["seed"]) for r in rows}),
            )
            write_json(manifest_path, manifest)
    return sorted(rows, key=lambda r: (r["delta"], r["seed"], r["index"]))


def _open_outputs(config, out):
    if out is None:
        return None, None
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = ResumableCSV(out / "sweep.csv", SWEEP_COLUMNS, SWEEP_KEY)
    manifest = out / "manifest.json"
    if manifest.exists() and table.rows:
        import json

        old = json.loads(manifest.read_text()).get("config")
        if old is not None and old != _jsonable(config.to_dict()):
            raise ValueError(f"{out} holds a sweep of another configuration; use another --out")
    return table, manifest


def _jsonable(obj):
    import json

    from .tables import _json_default

    return json.loads(json.dumps(obj, default=_json_default))


def _manifest(config, spec, n_new, scheduler):
    return {
        "config": _jsonable(config.to_dict()),
        "versions": environment_versions(),
        "seeds": list(config.seeds),
        "started": timestamp(),
        "new_points": n_new,
        "scheduler": None if scheduler is None else str(scheduler),
        "population_point": _jsonable(_spec_summary(spec)),
    }
