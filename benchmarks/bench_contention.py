"""The library next to a CPU-bound process: the automatic thread count against Numba's default.

    python benchmarks/bench_contention.py [--n 2000] [--d 1000] [--steps 1500] [--repeat 3]
        [--eig-n 4000] [--no-eig] [--configure] [--json PATH] [--figure PATH]

Times, in one run, ``rmt.gradient_descent`` (phase retrieval, softplus/Huber, m = 2, fixed
seeds, ``n x d``, ``--steps`` steps, no test set) and the README tour's eigen call
(``rmt.extreme_eigs(H, k=8, method="block_lanczos")`` on the Hessian at the run's plateau,
``n = --eig-n``):

* alone, with the automatic thread count (``rmt/kernels/threads.py``, the library's default), and
  alone with Numba's default count fixed (``rmt.set_num_threads(NUMBA_NUM_THREADS)``, the old
  behaviour);
* next to a busy-loop process pinned to one of this process's CPUs, with the automatic count,
  and with Numba's default count fixed.

The first calls (compilation, or loading Numba's cache) are timed apart.  The cases alternate
within each round (``--repeat`` rounds; medians), the two alone before the busy loop starts.
The count that the automatic choice took is printed (``rmt.choose_threads()`` just before each
call: the call reuses that choice), as is the CPU time other processes used while the alone
cases ran (``LoadMeter``).  ``--configure`` calls ``rmt.configure_threads()`` first
(``OMP_WAIT_POLICY=PASSIVE``, as the CLI does); without it the library runs on libgomp's
defaults, as a script that only imports ``rmt`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _util import LoadMeter, cpu_info

import rmt

CASES = ("alone, automatic", "alone, Numba default", "busy, automatic", "busy, Numba default")
TICKS = ("alone\nautomatic", "alone\nall threads", "busy loop\nautomatic", "busy loop\nall threads")


def start_busy_loop(cpu: int) -> subprocess.Popen:
    """A Python busy loop pinned to ``cpu``; it runs until killed."""
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def timed(call, fixed):
    """``(seconds, threads)``: one call with the automatic count (``fixed=None``) or ``fixed``."""
    rmt.set_num_threads(fixed)
    threads = rmt.choose_threads()
    t0 = time.perf_counter()
    call()
    seconds = time.perf_counter() - t0
    rmt.set_num_threads(None)
    return seconds, threads


def measure(calls: dict, repeat: int, top: int, cpu: int) -> dict:
    """Every call in ``calls`` in the four cases of ``CASES``, ``repeat`` rounds each."""
    runs = {(name, case): [] for name in calls for case in CASES}

    def rounds(cases):
        for _ in range(repeat):
            for name, call in calls.items():
                for case in cases:
                    time.sleep(0.3)  # let the previous call's spinning threads sleep
                    runs[name, case].append(timed(call, None if "automatic" in case else top))

    with LoadMeter() as meter:
        rounds(CASES[:2])
    busy = start_busy_loop(cpu)
    try:
        time.sleep(0.5)
        rounds(CASES[2:])
    finally:
        busy.kill()
        busy.wait()
    out = {"other_load_alone": meter.other_load, "cases": {}}
    for (name, case), got in runs.items():
        times = [t for t, _ in got]
        out["cases"].setdefault(name, {})[case] = {
            "median_s": statistics.median(times),
            "times_s": times,
            "threads": sorted({k for _, k in got}),
        }
    return out


def figure(result: dict, path: Path) -> None:
    """Bars of the median times, one group per call, with the ratios to alone on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["cases"])
    colours = ("#4c72b0", "#a1c0e8", "#dd8452", "#c44e52")
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        cases = result["cases"][name]
        base = cases["alone, automatic"]["median_s"]
        values = [cases[c]["median_s"] for c in CASES]
        bars = ax.bar(range(len(CASES)), values, color=colours)
        for bar, v, case in zip(bars, values, CASES):
            k = "/".join(str(t) for t in cases[case]["threads"])
            label = f"{v:.2f} s\n{v / base:.1f}x\n{k} thr."
            ax.text(bar.get_x() + bar.get_width() / 2, v, label, ha="center", va="bottom",
                    fontsize=12)  # fmt: skip
        ax.set_xticks(range(len(CASES)))
        ax.set_xticklabels(TICKS, fontsize=12)
        ax.set_ylim(0, 1.35 * max(values))
        ax.set_ylabel("seconds (median)", fontsize=13)
        ax.set_title(name, fontsize=14)
        ax.tick_params(axis="y", labelsize=12)
        ax.spines[["top", "right"]].set_visible(False)
    cpus = result["cpus"]
    fig.suptitle(f"rmt next to a busy-loop process on one of {cpus} CPUs", fontsize=15)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--d", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--eig-n", type=int, default=4000, help="samples of the eigen call")
    parser.add_argument("--no-eig", action="store_true", help="gradient descent only")
    parser.add_argument("--configure", action="store_true", help="rmt.configure_threads() first")
    parser.add_argument("--json", type=Path, help="write the timings here")
    parser.add_argument("--figure", type=Path, help="write the bar chart here (PNG)")
    args = parser.parse_args(argv)
    if min(args.n, args.d, args.steps, args.repeat, args.eig_n) < 1:
        parser.error("--n, --d, --steps, --repeat and --eig-n must be >= 1")
    import numba

    settings = rmt.configure_threads() if args.configure else None
    top = numba.config.NUMBA_NUM_THREADS
    cpus = sorted(os.sched_getaffinity(0))
    if top < 2 or len(cpus) < 2:
        sys.exit("needs 2 CPUs and NUMBA_NUM_THREADS >= 2")
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    data = model.sample(n=args.n, d=args.d, rng=0)
    kwargs = dict(lr=0.5, steps=args.steps, rng=1, progress=False)

    t0 = time.perf_counter()
    run = rmt.gradient_descent(net, data, **kwargs)
    first = {"gradient_descent": time.perf_counter() - t0}
    calls = {f"gradient_descent (n = {args.n}, d = {args.d}, {args.steps} steps)": (
        lambda: rmt.gradient_descent(net, data, **kwargs))}  # fmt: skip
    if not args.no_eig:
        big = model.sample(n=args.eig_n, d=args.d, rng=2, theta=data.theta)
        W1 = run.W1 if run.W1 is not None else run.W_final
        H = rmt.Hessian(net, big, W1)
        t0 = time.perf_counter()
        rmt.extreme_eigs(H, k=8, which="smallest", method="block_lanczos", rng=3)
        first["extreme_eigs"] = time.perf_counter() - t0
        calls[f"block Lanczos, 8 smallest (n = {args.eig_n}, m*d = {H.shape[0]})"] = lambda: (
            rmt.extreme_eigs(H, k=8, which="smallest", method="block_lanczos", rng=3)
        )
    result = measure(calls, args.repeat, top, cpus[-1])
    result.update(
        first_calls_s=first,
        compile_s_reported_by_gradient_descent=run.compile_seconds,
        numba_num_threads=top,
        cpus=len(cpus),
        busy_loop_cpu=cpus[-1],
        configure_threads=None if settings is None else settings.applied or "kept",
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"),
        cpu=cpu_info(),
        argv=sys.argv[1:],
        date_utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )

    print(f"CPU: {result['cpu']['model']}, {result['cpu']['simd']}; {len(cpus)} CPUs, "
          f"NUMBA_NUM_THREADS {top}; OMP_WAIT_POLICY {result['omp_wait_policy']}")  # fmt: skip
    print("first calls (compilation or cache load): "
          + ", ".join(f"{k} {v:.2f} s" for k, v in first.items())
          + f" (gradient_descent's own compile_seconds {run.compile_seconds:.2f} s)")  # fmt: skip
    print(f"other processes' load while alone: {result['other_load_alone']:.2f} cores; "
          f"busy loop pinned to CPU {cpus[-1]}; median of {args.repeat}")  # fmt: skip
    for name, cases in result["cases"].items():
        base = cases["alone, automatic"]["median_s"]
        print(f"\n{name}")
        print(f"  {'case':<22} {'threads':>7} {'median':>9} {'ratio to alone':>15}   runs")
        for case in CASES:
            c = cases[case]
            k = "/".join(str(t) for t in c["threads"])
            runs = " ".join(f"{t:.2f}" for t in c["times_s"])
            print(f"  {case:<22} {k:>7} {c['median_s']:>8.3f}s {c['median_s'] / base:>14.2f}x"
                  f"   {runs}")  # fmt: skip
        b = cases["busy, automatic"]["median_s"] / base
        c = cases["busy, Numba default"]["median_s"] / base
        print(f"  (b)/(a) = {b:.2f}   (c)/(a) = {c:.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    if args.figure:
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        figure(result, args.figure)
    return result


if __name__ == "__main__":
    main()
