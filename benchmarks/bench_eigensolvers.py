"""Time to the 5 smallest Hessian eigenpairs, every method side by side, in one run.

    python benchmarks/bench_eigensolvers.py [--sizes 2000 8000 16000 32000] [--tol 1e-8]
        [--methods lanczos block_lanczos ...] [--dense-max 8000] [--repeat R] [--wait S]
        [--product-costs 1 2 4 8] [--out DIR]

For each ``m*d`` (``m = 4``, ``n = 4d``, phase retrieval, tanh/square, random ``W``) every
method of ``rmt.extreme_eigs`` runs on the same Hessian; dense ``eigh`` (assembly + LAPACK
subset) runs up to ``--dense-max``.  With ``--repeat R`` the methods run round-robin ``R``
times (each round after waiting up to ``--wait`` seconds for a quiet machine); a row then
holds the median time and the median of the per-round ratios to ARPACK, so the ratios are
measured side by side under the same load.  ``--product-costs`` first times ``H.matmat`` on
blocks of those widths (round-robin, median of 9) and prints each block's cost in single
products.  Numba compile time is measured once, before any timing, on a tiny Hessian.  The
load from other processes (CPU seconds outside this process tree, from /proc/stat, per wall
second) is recorded for every row (median over rounds).  Writes
benchmarks/results/eigensolvers.csv (rows of the sizes and methods rerun are replaced, the
others kept) and .png, and prints a table with ratios to ARPACK.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np
from _util import wait_for_quiet

import rmt

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ["lanczos", "block_lanczos", "arpack", "lobpcg", "primme"]
FIELDS = ["size", "d", "n", "method", "time_s", "n_matvec", "n_passes", "ratio_to_arpack",
          "speedup_vs_dense", "max_rel_err_vs_dense", "max_residual_rel", "other_load_cores",
          "status", "time_min_s", "time_max_s", "repeats"]  # fmt: skip


def machine_cpu_seconds() -> float:
    """CPU seconds (user+nice+system+irq+softirq) spent by the whole machine, /proc/stat."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()[1:]
    ticks = sum(int(fields[i]) for i in (0, 1, 2, 5, 6))
    return ticks / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class LoadMeter:
    """Other processes' CPU use during a block, in cores (CPU seconds per wall second)."""

    def __enter__(self):
        self.t0, self.m0, self.o0 = (
            time.perf_counter(),
            machine_cpu_seconds(),
            own_cpu_seconds(),
        )
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        other = (machine_cpu_seconds() - self.m0) - (own_cpu_seconds() - self.o0)
        self.cores = max(other, 0.0) / max(wall, 1e-9)


def make_hessian(size, m=4, seed=0):
    """The benchmark Hessian with ``m*d = size``, ``n = 4d``."""
    d = size // m
    data = rmt.MultiIndexModel("phase_retrieval").sample(4 * d, d, rng=seed)
    W = np.random.default_rng(seed + 1).standard_normal((d, m)) / np.sqrt(d)
    return rmt.Hessian(rmt.TwoLayerNet(m, "tanh", "square"), data, W)


def compile_time() -> float:
    """Seconds for the first (compiling or cache-loading) calls of every Numba kernel used."""
    t0 = time.perf_counter()
    H = make_hessian(64)
    rmt.extreme_eigs(H, k=2, method="lanczos", rng=0)
    rmt.spectral_density(H, n_probes=2, steps=5, rng=0)
    return time.perf_counter() - t0


def run_method(H, method, tol, rng):
    """One timed solve; returns (time, result or None, status text)."""
    t0 = time.perf_counter()
    try:
        result = rmt.extreme_eigs(H, k=5, which="smallest", method=method, tol=tol, rng=rng)
        return time.perf_counter() - t0, result, "ok"
    except ImportError:
        return float("nan"), None, "not installed"
    except rmt.NoConvergenceError as exc:
        return time.perf_counter() - t0, None, f"no convergence ({exc.result.k}/5)"


def bench_size(size, tol, dense_max, methods=tuple(METHODS), repeat=1, wait=0.0):
    """All rows for one size; the dense reference first (once) when it fits."""
    H = make_hessian(size)
    ref, dense_time, rows = None, None, []
    if size <= dense_max:
        with LoadMeter() as load:
            t, res, status = run_method(H, "dense", tol, 0)
        ref, dense_time = (res.values if res is not None else None), t
        rows.append(_row(H, "dense", [(t, res, status, load.cores)], None, ref))
    runs = {method: [] for method in methods}
    for _ in range(repeat):
        if wait > 0:
            wait_for_quiet(timeout=wait)
        for method in methods:
            with LoadMeter() as load:
                t, res, status = run_method(H, method, tol, 0)
            runs[method].append((t, res, status, load.cores))
    rows += [_row(H, m, runs[m], dense_time, ref) for m in methods]
    for r in rows:
        r["ratio_to_arpack"] = _median_ratio(runs, r["method"], r["time_s"])
    return rows


def _median_ratio(runs, method, time_s):
    """Median over rounds of ``time(method) / time(arpack)`` in the same round."""
    if method not in runs:  # dense: run once, against the median ARPACK time
        return time_s / statistics.median(t for t, *_ in runs["arpack"])
    pairs = zip(runs[method], runs["arpack"])
    return statistics.median(a[0] / b[0] for a, b in pairs)


def _row(H, method, runs, dense_time, ref):
    """One CSV row from the rounds of one method: median time and load, last result."""
    times = [t for t, *_ in runs]
    t = statistics.median(times)
    _, res, status, _ = runs[-1]
    bad = [s for _, _, s, _ in runs if s != "ok"]
    status = bad[0] if bad else status
    err = np.nan
    if res is not None and ref is not None:
        err = float(np.max(np.abs(res.values - ref) / np.abs(ref)))
    return {
        "size": H.shape[0], "d": H.d, "n": H.n, "method": method, "time_s": t,
        "n_matvec": res.n_matvec if res else 0, "n_passes": res.n_passes if res else 0,
        "ratio_to_arpack": np.nan,
        "speedup_vs_dense": dense_time / t if dense_time and method != "dense" else np.nan,
        "max_rel_err_vs_dense": err,
        "max_residual_rel": float(np.max(res.residuals) / res.norm_estimate) if res else np.nan,
        "other_load_cores": statistics.median(c for *_, c in runs), "status": status,
        "time_min_s": min(times), "time_max_s": max(times), "repeats": len(runs),
    }  # fmt: skip


def product_costs(size, widths, repeats=9):
    """Median time of ``H.matmat`` on blocks of each width, timed round-robin; prints them."""
    H = make_hessian(size)
    rng = np.random.default_rng(0)
    blocks = {b: rng.standard_normal((H.shape[0], b)) for b in widths}
    for V in blocks.values():
        H.matmat(V)  # first touch of X and D, outside the timing
    times = {b: [] for b in widths}
    with LoadMeter() as load:
        for _ in range(repeats):
            for b, V in blocks.items():
                t0 = time.perf_counter()
                H.matmat(V)
                times[b].append(time.perf_counter() - t0)
    base = statistics.median(times[widths[0]])
    print(f"block products at m*d = {size}, median of {repeats}, other load {load.cores:.2f}")
    for b in widths:
        med = statistics.median(times[b])
        print(
            f"  b={b:>2}: {1e3 * med:7.1f} ms  = {med / base:5.2f} x b={widths[0]}"
            f"  ({med / base / b:4.2f} per vector)  min {1e3 * min(times[b]):7.1f} ms"
        )
    return times


def print_table(rows):
    head = f"{'m*d':>6} {'method':>14} {'time s':>8} {'prods':>6} {'passes':>6} "
    head += f"{'/arpack':>8} {'x dense':>8} {'rel err':>9} {'load':>5}  status"
    print(head)
    for r in rows:
        print(
            f"{r['size']:>6} {r['method']:>14} {r['time_s']:>8.3f} {r['n_matvec']:>6} "
            f"{r['n_passes']:>6} {r['ratio_to_arpack']:>8.2f} {r['speedup_vs_dense']:>8.1f} "
            f"{r['max_rel_err_vs_dense']:>9.1e} {r['other_load_cores']:>5.2f}  {r['status']}"
        )


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6, 4))
    for method in ["dense"] + METHODS:
        pts = [
            (r["size"], r["time_s"]) for r in rows if r["method"] == method and r["status"] == "ok"
        ]
        if pts:
            ax.loglog(*zip(*pts), "o-", label=method)
    sizes = sorted({int(r["size"]) for r in rows})
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("m d (Hessian size; n = 4d, m = 4)")
    ax.set_ylabel("time to the 5 smallest eigenpairs (s)")
    ax.set_title("5 smallest eigenpairs to tol 1e-8, one run", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 16000, 32000])
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--dense-max", type=int, default=8000)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=METHODS,
        choices=METHODS,
        help="subset to rerun (arpack is always included: ratios need it)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="round-robin rounds per size")
    parser.add_argument(
        "--wait", type=float, default=0.0,
        help="seconds to wait for a quiet machine before each round",
    )  # fmt: skip
    parser.add_argument(
        "--product-costs", type=int, nargs="*", default=[],
        help="block widths whose H.matmat cost is measured first (at the first size)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"numba threads {numba.get_num_threads()}, numpy {np.__version__}, tol {args.tol}")
    with LoadMeter() as load:
        compile_s = compile_time()
    print(f"numba compile/cache-load time {compile_s:.2f} s (other load {load.cores:.2f} cores)")
    if args.product_costs:
        product_costs(args.sizes[0], args.product_costs)
    rows = []
    for size in args.sizes:
        methods = [m for m in METHODS if m in set(args.methods) | {"arpack"}]
        rows += bench_size(size, args.tol, args.dense_max, methods, args.repeat, args.wait)
        print_table([r for r in rows if r["size"] == size])
        sys.stdout.flush()
        _write_csv(rows, args.out / "eigensolvers.csv")
    plot(rows, args.out / "eigensolvers.png")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak RSS {peak:.1f} GiB; compile {compile_s:.2f} s")
    print_table(rows)


def _write_csv(rows, path):
    """Write ``rows``, keeping the rows of ``path`` for the (size, method) pairs not rerun."""
    new = {(int(r["size"]), r["method"]) for r in rows}
    old = []
    if path.exists():
        with open(path, newline="") as fh:
            old = [r for r in csv.DictReader(fh) if (int(r["size"]), r["method"]) not in new]
    merged = sorted(old + rows, key=lambda r: int(r["size"]))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS, restval="")
        writer.writeheader()
        writer.writerows(merged)


if __name__ == "__main__":
    main()
