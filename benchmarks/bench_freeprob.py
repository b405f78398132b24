"""Theory against dense simulation: time of edges + outliers at one delta (docs/theory.md sections 3-4).

For m <= 4 and K <= 3 with tensor Gauss-Hermite laws, times
  theory:     SpikeLaw.from_network + bulk_edges + outliers(side="left")
  simulation: sample (d = 1000, n = delta d) + curvature + dense Hessian + scipy eigh of the
              extreme eigenpairs (subset_by_index), the cheapest dense route to the same numbers,
and prints their ratio measured side by side, together with the values both give, and the time of
delta_alg.  The machine is shared: the load average is printed next to the timings.

Run:  python benchmarks/bench_freeprob.py [--d 1000] [--repeat 3]
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
    from _util import LoadMeter, set_threads, time_round_robin
except ImportError:  # run from the repository root
    from benchmarks._util import LoadMeter, set_threads, time_round_robin

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    settings = rmt.configure_threads()  # before the first parallel kernel (rmt/threads.py)
    threads = set_threads(args.threads)
    print(f"thread environment set: {settings.applied or 'nothing'} (kept: {settings.kept})")
    print(
        f"threads: numba {threads['numba']}, blas {threads['blas']}; "
        f"load average before: {os.getloadavg()}"
    )
    rows = []
    for name, net, Q, delta in configs():
        t_first = time.perf_counter()  # Numba compilation (or cache load) of this width's kernels
        law, edges, out = run_theory(net, Q, delta)
        t_first = time.perf_counter() - t_first
        lo_vals, hi_val, overlap = run_simulation(net, Q, delta, args.d, seed=1)
        funcs = {
            "theory": partial(run_theory, net, Q, delta),
            "simulation": partial(run_simulation, net, Q, delta, args.d, 1),
        }
        with LoadMeter() as meter:
            timing = time_round_robin(funcs, args.repeat)
        t_th, t_sim = timing["theory"]["median"], timing["simulation"]["median"]
        o = out[0] if out else None
        row = {
            "config": name,
            "delta": delta,
            "d": args.d,
            "nodes": law.N,
            "theory_s": t_th,
            "theory_first_call_s": t_first,
            "simulation_s": t_sim,
            "ratio": t_sim / t_th,
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
        rows.append(row)
        print(
            f"{name} delta={delta}: theory {t_th * 1e3:8.1f} ms ({law.N} nodes), "
            f"dense d={args.d} {t_sim:6.1f} s, ratio {t_sim / t_th:7.0f}x, "
            f"other processes {meter.other_load:.2f} cores"
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
