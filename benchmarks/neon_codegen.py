"""The explicit-SIMD product kernels compiled for AArch64 (ARM NEON), loops counted.

No ARM machine was available, so the NEON goals are argued from the kernels' arithmetic. The
``<4 x double>`` kernels of the ``avx2`` path (``rmt/kernels/simd.py``) are written in plain LLVM
IR vectors: no x86 intrinsic. This script compiles each kernel here, takes its LLVM IR, retargets
the module to ``aarch64-unknown-linux-gnu`` (llvmlite ships the AArch64 back end) and emits
assembly for a given ARM core. It then finds the innermost loops and counts, per iteration:

* ``fma``: the multiply-adds of the arithmetic on ``.2d`` vectors (``fmla``/``fmls`` by vector
  or by element, and the ``fmul`` that starts a partial sum); ``fp``: every vector FP operation
  (also the ``fadd`` that joins two partial sums), each of which takes an FP pipe;
* ``ld`` and ``st``: vector and scalar FP loads and stores (``ldp``/``stp`` count two);
* ``spill``: loads and stores on the stack (``[sp``): registers the loop ran out of.

From these it gives the in-core bound of each loop on a core with ``F`` FMA pipes of 128 bits,
``L`` loads and ``S`` stores a cycle (data in L1): cycles per iteration
``max(fp / F, ld / L, st / S)`` and the share of the FMA peak that bound allows. The cores
(from the vendors' optimisation guides; assumptions, not measurements): ``neoverse-n1``
(AWS Graviton2, Ampere Altra) ``F = 2, L = 2, S = 1``; ``apple-m1`` (Firestorm) ``F = 4,
L = 3, S = 2``. AArch64 has 32 vector registers of 128 bits: the 16 ``ymm`` of 4 doubles that
the AVX2 kernels are sized for are exactly 32 NEON registers.

What this cannot show: the memory system (DRAM bandwidth per core, prefetchers), which sets the
goals relative to a pass over ``X``. The arithmetic for those, in flops per byte of ``X``, is in
``benchmarks/RESULTS.md``, section "ARM NEON".

``--portable`` does the same for the portable path's product of one vector (``hvp_m4``), the
default on ARM: Numba compiles it with ``NUMBA_OPT=0`` and LLVM's ``O3`` pipeline then runs for
the ARM core, so that the loop vectoriser sizes it for NEON rather than for this machine.

Run: ``python benchmarks/neon_codegen.py [--cpu neoverse-n1 apple-m1] [--asm DIR] [--portable]``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

# inspect_llvm needs a fresh compile: Numba keeps no IR of code loaded from a cache
os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="rmt_neon_codegen")
if (
    "--portable" in sys.argv[1:]
):  # LLVM must vectorise for AArch64: Numba hands over its IR unoptimised
    os.environ["NUMBA_OPT"] = "0"

TRIPLE = "aarch64-unknown-linux-gnu"
#: FMA pipes (128-bit), loads and stores a cycle of each core (see the module docstring)
CORES = {"neoverse-n1": (2, 2, 1), "apple-m1": (4, 3, 2)}

_LABEL = re.compile(r"^(\.LBB\d+_\d+):")
_BRANCH = re.compile(r"^\s+(?:b(?:\.\w+)?|cbn?z\s+\w+,|tbn?z\s+\w+,\s*#\d+,)\s+(\.LBB\d+_\d+)")
_FMA = re.compile(r"^\s+(fml[as]|fmul|fadd|fsub)\s+v\d+\.2d")
_LDST = re.compile(r"^\s+(ld[rp]|ld1r?|st[rp]|st1)\s+(.*)$")


#: the micro-kernels of the ``avx2`` path, as (intrinsic, rows R, lane vectors W) with 4 lanes,
#: and the dispatched kernels (m = 4) whose loops they are
MICRO = {
    "dots 5x2": ("dot_rows", 5, 2, "simd4_c8 (block of 2), panel4_c32 (block of 8)"),
    "updates 5x2": ("axpy_rows", 5, 2, "simd4_c8, panel4_c32"),
    "dots 8x1": ("dot_rows", 8, 1, "simd4_c4 (one vector), grad4_c4 (gradient step)"),
    "updates 8x1": ("axpy_rows", 8, 1, "simd4_c4, grad4_c4"),
}


def micro_kernel(name: str, rows: int, vectors: int):
    """``(njit function, args)``: one call of the intrinsic ``name`` of ``rmt.kernels.simd``
    on ``rows`` rows and ``vectors`` lane vectors of 4 doubles, on small arrays, so that the
    function's one loop is the micro-kernel's."""
    import numpy as np
    from numba import njit

    from rmt.kernels import simd

    # R, W and L must be literals, as in the kernels: one function per shape
    scope = {"intrinsic": getattr(simd, name)}
    exec(f"def call(X, A, B):\n    intrinsic(X, 0, A, B, {rows}, {vectors}, 4)\n", scope)
    d, lw = 64, 4 * vectors
    entries = d  # the rows of Vtt or of acc
    X = np.ones((rows, d))
    if name.startswith("dot"):  # (X, i, Vtt, U)
        A, B = np.ones((entries, lw)), np.ones((rows, lw))
    else:  # (X, i, Rr, acc)
        A, B = np.ones((rows, lw)), np.ones((entries, lw))
    return njit(scope["call"]), (X, A, B)


def retarget(ir: str, target_data: str) -> str:
    """The module ``ir`` for AArch64: triple and data layout replaced, the host CPU's attributes
    dropped, and ``NRT_decref`` (whose x86 form uses an x86 atomic intrinsic; it is no loop)
    reduced to a stub."""
    ir = re.sub(r'target triple = ".*"', f'target triple = "{TRIPLE}"', ir)
    ir = re.sub(r'target datalayout = ".*"', f'target datalayout = "{target_data}"', ir)
    ir = re.sub(r'"target-(cpu|features)"="[^"]*"', "", ir)
    ir = re.sub(
        r"^define [^\n]*@NRT_decref\(.*?^}$",
        "define linkonce_odr void @NRT_decref(ptr %.1) {\n  ret void\n}",
        ir,
        flags=re.M | re.S,
    )
    return re.sub(r"^declare [^\n]*@llvm\.x86\.[^\n]*$", "", ir, flags=re.M)


def aarch64_asm(ir: str, cpu: str, optimise: bool = False) -> str:
    """AArch64 assembly of the LLVM module ``ir`` for ``cpu`` (``-O3`` code generation); with
    ``optimise``, LLVM's ``O3`` pipeline runs first for that target (loop and SLP vectorisers
    with AArch64's cost model), as Numba's own pipeline would on an ARM machine."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=cpu, features="+neon", opt=3)
    mod = llvm.parse_assembly(retarget(ir, str(tm.target_data)))
    mod.verify()
    if optimise:
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = pto.slp_vectorization = pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


def innermost_loops(asm: str) -> list[list[str]]:
    """The bodies of the innermost loops of ``asm``: the lines from a label to a branch back to
    it, holding no other such back edge."""
    lines = asm.splitlines()
    where = {}
    loops = []
    for j, line in enumerate(lines):
        lab = _LABEL.match(line)
        if lab:
            where[lab.group(1)] = j
        br = _BRANCH.match(line)
        if br and br.group(1) in where:
            loops.append((where[br.group(1)], j))
    inner = [(i, j) for i, j in loops if not any(i <= a and b <= j and (a, b) != (i, j)
                                                 for a, b in loops)]  # fmt: skip
    return [lines[i : j + 1] for i, j in inner]


def count(body: list[str]) -> dict:
    """Vector FP operations, FP loads, stores and stack accesses of one iteration of ``body``:
    ``fma`` counts the multiply-adds of the arithmetic (``fmla``/``fmls``, and ``fmul``, the
    first product of a partial sum), ``fp`` every FP operation (with the ``fadd`` that joins
    partial sums), all of which take an FP pipe."""
    c = {"fma": 0, "fp": 0, "ld": 0, "st": 0, "spill": 0}
    for line in body:
        fp = _FMA.match(line)
        if fp:
            c["fp"] += 1
            c["fma"] += fp.group(1) in ("fmla", "fmls", "fmul")
            continue
        mem = _LDST.match(line)
        if not mem:
            continue
        op, operands = mem.groups()
        regs = operands.split("[", 1)[0]
        if not re.search(r"\b[qd]\d+\b|\bv\d+\.", regs):  # integer registers: addresses, counters
            continue
        times = 2 if op in ("ldp", "stp") else 1
        c["ld" if op.startswith("ld") else "st"] += times
        if "[sp" in operands:
            c["spill"] += times
    return c


def bound(c: dict, core: tuple) -> tuple[float, float]:
    """Cycles per iteration and the share of the FMA peak, data in L1, on ``core``."""
    f, lp, sp = core
    cycles = max(c["fp"] / f, c["ld"] / lp, c["st"] / sp)
    return cycles, (c["fma"] / f) / cycles if cycles else 0.0


def analyse(label, kernel, args, cpus, asm_dir=None):
    """Count the loop of the micro-kernel ``kernel`` (compiled on ``args``) on each core of
    ``cpus``: returns ``[(cpu, counts, cycles, share)]``."""
    kernel(*args)
    ir = kernel.inspect_llvm(kernel.signatures[0])
    rows = []
    for cpu in cpus:
        asm = aarch64_asm(ir, cpu)
        if asm_dir:
            Path(asm_dir, f"{label.replace(' ', '_')}_{cpu}.s").write_text(asm)
        c = max(map(count, innermost_loops(asm)), key=lambda c: c["fma"])
        cycles, share = bound(c, CORES[cpu])
        rows.append((cpu, c, cycles, share))
    return rows


def portable(cpus, asm_dir=None):
    """Print the hottest loops of the portable path's product of one vector of m = 4
    (``hvp_m4``, vectorised by LLVM along ``d``), compiled for each core of ``cpus``."""
    import numpy as np

    from rmt.kernels.hessian import hvp_kernel

    k = hvp_kernel(4, 4, "portable")
    k(np.ones((40, 16)), np.ones((40, 4, 4)), np.ones((4, 16)), 2)
    ir = k.inspect_llvm(k.signatures[0])
    print(f"AArch64 codegen ({TRIPLE}) of the portable path's {k.__name__}, vectorised by LLVM's "
          "O3 pipeline for each core; its two hottest loops:")  # fmt: skip
    for cpu in cpus:
        asm = aarch64_asm(ir, cpu, optimise=True)
        if asm_dir:
            Path(asm_dir, f"portable_{k.__name__}_{cpu}.s").write_text(asm)
        for c in sorted(map(count, innermost_loops(asm)), key=lambda c: -c["fma"])[:2]:
            cycles, share = bound(c, CORES[cpu])
            print(f"  {k.__name__:8s} {cpu:12s} fma {c['fma']:3d} fp {c['fp']:3d} ld {c['ld']:3d} "
                  f"st {c['st']:3d} spill {c['spill']:3d}  {cycles:5.1f} cycles, {share:4.0%} "
                  "of the FMA peak in L1")  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", nargs="+", default=list(CORES), choices=list(CORES))
    p.add_argument("--asm", default=None, help="also write each loop's assembly to this folder")
    p.add_argument("--portable", action="store_true",
                   help="the portable path's product instead (Numba's IR unoptimised)")  # fmt: skip
    args = p.parse_args(argv)
    if args.asm:
        Path(args.asm).mkdir(parents=True, exist_ok=True)
    if args.portable:
        portable(args.cpu, args.asm)
        return 0
    print(f"AArch64 codegen ({TRIPLE}, -O3) of the avx2 path's <4 x double> micro-kernels; "
          "per iteration of each loop (one entry of d; two for the pairs):")  # fmt: skip
    print(f"  {'loop':18s} {'core':12s} {'fma':>4s} {'fp':>4s} {'ld':>4s} {'st':>4s} {'spill':>5s}"
          f" {'cycles':>7s}  FMA peak in L1   used by")  # fmt: skip
    for label, (name, r, w, used) in MICRO.items():
        fn, a = micro_kernel(name, r, w)
        for cpu, c, cycles, share in analyse(label, fn, a, args.cpu, args.asm):
            print(f"  {label:18s} {cpu:12s} {c['fma']:4d} {c['fp']:4d} {c['ld']:4d} {c['st']:4d} "
                  f"{c['spill']:5d} {cycles:7.1f}  {share:13.0%}   {used}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
