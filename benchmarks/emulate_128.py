"""Run a command with the ``portable`` path compiled for 128-bit vectors (ARM NEON).

No ARM machine was available. NEON vectors are 128 bits wide (2 doubles), with FMA, and the
``portable`` path (plain Numba kernels, no x86 intrinsics) is what such a machine runs. This
script runs a command with:

* the variables of :func:`emulate_avx2.avx2_environment` (Haswell codegen, no AVX-512), plus
  LLVM's ``prefer-128-bit`` tuning, so the loop vectoriser emits ``<2 x double>`` FMAs on
  ``xmm`` registers;
* ``RMT_SIMD=portable``, so no explicit ``<4 x double>`` kernel runs;
* its own ``NUMBA_CACHE_DIR`` (``/tmp/numba_v128``).

OpenBLAS keeps its AVX2 kernels: ``DGEMM`` in the same run is the 256-bit ceiling. On a Zen 3
both FMA pipes take one FMA a cycle whatever its width up to 256 bits, so 128-bit code has half
that ceiling. What the proxy cannot show: AArch64 has 32 vector
registers (the proxy 16), and ARM cores differ in FMA pipes (Neoverse N1: two 128-bit, as
here; Apple's large cores: four) and in memory bandwidth.

Run: ``python benchmarks/emulate_128.py [--check] -- python benchmarks/bench_hvp.py ...``;
``--check`` compiles the portable product of m = 4 under both codegens (128-bit and native),
compares it with numpy on random data and counts its FP vector instructions by register width.
"""

from __future__ import annotations

import os
import sys

try:
    from emulate_avx2 import avx2_environment, run_emulated
except ImportError:  # imported as benchmarks.emulate_128
    from benchmarks.emulate_avx2 import avx2_environment, run_emulated

CACHE_DIR = "/tmp/numba_v128"
#: the marker in ``NUMBA_CPU_FEATURES`` that ``_util.cpu_info`` reports
PREFER_128 = "+prefer-128-bit"


def v128_environment(base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) with the variables that make Numba compile the
    portable path for 128-bit vectors."""
    env = avx2_environment(base)
    env.update(
        NUMBA_CPU_FEATURES=env["NUMBA_CPU_FEATURES"] + "," + PREFER_128,
        NUMBA_CACHE_DIR=CACHE_DIR,
        RMT_SIMD="portable",
    )
    env.pop("OPENBLAS_CORETYPE", None)
    return env


CHECK = """
import collections, re
import numpy as np
from rmt.kernels.hessian import hvp_kernel

rng = np.random.default_rng(0)
X = rng.standard_normal((40, 16)); Vt = rng.standard_normal((4, 16))
D = rng.standard_normal((40, 4, 4)); D = D + D.transpose(0, 2, 1)
k = hvp_kernel(4, 4, "portable")
got = k(X, D, Vt, 2)
ref = ((np.einsum("ij,ijk->ik", X @ Vt.T, D)).T @ X)  # sum_i x_i r_i^T, r_i = D_i V^T x_i
print("max relative error against numpy:", float(np.abs(got - ref).max() / np.abs(ref).max()))
asm = k.inspect_asm(k.signatures[0])
ops = collections.Counter(re.findall(r"\\bv(fmadd|fnmadd|mul|add)\\w*pd\\s+[^\\n]*%(xmm|ymm|zmm)", asm))
print("portable", k.__name__, "FP vector ops by register:",
      dict(collections.Counter(w for (_, w), c in ops.items() for _ in range(c))))

"""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: emulate_128.py [--check] [--] command ...  (portable path, 128-bit codegen)")
        return
    env = v128_environment()
    checks = [("128-bit codegen", env, CHECK), ("native codegen", dict(os.environ), CHECK)]
    run_emulated(argv, env, checks, "emulate_128.py")


if __name__ == "__main__":
    main()
