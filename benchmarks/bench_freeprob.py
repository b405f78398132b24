"""Theory against dense simulation: time of edges + outliers at one delta (docs/theory.md sections 3-4).

For m <= 4 and K <= 3 with tensor Gauss-Hermite laws, times
  theory:     SpikeLaw.from_network + bulk_edges + outliers(side="left")
  simulation: sample (d = 1000, n = delta d) + curvature + dense Hessian + scipy eigh of the
              extreme eigenpairs (subset_by_index), the cheapest dense route to the same numbers,
and prints their ratio measured side by side, together with the values both give, and the time of
delta_alg.  The machine is shared: the load average is printed next to the timings.

The speed goals of the theory get one line each (``GOAL`` lines), on the laws a sweep point
really uses (``SpikeLaw.from_network`` with ``nodes="auto"`` at the ``rmt sweep`` defaults:
softplus, Huber threshold 1: an aligned law for m = 1 (docs/theory.md 3.9), randomised QMC laws
of 32k nodes for m = 2, 3, 4 (for m = 2 a fold skips the nested law), the law construction
counted:
  - theory (law + bulk_edges + outliers) against the dense simulation at d = 1000, m <= 4;
  - bulk_density on 201 points, m = 1, 2 and 3 laws, in seconds;
  - outliers, m = 3 law, per side, in seconds.

``--nodes-before`` times the sweep theory of m = 1..4 with the laws of the previous default
(the nested law for m = 1, 2; 200k i.i.d. Monte Carlo draws for m = 3, 4) against now, in
turn, with the edges and outlier both give.

The sweep rows also time ``--sweep-points`` points of one configuration with the law built once
(``rmt sweep`` keeps the law of a data-independent point across deltas and seeds): the amortised
cost of a point, edges + outliers + law / points, against the same simulation.

Run:  python benchmarks/bench_freeprob.py [--d 1000] [--repeat 3] [--skip-tensor] [--sweep-points 8]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from functools import partial
from pathlib import Path

import numpy as np
import scipy.linalg as sl

import rmt

try:
    from _util import LoadMeter, cpu_info, set_threads, time_round_robin
except ImportError:  # run from the repository root
    from benchmarks._util import LoadMeter, cpu_info, set_threads, time_round_robin

PHASE = rmt.MultiIndexModel("phase_retrieval")


def configs():
    """(name, net, Q, delta): softplus + Huber at W orthogonal to Theta* (M = 0)."""
    C4 = np.array([[0.5, 0.3, 0.1, -0.2], [0.0, 0.25, -0.35, 0.2]])  # rank 2: K = 1 + 2
    return [
        (
            "m=1, K=2",
            rmt.TwoLayerNet(1, "softplus", "huber", huber_delta=2.0, a=[1.0]),
            np.array([[0.25]]),
            8.0,
        ),
        (
            "m=2, K=3",
            rmt.TwoLayerNet(2, "softplus", "huber", huber_delta=2.0, a=[1.0, 1.0]),
            np.diag([0.25, 0.15]),
            4.0,
        ),
        (
            "m=4, K=3",
            rmt.TwoLayerNet(4, "softplus", "huber", huber_delta=2.0, a=np.ones(4)),
            C4.T @ C4,
            4.0,
        ),
    ]


#: the speed goals of the theory
GOAL_RATIO, GOAL_DENSITY_NESTED, GOAL_DENSITY_MC, GOAL_OUTLIERS = 100.0, 2.0, 10.0, 0.5


def sweep_configs():
    """(name, net, Q, delta): the ``rmt sweep`` defaults (softplus, Huber threshold 1) at
    ``W`` orthogonal to ``Theta*``; ``nodes="auto"`` gives an aligned law for m = 1 and
    randomised QMC laws of 32k nodes for m = 2, 3, 4 (for m = 2 a fold skips the nested
    law)."""
    rng = np.random.default_rng(0)
    out = []
    for m in (1, 2, 3, 4):
        A = rng.standard_normal((m, m)) * 0.3
        Q = A @ A.T + 0.05 * np.eye(m)
        out.append(
            (f"sweep m={m}", rmt.TwoLayerNet(m, "softplus", "huber", huber_delta=1.0), Q, 4.0)
        )
    return out


def sweep_law(net, Q, nodes="auto"):
    return rmt.SpikeLaw.from_network(PHASE, net, Q, nodes=nodes)


def run_sweep_theory(net, Q, delta, nodes="auto"):
    law = sweep_law(net, Q, nodes)
    edges = rmt.bulk_edges(law, delta)
    out = rmt.outliers(law, delta, side="left", edges=edges)
    return law, edges, out


def run_sweep_points(net, Q, delta, n_points):
    """``n_points`` sweep points of one configuration, as ``rmt sweep`` runs them: the law once
    (``point_law`` keeps it: it does not depend on ``delta`` or the seed), then edges and
    outliers at each point (here all at ``delta``, the simulation's)."""
    law = sweep_law(net, Q)
    for _ in range(n_points):
        edges = rmt.bulk_edges(law, delta)
        rmt.outliers(law, delta, side="left", edges=edges)


def run_theory(net, Q, delta):
    law = rmt.SpikeLaw.from_network(PHASE, net, Q, nodes="quadrature")
    edges = rmt.bulk_edges(law, delta)
    out = rmt.outliers(law, delta, side="left", edges=edges)
    return law, edges, out


def run_simulation(net, Q, delta, d, seed):
    rng = np.random.default_rng(seed)
    m = net.width
    data = PHASE.sample(int(delta * d), d, rng)
    vals, vecs = np.linalg.eigh(Q)
    B = np.linalg.qr(np.concatenate([data.theta, rng.standard_normal((d, m))], axis=1))[0]
    W = B[:, 1 : 1 + m] @ (vecs * np.sqrt(np.clip(vals, 0, None))) @ vecs.T  # W^T W = Q
    H = rmt.Hessian(net, data, W).to_dense()
    md = m * d
    lo_vals, lo_vecs = sl.eigh(H, subset_by_index=[0, 1])
    hi_val = sl.eigh(H, eigvals_only=True, subset_by_index=[md - 1, md - 1])
    overlap = float(np.sum((lo_vecs[:, 0].reshape(m, d) @ data.theta) ** 2))
    return lo_vals, hi_val[0], overlap


def best_time(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def theory_against_simulation(name, net, Q, delta, args, theory, n_points=0):
    """One row: ``theory(net, Q, delta)`` against the dense simulation, side by side; with
    ``n_points``, also ``run_sweep_points`` (the amortised cost of a point), in the same rounds."""
    t_first = time.perf_counter()  # Numba compilation (or cache load) of this width's kernels
    law, edges, out = theory(net, Q, delta)
    t_first = time.perf_counter() - t_first
    lo_vals, hi_val, overlap = run_simulation(net, Q, delta, args.d, seed=1)
    funcs = {
        "theory": partial(theory, net, Q, delta),
        "simulation": partial(run_simulation, net, Q, delta, args.d, 1),
    }
    if n_points:
        funcs["sweep points"] = partial(run_sweep_points, net, Q, delta, n_points)
    with LoadMeter() as meter:
        timing = time_round_robin(funcs, args.repeat)
    t_th, t_sim = timing["theory"]["median"], timing["simulation"]["median"]
    t_pt = timing["sweep points"]["median"] / n_points if n_points else None
    o = out[0] if out else None
    row = {
        "config": name,
        "delta": delta,
        "d": args.d,
        "nodes": law.N,
        "law_kind": law.kind,
        "theory_s": t_th,
        "theory_first_call_s": t_first,
        "simulation_s": t_sim,
        "ratio": t_sim / t_th,
        "sweep_points": n_points or None,
        "amortised_theory_s": t_pt,
        "amortised_ratio": t_sim / t_pt if n_points else None,
        "other_load": meter.other_load,
        "theory_lo": edges.lo,
        "theory_hi": edges.hi,
        "hi_kind": edges.hi_kind,
        "theory_outlier": o.value if o else None,
        "theory_overlap": o.overlap_theta if o else None,
        "sim_bottom": float(lo_vals[0]),
        "sim_second": float(lo_vals[1]),
        "sim_top": float(hi_val),
        "sim_overlap": overlap,
    }
    print(
        f"{name} delta={delta}: theory {t_th * 1e3:8.1f} ms ({law.N} nodes, {law.kind}), "
        f"dense d={args.d} {t_sim:6.1f} s, ratio {t_sim / t_th:7.0f}x, "
        f"other processes {meter.other_load:.2f} cores"
    )
    if n_points:
        print(
            f"    a sweep of {n_points} points (law built once): {t_pt * 1e3:.1f} ms a point, "
            f"ratio {t_sim / t_pt:.0f}x"
        )
    print(f"    theory first call (Numba compile or cache load, not timed): {t_first:.2f} s")
    print(
        f"    theory: lo {edges.lo:.4f} hi {edges.hi:.4f} ({edges.hi_kind}) outlier "
        f"{row['theory_outlier']} overlap {row['theory_overlap']}"
    )
    print(
        f"    dense : 2nd {lo_vals[1]:.4f} top {hi_val:.4f} bottom {lo_vals[0]:.4f} "
        f"overlap {overlap:.3f}"
    )
    return row


def theory_breakdown(net, Q, delta, repeat):
    """Median seconds of the three parts of a sweep point's theory: law, edges, outliers."""
    parts = {"law": [], "edges": [], "outliers": []}
    for _ in range(repeat):
        t0 = time.perf_counter()
        law = sweep_law(net, Q)
        t1 = time.perf_counter()
        edges = rmt.bulk_edges(law, delta)
        t2 = time.perf_counter()
        rmt.outliers(law, delta, side="left", edges=edges)
        t3 = time.perf_counter()
        for k, t in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[k].append(t)
    return {k: float(np.median(v)) for k, v in parts.items()}


def density_goals(repeat):
    """``bulk_density`` on 201 points for the m = 1, 2, 3 sweep laws (the m = 1 law is
    deterministic, ``"aligned"``: the 2 s goal of the nested laws)."""
    rows = []
    for name, net, Q, delta in sweep_configs()[0:3]:
        law = sweep_law(net, Q)
        lo, hi = rmt.bulk_edges(law, delta)
        x = np.linspace(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo), 201)
        rmt.bulk_density(law, delta, x[:3])  # compile or load the kernels
        goal = GOAL_DENSITY_NESTED if law.kind in ("nested", "aligned") else GOAL_DENSITY_MC
        with LoadMeter() as meter:
            t, res = best_time(partial(rmt.bulk_density, law, delta, x), repeat)
        print(
            f"GOAL bulk_density 201 points, {name} ({law.kind}, {law.N} nodes): {t:.2f} s "
            f"(goal <= {goal:g} s: {'met' if t <= goal else 'NOT met'}); {res.iterations} "
            f"Newton iterations; other processes {meter.other_load:.2f} cores"
        )
        rows.append(
            {
                "config": f"bulk_density 201 pts {name}",
                "law_kind": law.kind,
                "nodes": law.N,
                "theory_s": t,
                "goal_s": goal,
                "other_load": meter.other_load,
            }
        )
    return rows


def outlier_goals(repeat):
    """``outliers`` of the m = 3 sweep law, each side, edges given."""
    name, net, Q, delta = sweep_configs()[2]
    law = sweep_law(net, Q)
    edges = rmt.bulk_edges(law, delta)
    rows = []
    for side in ("left", "right"):
        rmt.outliers(law, delta, side=side, edges=edges)
        with LoadMeter() as meter:
            t, out = best_time(partial(rmt.outliers, law, delta, side=side, edges=edges), repeat)
        print(
            f"GOAL outliers {side}, {name} ({law.kind}, {law.N} nodes): {t:.3f} s "
            f"(goal <= {GOAL_OUTLIERS:g} s: {'met' if t <= GOAL_OUTLIERS else 'NOT met'}); "
            f"{len(out)} outliers; other processes {meter.other_load:.2f} cores"
        )
        rows.append(
            {
                "config": f"outliers {side} {name}",
                "nodes": law.N,
                "theory_s": t,
                "goal_s": GOAL_OUTLIERS,
                "other_load": meter.other_load,
            }
        )
    return rows


def _before_and_now(make, repeat):
    """``(before, now, load)``: the median times of ``make(True)`` and ``make(False)``, timed in
    turn (``time_round_robin``), and the load of other processes meanwhile."""
    with LoadMeter() as meter:
        timing = time_round_robin(
            {"before": partial(make, True), "now": partial(make, False)}, repeat
        )
    return timing["before"]["median"], timing["now"]["median"], meter.other_load


def law_before_and_now(repeat):
    """``SpikeLaw.from_network`` of the m = 1, 2 sweep laws with the previous adaptive refinement
    (kept in tests/test_freeprob_fast_paths.py) and the parallel curvature kernel, against now, in
    turn; the laws must be bit-identical."""
    import sys

    from rmt.freeprob import nodes
    from rmt.problem import network

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.test_freeprob_fast_paths import old_refine_panels

    now_refine, now_rows = nodes._refine_panels, network.SERIAL_MAX_ROWS

    def build(before):
        nodes._refine_panels = old_refine_panels if before else now_refine
        network.SERIAL_MAX_ROWS = 0 if before else now_rows
        try:
            return sweep_law(net, Q)
        finally:
            nodes._refine_panels, network.SERIAL_MAX_ROWS = now_refine, now_rows

    for name, net, Q, _ in sweep_configs()[:2]:
        old, new = build(True), build(False)
        same = all(
            np.array_equal(getattr(old, a), getattr(new, a)) for a in ("zhat", "D", "weights")
        )
        t0, t1, load = _before_and_now(build, repeat)
        print(
            f"law {name} ({new.kind}, {new.N} nodes): before {t0:.3f} s, now {t1:.3f} s, "
            f"{t0 / t1:.1f}x; bit-identical {same}; other processes {load:.2f} cores"
        )


def _lapack_block_eigenvalues(D, out):
    """The reference of ``block_eigenvalues``: numpy's batched ``eigvalsh`` (LAPACK)."""
    out[...] = np.linalg.eigvalsh(D)


def law_eigen_before_and_now(repeat):
    """``SpikeLaw.from_network`` of the m = 3, 4 sweep laws with the node eigenvalues (and those
    of the far probe) from numpy's batched ``eigvalsh``, as before, against the batched Jacobi
    kernel now, in turn; ``node_range`` and ``far_range`` must agree to 1e-14."""
    from rmt.freeprob import law as law_module
    from rmt.freeprob import unbounded

    now = law_module.block_eigenvalues

    def build(before):
        kernel = _lapack_block_eigenvalues if before else now
        law_module.block_eigenvalues = unbounded.block_eigenvalues = kernel
        try:
            return sweep_law(net, Q)
        finally:
            law_module.block_eigenvalues = unbounded.block_eigenvalues = now

    for name, net, Q, _ in sweep_configs()[2:]:
        old, new = build(True), build(False)
        ranges = (
            np.array([old.node_range, old.far_range]),
            np.array([new.node_range, new.far_range]),
        )
        agree = bool(np.all(np.abs(ranges[0] - ranges[1]) <= 1e-14 * np.abs(ranges[0])))
        t0, t1, load = _before_and_now(build, repeat)
        print(
            f"law {name} ({new.kind}, {new.N} nodes): eigvalsh {t0 * 1e3:.1f} ms, batched Jacobi "
            f"{t1 * 1e3:.1f} ms, {t0 / t1:.2f}x; ranges agree to 1e-14 {agree}, scale "
            f"{old.scale:.6g} / {new.scale:.6g}; other processes {load:.2f} cores"
        )


def fold_model_before_and_now(repeat):
    """The edges of the m = 2, 3, 4 sweep laws at five values of ``delta`` with the steps of the
    geometric rule alone (before) and aimed by the fold estimates (now, ``edges.FOLD_MODEL``),
    in turn: time, passes over the nodes and the largest relative change of an edge."""
    from rmt.freeprob import edges as edges_module
    from rmt.freeprob import mp as mp_module

    deltas = (0.5, 1.0, 2.0, 4.0, 6.0)
    passes = [0]
    moments = mp_module.MPSystem.moments

    def counted(self, *args, **kwargs):
        passes[0] += 1
        return moments(self, *args, **kwargs)

    def edges_at(law, model):
        edges_module.FOLD_MODEL = model
        try:
            return [rmt.bulk_edges(law, delta) for delta in deltas]
        finally:
            edges_module.FOLD_MODEL = True

    for name, net, Q, _ in sweep_configs()[1:]:
        law = sweep_law(net, Q)
        counts, found = {}, {}
        mp_module.MPSystem.moments = counted
        try:
            for model in (False, True):
                passes[0] = 0
                found[model] = edges_at(law, model)
                counts[model] = passes[0]
        finally:
            mp_module.MPSystem.moments = moments
        change = max(
            abs(getattr(a, k) - getattr(b, k)) / abs(getattr(a, k))
            for a, b in zip(found[False], found[True])
            for k in ("lo", "hi")
        )
        t0, t1, load = _before_and_now(lambda before: edges_at(law, not before), repeat)
        print(
            f"edges {name}, delta {deltas}: geometric steps {t0 * 1e3:.1f} ms ({counts[False]} "
            f"passes), aimed by the fold estimates {t1 * 1e3:.1f} ms ({counts[True]} passes), "
            f"{t0 / t1:.2f}x; edges moved by <= {change:.1e} relative; other processes "
            f"{load:.2f} cores"
        )


def blas_law_before_and_now(repeat):
    """One point with its law (law, edges, left outliers) of the m = 1..4 sweep laws, the law
    built with BLAS on all its threads (before: ``from_network`` without its
    ``single_threaded_blas``) and on one (now), in turn."""
    from rmt.freeprob import law as law_module

    raw = law_module.SpikeLaw.from_network.__func__.__wrapped__

    def point(net, Q, delta, before):
        if before:
            law = raw(law_module.SpikeLaw, PHASE, net, Q, nodes="auto")
        else:
            law = sweep_law(net, Q)
        edges = rmt.bulk_edges(law, delta)
        return rmt.outliers(law, delta, side="left", edges=edges)

    for name, net, Q, delta in sweep_configs():
        t0, t1, load = _before_and_now(partial(point, net, Q, delta), repeat)
        print(
            f"one point with its law, {name}: law with threaded BLAS {t0 * 1e3:.1f} ms, with "
            f"BLAS on one thread {t1 * 1e3:.1f} ms, {t0 / t1:.2f}x; other processes "
            f"{load:.2f} cores"
        )


def nodes_before_and_now(repeat):
    """The sweep theory (law + edges + left outliers) of m = 1..4 with the previous default
    nodes against now, in turn: the nested law (m = 1, 2) or 200k i.i.d. draws (m = 3, 4)
    before; the aligned law (m = 1) or randomised QMC (32k) now."""
    for name, net, Q, delta in sweep_configs():
        before_nodes = "nested" if net.width <= 2 else "monte_carlo"
        funcs = {
            "before": partial(run_sweep_theory, net, Q, delta, before_nodes),
            "now": partial(run_sweep_theory, net, Q, delta),
        }
        values = {k: f() for k, f in funcs.items()}  # compile, and the numbers to print
        with LoadMeter() as meter:
            timing = time_round_robin(funcs, repeat)
        t0, t1 = timing["before"]["median"], timing["now"]["median"]
        desc = []
        for k, (law, edges, out) in values.items():
            o = out[0] if len(out) else None
            desc.append(
                f"{k} {law.kind} {law.N} nodes: edges [{edges.lo:.6f}, {edges.hi:.6f}], "
                f"outlier {o.value if o else float('nan'):.6f}, "
                f"overlap {o.overlap_theta if o else float('nan'):.4f}"
            )
        print(
            f"nodes {name}: before {t0 * 1e3:.0f} ms, now {t1 * 1e3:.0f} ms, {t0 / t1:.1f}x; "
            f"other processes {meter.other_load:.2f} cores\n    " + "\n    ".join(desc)
        )


def sweep_times(repeat, n_points):
    """One point (best of ``repeat``) and a point of an ``n_points`` sweep for each sweep law, with
    the ``rmt`` that is imported: run it with ``PYTHONPATH`` at a worktree of an older commit
    and without, in turn, for a before/now ratio of the same process kind."""
    out = {"rmt": rmt.__file__}
    for name, net, Q, delta in sweep_configs():
        run_sweep_theory(net, Q, delta)  # compile or load the cache
        one, _ = best_time(partial(run_sweep_theory, net, Q, delta), repeat)
        t0 = time.perf_counter()
        run_sweep_points(net, Q, delta, n_points)
        out[name] = {"one_point_s": one, "sweep_point_s": (time.perf_counter() - t0) / n_points}
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--sweep-points",
        type=int,
        default=8,
        help="points of one configuration sharing its law (the amortised ratio; 8 = the "
        "README's 'rmt sweep --delta 0.5:6:8' with one seed)",
    )
    parser.add_argument("--skip-tensor", action="store_true", help="only the sweep laws and goals")
    parser.add_argument("--skip-simulation", action="store_true", help="only density and outliers")
    parser.add_argument(
        "--law-before", action="store_true", help="only the law construction, before and now"
    )
    parser.add_argument(
        "--law-eigen",
        action="store_true",
        help="only the m = 3, 4 sweep laws, node eigenvalues by eigvalsh (before) and now",
    )
    parser.add_argument(
        "--fold-model",
        action="store_true",
        help="only the edges of the m = 2, 3, 4 sweep laws, geometric steps (before) and now",
    )
    parser.add_argument(
        "--blas-law",
        action="store_true",
        help="only one point with its law, the law built with threaded BLAS (before) and now",
    )
    parser.add_argument(
        "--nodes-before",
        action="store_true",
        help="only the sweep theory with the previous default nodes (200k i.i.d.) and now",
    )
    parser.add_argument(
        "--sweep-times",
        action="store_true",
        help="only the sweep theory times as JSON (for a before/now run with PYTHONPATH at an "
        "older worktree)",
    )
    args = parser.parse_args()
    settings = rmt.configure_threads()  # before the first parallel kernel (rmt/kernels/threads.py)
    threads = set_threads(args.threads)
    cpu = cpu_info()
    print(f"CPU: {cpu['model']}, {cpu['simd']}")
    print(f"thread environment set: {settings.applied or 'nothing'} (kept: {settings.kept})")
    print(
        f"threads: numba {threads['numba']}, blas {threads['blas']}; "
        f"load average before: {os.getloadavg()}"
    )
    if args.law_before:
        law_before_and_now(args.repeat)
        return
    if args.law_eigen:
        law_eigen_before_and_now(max(args.repeat, 5))
        return
    if args.fold_model:
        fold_model_before_and_now(max(args.repeat, 5))
        return
    if args.blas_law:
        blas_law_before_and_now(max(args.repeat, 5))
        return
    if args.sweep_times:
        sweep_times(max(args.repeat, 3), args.sweep_points)
        return
    if args.nodes_before:
        nodes_before_and_now(args.repeat)
        return
    rows = []
    if not args.skip_simulation:
        if not args.skip_tensor:
            for name, net, Q, delta in configs():
                rows.append(theory_against_simulation(name, net, Q, delta, args, run_theory))
        for name, net, Q, delta in sweep_configs():
            row = theory_against_simulation(
                name, net, Q, delta, args, run_sweep_theory, args.sweep_points
            )
            row["breakdown_s"] = parts = theory_breakdown(net, Q, delta, args.repeat)
            amortised = row["amortised_ratio"]
            print(
                f"GOAL theory/simulation, {name}: one point {row['ratio']:.0f}x, a point of a "
                f"{args.sweep_points}-point sweep {amortised:.0f}x (goal >= {GOAL_RATIO:g}x: "
                f"{'met' if row['ratio'] >= GOAL_RATIO else 'NOT met'} / "
                f"{'met' if amortised >= GOAL_RATIO else 'NOT met'}); "
                + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in parts.items())
            )
            rows.append(row)
    rows += density_goals(1)
    rows += outlier_goals(args.repeat)
    for model in [
        PHASE,
        rmt.MultiIndexModel("norm2", k=3),
        rmt.MultiIndexModel("phase_retrieval", noise=0.5),
    ]:
        t, res = best_time(partial(rmt.delta_alg, model), 3)
        print(
            f"delta_alg({model.name}, k={model.k}, noise={model.noise}) = {res.value:.10f} "
            f"in {t * 1e3:.1f} ms"
        )
        rows.append(
            {
                "config": f"delta_alg {model.name} k={model.k} noise={model.noise}",
                "value": res.value,
                "theory_s": t,
            }
        )
    print(f"load average after: {os.getloadavg()}")
    out_dir = Path(__file__).parent / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "bench_freeprob.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
