"""DMFT response rows: the kernel the dispatch table picks against the 4-lane kernel, same run.

A DMFT solve spends most of its time on the rows ``R_psi(t, .)`` of docs/theory.md (D3), by
reverse mode (``rmt.kernels.dmft``): ``N m^3 t^2 / 2`` multiply-adds a row.  For each width
``m = 1..4`` this times one row at step ``t`` on random inputs of the solver's shapes (``K`` of
the size of a solve's, Jacobians of ``N`` draws), single-threaded, the contenders taking turns:

* ``4 lanes``: ``response_row_m{m}`` (``dot_rows`` on ``<4 x double>``, the ``any`` row);
* ``table``: ``rmt.kernels.dispatch.response_kernel(m)`` on this CPU's path (the 8-lane
  ``response_row8_m3``, ``_m4`` on AVX-512 for m = 3, 4);
* ``generic``: ``response_row`` (the portable reference) for scale;
* other chunk sizes of the 4-lane kernel, the ratio other / kernel printed: ``4 lanes, chunks
  of 10`` for m = 2 (2 x 5 accumulators against the kernel's 8 draws, 2 x 4) and ``4 lanes,
  chunks of 2`` for m = 4 (4 x 2 against the kernel's 3 draws, 4 x 3).

Prints the medians, the multiply-add rate, the ratio table / 4 lanes, and the largest
difference of the rows (the kernels sum in different orders, so it is rounding only).

Run: ``python benchmarks/bench_dmft_lanes.py [--t 300] [--draws 640] [--repeats 5]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from _util import cpu_info, measure, set_threads
from numba import njit, prange

from rmt.kernels import dmft
from rmt.kernels.dispatch import default_target, response_kernel


@njit(parallel=True)
def _m2_chunks_of_10(KT, J, t, out):
    part = np.zeros((-(-J.shape[3] // 10), t + 1, 2, 2))
    for c in prange(J.shape[3] // 10):
        dmft._chunk_rows(KT, J, t, part, c, 2, 10, 5, 4)
    dmft._last_chunk(KT, J, t, part, 2, 10, 5, 4)
    dmft._sum_chunks(part, out)


@njit(parallel=True)
def _m4_chunks_of_2(KT, J, t, out):
    part = np.zeros((J.shape[3] // 2, t + 1, 4, 4))
    for c in prange(part.shape[0]):
        dmft._chunk_rows(KT, J, t, part, c, 4, 2, 2, 4)
    dmft._sum_chunks(part, out)


#: other chunk sizes of the 4-lane kernels, timed beside them
OTHER = {
    2: ("4 lanes, chunks of 10", _m2_chunks_of_10),
    4: ("4 lanes, chunks of 2", _m4_chunks_of_2),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--t", type=int, default=300, help="the step of the row (default 300)")
    p.add_argument("--draws", type=int, default=640, help="draws, a multiple of 16")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--widths", type=int, nargs="+", default=[1, 2, 3, 4])
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    set_threads(args.threads)
    cpu = cpu_info()
    print(f"CPU {cpu['model']}, {cpu['simd']}; path {default_target()}; {args.threads} thread(s)")
    print(f"one row at t = {args.t}, {args.draws} draws; median of {args.repeats} turns")
    rng = np.random.default_rng(0)
    t, N = args.t, args.draws
    for m in args.widths:
        KT = 0.01 * rng.standard_normal((t + 1, m, (t + 1) * m))
        J = 0.3 * rng.standard_normal((t + 1, m, m, N))
        kernels = {
            "4 lanes": getattr(dmft, f"response_row_m{m}"),
            "table": response_kernel(m),
            "generic": dmft.response_row,
        }
        if m in OTHER:
            kernels[OTHER[m][0]] = OTHER[m][1]
        outs = {name: np.zeros((t + 1, m, m)) for name in kernels}
        funcs = {name: (lambda k=k, o=outs[name]: k(KT, J, t, o)) for name, k in kernels.items()}
        for f in funcs.values():
            f()
        timings, load, _ = measure(funcs, repeats=args.repeats)
        fma = N * m**3 * t * (t + 1) / 2
        line = []
        for name, tm in timings.items():
            line.append(
                f"{name} {1e3 * tm['median']:.1f} ms ({2 * fma / tm['median'] / 1e9:.1f} GF/s)"
            )
        ratio = timings["4 lanes"]["median"] / timings["table"]["median"]
        if m in OTHER:
            other = timings[OTHER[m][0]]["median"] / timings["4 lanes"]["median"]
            line.append(f"{OTHER[m][0]} / now {other:.2f}x")
        diff = max(np.abs(o - outs["generic"]).max() for o in outs.values())
        scale = np.abs(outs["generic"]).max()
        print(
            f"m = {m}: " + "; ".join(line) + f"; table {kernels['table'].__name__} is "
            f"{ratio:.2f}x the 4-lane kernel; largest difference {diff:.1e} of {scale:.1f}; "
            f"others' load {load:.2f} cores"
        )


if __name__ == "__main__":
    main()
