"""Run a command with Numba compiling for AVX2 (Haswell) on an AVX-512 machine.

``NUMBA_CPU_NAME=haswell`` alone is not enough (Numba keeps the host's features), so this sets
``NUMBA_CPU_FEATURES`` to the host's feature list with every ``avx512*`` (and AMX) feature
turned off, a separate ``NUMBA_CACHE_DIR`` (``/tmp/numba_avx2``: AVX2 code must not share the
cache of native code), ``OPENBLAS_CORETYPE=Haswell`` for the BLAS baselines, and
``RMT_SIMD`` unset (the dispatch reads the features).  The code runs natively (an AVX-512 CPU
executes AVX2 code), so what differs is the register file (16 ``ymm`` registers of 4 doubles);
memory bandwidth and caches stay this machine's.

Run: ``python benchmarks/emulate_avx2.py [--check] -- python benchmarks/bench_hvp.py ...``;
``--check`` compiles one kernel and reports whether any ``zmm`` register appears in its asm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CACHE_DIR = "/tmp/numba_avx2"


def avx2_environment(base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) with the variables that make Numba compile for AVX2."""
    from llvmlite import binding

    feats = binding.get_host_cpu_features()
    spec = ",".join(
        ("-" if k.startswith(("avx512", "amx", "avxvnni", "avxifma", "avxneconvert")) else
         "+" if v else "-") + k
        for k, v in sorted(feats.items())
    )  # fmt: skip
    env = dict(os.environ if base is None else base)
    env.pop("RMT_SIMD", None)
    env.update(
        NUMBA_CPU_NAME="haswell",
        NUMBA_CPU_FEATURES=spec,
        NUMBA_CACHE_DIR=CACHE_DIR,
        OPENBLAS_CORETYPE="Haswell",
    )
    return env


CHECK = """
import re, numpy as np
from rmt.kernels.dispatch import default_target
from rmt.kernels.hessian import hvp_kernel
X = np.ones((40, 16)); D = np.ones((40, 4, 4))
for cols in (4, 8, 32):
    k = hvp_kernel(4, cols)
    k(X, D, np.ones((cols, 16)), 2)
    k = getattr(k, 'func', k)  # a panel kernel comes with its budget bound
    asm = k.inspect_asm(k.signatures[0])
    print(default_target(), k.__name__, "zmm" if re.search(r"%zmm", asm) else "no zmm",
          "ymm" if "%ymm" in asm else "no ymm")
"""


def run_emulated(argv, env, checks, name):
    """The command line of an emulation script, ``[--check] [--] command ...``: with
    ``--check``, each ``(label, environment, code)`` of ``checks`` runs first as ``python -c
    code`` in a fresh Numba cache (``inspect_asm`` needs a fresh compile: Numba keeps no asm of
    code loaded from a cache); then ``command`` runs in ``env`` and its exit status is ours."""
    if argv[:1] == ["--check"]:
        for label, check_env, code in checks:
            with tempfile.TemporaryDirectory(prefix="numba_emulate_check") as fresh:
                if label:
                    print(f"[{label}]", flush=True)
                run_env = dict(check_env, NUMBA_CACHE_DIR=fresh)
                subprocess.run([sys.executable, "-c", code], env=run_env, check=True)
        argv = argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if argv:
        try:
            sys.exit(subprocess.run(argv, env=env).returncode)
        except FileNotFoundError:
            sys.exit(f"{name}: no such command: {argv[0]}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: emulate_avx2.py [--check] [--] command ...  (runs command with Haswell codegen)"
        )
        return
    env = avx2_environment()
    run_emulated(argv, env, [("", env, CHECK)], "emulate_avx2.py")


if __name__ == "__main__":
    main()
