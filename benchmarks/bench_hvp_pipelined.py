"""The single product of m = 4 with its two phases pipelined: prototypes by rows per step.

``hvp_m4`` (the unrolled kernel for one vector of m = 4) takes 8 rows per step through two sweeps
over ``d``: the dots ``x_i . v_c`` (the rows stream from memory), then the updates
``acc_c += r_ic x_i`` (the rows again, from L2).  While the updates run, nothing streams.  The
prototypes here, ``pipe{R}``, do both in one sweep: the dots of the next ``R`` rows and the
updates of the ``R`` rows before them, whose coefficients the previous sweep finished.  The
memory stream then overlaps the second phase.  ``pipe4`` is the scheme of ``hvp_m4_p4``
(``tools/gen_hvp_small.py``, ``pipelined_source``), which the AVX-512 path dispatches for one
vector of m = 4; this script tries other row counts (and other CPUs) against ``hvp_m4``.

Printed, in runs of 5 consecutive calls with the contenders in turn (median of 7 runs; the CPU
named): one pass over ``X`` (``_kernels.stream_pass``), ``hvp_m4``, a dots-only sweep of 8 rows
(the floor of the two-phase form) and ``pipe{R}`` for the ``--rows`` given, each as a ratio to
the pass and ``pipe{R}`` to ``hvp_m4``; the largest difference of each product from ``hvp_m4``
(relative to its largest entry) is checked first; where the dispatch picks another kernel for
this vector (``hvp_m4`` on AVX-512, ``simd4_c4`` on AVX2), it is timed too ("dispatch").
The prototypes compile without cache (their source is generated here); compile time is printed
apart.

``--widths 1,2,3,4`` times instead the committed pipelined kernels (``hvp_m{m}_p4``,
``grad_m{m}_p4``) against the two-loop ones, one vector of each width, and names the kernels the
dispatch picks on this path (``TABLE`` in ``rmt/kernels/dispatch.py``).

Run:  python benchmarks/bench_hvp_pipelined.py [--n 16000] [--d 4000] [--rows 4 6] [--float32]
      python benchmarks/bench_hvp_pipelined.py --widths 1,2,3,4
"""

from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from _kernels import stream_pass
    from _util import LoadMeter, cpu_info, set_threads, time_runs
except ImportError:  # run from the repository root
    from benchmarks._kernels import stream_pass
    from benchmarks._util import LoadMeter, cpu_info, set_threads, time_runs


def _source(R: int, pipelined: bool, updates: bool = True) -> str:
    """Source of a kernel ``f(X, D, Vt, n_chunks)`` for one vector of m = 4 (``Vt``: 4 x d)."""
    L = [
        "def kernel(X, D, Vt, n_chunks):",
        "    n, d = X.shape",
        "    partial = np.zeros((n_chunks, 4, d))",
        "    chunk = (n + n_chunks - 1) // n_chunks",
        "    for ch in prange(n_chunks):",
        "        lo = ch * chunk",
        "        hi = min(n, lo + chunk)",
        "        g0, g1, g2, g3 = partial[ch, 0], partial[ch, 1], partial[ch, 2], partial[ch, 3]",
        "        v0, v1, v2, v3 = Vt[0], Vt[1], Vt[2], Vt[3]",
    ]

    def dots(rows, ind):
        out = [f"{ind}s{r}_{c} = 0.0" for r in rows for c in range(4)]
        out.append(f"{ind}for t in range(d):")
        out += [f"{ind}    w{c} = v{c}[t]" for c in range(4)]
        for r in rows:
            out.append(f"{ind}    a{r} = x{r}[t]")
            out += [f"{ind}    s{r}_{c} += a{r} * w{c}" for c in range(4)]
        return out

    def coefficients(rows, ind, name="q"):
        out = []
        for r in rows:
            out.append(f"{ind}Dq = D[i + {r}]")
            out += [
                f"{ind}{name}{r}_{c} = " + " + ".join(f"s{r}_{k} * Dq[{k}, {c}]" for k in range(4))
                for c in range(4)
            ]
        return out

    def update(rows, ind, src="x", name="q"):
        out = [f"{ind}for t in range(d):"]
        out += [f"{ind}    b{r} = {src}{r}[t]" for r in rows]
        out += [
            f"{ind}    g{c}[t] += " + " + ".join(f"b{r} * {name}{r}_{c}" for r in rows)
            for c in range(4)
        ]
        return out

    rows = range(R)
    if not pipelined:  # the two-phase form of hvp_m4 (dots, then updates), or dots only
        L += ["        i = lo", f"        while i + {R} <= hi:"]
        L += [f"            x{r} = X[i + {r}]" for r in rows]
        L += dots(rows, " " * 12) + coefficients(rows, " " * 12)
        if updates:
            L += update(rows, " " * 12)
        else:
            L.append("            g0[0] += " + " + ".join(f"q{r}_0" for r in rows))
        L.append(f"            i += {R}")
        L += ["        while i < hi:", "            x0 = X[i]"]
        L += dots([0], " " * 12) + coefficients([0], " " * 12)
        L += (update([0], " " * 12) if updates else []) + ["            i += 1"]
    else:
        # y: the rows whose updates are pending, q: their coefficients (zero before the first)
        L += [f"        q{r}_{c} = 0.0" for r in rows for c in range(4)]
        L += [f"        y{r} = X[lo]" for r in rows]
        L += ["        i = lo", f"        while i + {R} <= hi:"]
        L += [f"            x{r} = X[i + {r}]" for r in rows]
        body = dots(rows, " " * 12)
        body += [f"                b{r} = y{r}[t]" for r in rows]
        body += [
            "                g{c}[t] += ".format(c=c) + " + ".join(f"b{r} * q{r}_{c}" for r in rows)
            for c in range(4)
        ]
        L += body + coefficients(rows, " " * 12)
        L += [f"            y{r} = x{r}" for r in rows] + [f"            i += {R}"]
        L += update(rows, " " * 8, src="y")  # the last pending rows
        L += ["        while i < hi:", "            x0 = X[i]"]
        L += dots([0], " " * 12) + coefficients([0], " " * 12, name="p")
        L += update([0], " " * 12, name="p") + ["            i += 1"]
    L.append("    return partial.sum(axis=0)")
    return "\n".join(L)


def compile_kernel(R: int, pipelined: bool, updates: bool = True):
    from numba import njit, prange

    scope = {"np": np, "prange": prange}
    exec(_source(R, pipelined, updates), scope)  # generated above; no file, so no cache
    return njit(parallel=True, fastmath=True)(scope["kernel"])


def widths_side_by_side(n, d, widths, repeats):
    """The pipelined kernels of ``_generated`` (``hvp_m{m}_p4``, for the widths that have one)
    against the two-loop ones (``hvp_m{m}``), one vector of each width, the two-loop step
    ``grad_m{m}``, and the kernels the dispatch picks on this path; ratios to the pass and to
    the two-loop kernel."""
    from rmt.kernels._generated.descent_small import GRAD_KERNELS
    from rmt.kernels._generated.hvp_small import KERNELS, PIPELINED
    from rmt.kernels.descent import step_kernels
    from rmt.kernels.dispatch import default_target
    from rmt.kernels.hessian import default_chunks, hvp_kernel

    SIMD_TARGET = default_target()

    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, d))
    y = rng.standard_normal(n)
    chunks = default_chunks()
    funcs = {"pass": lambda: stream_pass(X)}
    picked = {}
    for m in widths:
        A = rng.standard_normal((n, m, m))
        D = A + A.transpose(0, 2, 1)
        Vt = np.ascontiguousarray(rng.standard_normal((m, d)))
        Wt = np.ascontiguousarray(rng.standard_normal((m, d)) / np.sqrt(d))
        a = np.ones(m) / m
        args = (y, a, 3, 2, 1.0, chunks)  # softplus, Huber
        funcs[f"hvp_m{m}"] = lambda k=KERNELS[m], D=D, Vt=Vt: k(X, D, Vt, chunks)
        if m in PIPELINED:
            ref = KERNELS[m](X, D, Vt, chunks)
            err = np.abs(PIPELINED[m](X, D, Vt, chunks) - ref).max() / np.abs(ref).max()
            assert err < 1e-12, f"hvp_m{m}_p4 differs from hvp_m{m} by {err:.2e}"
            funcs[f"hvp_m{m}_p4"] = lambda k=PIPELINED[m], D=D, Vt=Vt: k(X, D, Vt, chunks)
        funcs[f"grad_m{m}"] = lambda k=GRAD_KERNELS[m], Wt=Wt, a=a: k(X, Wt, *args)
        picked[m] = (hvp_kernel(m, m).__name__, step_kernels(m)[0].__name__)
    for f in funcs.values():
        f()  # compile or load the cache
    with LoadMeter() as meter:
        med = time_runs(funcs, 5, repeats)
    print(
        f"pipelined against two-loop kernels, one vector: n = {n}, d = {d}, {chunks} row "
        f"chunks, path {SIMD_TARGET}; other load {meter.other_load:.2f} cores"
    )
    print(f"  pass {med['pass'] * 1e3:.2f} ms")
    for m in widths:
        two = med[f"hvp_m{m}"]
        if f"hvp_m{m}_p4" in med:
            pipe = med[f"hvp_m{m}_p4"]
            print(
                f"  m = {m} hvp : two-loop {two / med['pass']:.2f} passes, pipelined "
                f"{pipe / med['pass']:.2f} passes, {pipe / two:.3f}x"
            )
        print(f"  m = {m} grad: two-loop {med[f'grad_m{m}'] / med['pass']:.2f} passes")
        print(f"          dispatched here: {picked[m][0]}, {picked[m][1]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16000)
    parser.add_argument("--d", type=int, default=4000)
    parser.add_argument("--rows", type=int, nargs="+", default=[4, 6])
    parser.add_argument("--float32", action="store_true", help="X stored as float32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--widths",
        default="",
        help="instead: the committed pipelined kernels against the two-loop ones for these "
        "widths (e.g. 1,2,3,4), Hessian product and gradient step",
    )
    args = parser.parse_args()
    threads = set_threads(args.threads)
    cpu = cpu_info()
    print(f"CPU: {cpu['model']}, {cpu['simd']}; numba threads {threads['numba']}")
    if args.widths:
        widths = [int(w) for w in args.widths.split(",")]
        widths_side_by_side(args.n, args.d, widths, args.repeats)
        return
    from rmt.kernels._generated.hvp_small import hvp_m4
    from rmt.kernels.hessian import default_chunks, hvp_kernel

    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.n, args.d)).astype(np.float32 if args.float32 else np.float64)
    A = rng.standard_normal((args.n, 4, 4))
    D = A + A.transpose(0, 2, 1)
    Vt = np.ascontiguousarray(rng.standard_normal((4, args.d)))
    chunks = default_chunks()
    ref = hvp_m4(X, D, Vt, chunks)
    funcs = {"pass": lambda: stream_pass(X), "hvp_m4": lambda: hvp_m4(X, D, Vt, chunks)}
    chosen = hvp_kernel(4, 4, d=args.d)  # what rmt runs for one vector of m = 4 on this CPU
    print(f"the dispatch runs {getattr(chosen, '__name__', chosen)} for one vector of m = 4")
    if chosen is not hvp_m4:
        chosen(X, D, Vt, chunks)
        funcs["dispatch"] = lambda: chosen(X, D, Vt, chunks)
    kernels = [("dots8", compile_kernel(8, False, updates=False), False)]
    kernels += [(f"pipe{R}", compile_kernel(R, True), True) for R in args.rows]
    for name, f, check in kernels:
        t0 = time.perf_counter()
        out = f(X, D, Vt, chunks)
        print(f"{name}: compiled and first call in {time.perf_counter() - t0:.1f} s")
        if check:
            err = float(np.abs(out - ref).max() / np.abs(ref).max())
            assert err < 1e-12, f"{name} differs from hvp_m4 by {err:.2e}"
            print(f"  largest difference from hvp_m4: {err:.1e} of its largest entry")
        funcs[name] = lambda f=f: f(X, D, Vt, chunks)
    with LoadMeter() as meter:
        med = time_runs(funcs, 5, args.repeats)
    print(
        f"n = {args.n}, d = {args.d}, m = 4, X {X.dtype}, {chunks} row chunks; "
        f"other load {meter.other_load:.2f} cores"
    )
    for name, t in med.items():
        line = f"  {name:7s} {t * 1e3:7.2f} ms  {t / med['pass']:.2f} passes"
        if name.startswith("pipe"):
            line += f"  {t / med['hvp_m4']:.3f}x hvp_m4"
            if "dispatch" in med:
                line += f", {t / med['dispatch']:.3f}x the dispatched kernel"
        print(line)


if __name__ == "__main__":
    main()
