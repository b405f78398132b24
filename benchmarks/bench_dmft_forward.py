"""The per-sample process run forward at solved kernels: the width kernels against the generic.

The Hessian law at the DMFT plateau comes from fresh draws of the per-sample process (D1) at
the solved kernels (``rmt.dynamics.dmft.resampled_laws``, docs/theory.md 8.10).  For each
draw and step the memory term ``sum_{p<s} R_w(s, p) psi^p`` costs ``m^2 s`` multiply-adds, so
a run to step ``t`` costs ``N m^2 t^2 / 2``.  The contenders, on random inputs of the shapes
of a law (``Rw`` of a causal response's size, fields of ``N`` draws), taking turns:

* ``generic``: ``rmt.kernels.dmft.forward_process`` (the portable reference, one draw at a
  time, the memory term by scalar loops);
* ``table``: ``rmt.kernels.dispatch.forward_kernel(m)`` (for ``m <= 4`` the chunked kernels
  ``forward_process_m{m}``: the memory term of a chunk of draws by ``dot_rows`` on 4 lanes).

Prints the medians, the ratio generic / table, and the largest difference of the outputs
(the kernels sum in different orders, so it is rounding only).

Run: ``python benchmarks/bench_dmft_forward.py [--t 150] [--draws 40000] [--threads 2]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from _util import cpu_info, measure, set_threads

import rmt
from rmt.kernels import dmft
from rmt.kernels.dispatch import default_target, forward_kernel


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--t", type=int, default=150, help="the last step (default 150)")
    p.add_argument("--draws", type=int, default=40_000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--widths", type=int, nargs="+", default=[1, 2, 3, 4])
    return p.parse_args(argv)


def inputs(m, t, N, rng):
    """Random inputs of a law's shapes: a causal ``Rw`` of the size of a solve's, a field of
    unit scale, ``k = 2`` spike coordinates and phase-retrieval labels."""
    b = (t + 1) * m
    Rw = np.tril(0.02 * rng.standard_normal((b, b)) / np.sqrt(t + 1), -m)
    M = 0.1 * rng.standard_normal((t + 1, m, 2))
    Z = rng.standard_normal((N, 2))
    Y = Z[:, 0] ** 2 - 1.0
    X = 0.3 * rng.standard_normal((N, b))
    return Rw, M, Z, Y, X


def main(argv=None):
    args = parse_args(argv)
    threads = set_threads(args.threads)
    cpu = cpu_info()
    print(
        f"CPU {cpu['model']}, {cpu['simd']}; path {default_target()}; {threads['numba']} thread(s)"
    )
    print(f"to step t = {args.t}, {args.draws} draws; median of {args.repeats} turns")
    rng = np.random.default_rng(0)
    t, N = args.t, args.draws
    for m in args.widths:
        net = rmt.TwoLayerNet(m, activation="softplus", loss="huber")
        a = np.asarray(net.a, np.float64)
        Rw, M, Z, Y, X = inputs(m, t, N, rng)
        widths = np.zeros((t + 1, m))
        slot = np.full(t + 1, -1)
        slot[[t // 2, t]] = [0, 1]
        kernels = {"generic": dmft.forward_process, "table": forward_kernel(m)}
        outs = {name: np.zeros((2, N, m)) for name in kernels}
        funcs = {
            name: (
                lambda k=k, o=outs[name]: k(
                    net.act_code, net.loss_code, 1.0, a, Rw, M, Z, Y, X, 0.2, widths, slot, o
                )  # fmt: skip
            )
            for name, k in kernels.items()
        }
        for f in funcs.values():
            f()
        timings, load, _ = measure(funcs, repeats=args.repeats)
        gen, tab = timings["generic"]["median"], timings["table"]["median"]
        diff = np.abs(outs["table"] - outs["generic"]).max()
        scale = np.abs(outs["generic"]).max()
        print(
            f"m = {m}: generic {1e3 * gen:.0f} ms, table {kernels['table'].__name__} "
            f"{1e3 * tab:.0f} ms: generic / table {gen / tab:.2f}x; largest difference "
            f"{diff:.1e} of {scale:.1f}; others' load {load:.2f} cores"
        )


if __name__ == "__main__":
    main()
