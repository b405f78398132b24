"""Issue 15 on ARM, where no machine was available: the two tools behind the argument.

* ``benchmarks/neon_codegen.py`` compiles the ``<4 x double>`` micro-kernels of the ``avx2``
  path for AArch64 and counts their loops. Reference: the kernels' arithmetic. A step of ``R``
  rows and ``W`` lane vectors of 4 doubles does ``2 R W`` NEON multiply-adds (2 doubles each)
  per entry of ``d`` (per pair of entries for the pair kernels), so every loop iteration holds
  a whole multiple of it, and AArch64's 32 registers hold what AVX2's 16 ``ymm`` hold: no spill.
* ``benchmarks/emulate_128.py`` compiles the portable path for 128-bit vectors (the width of
  NEON): the product's floating-point vector instructions are then all on ``xmm`` registers,
  and it still matches numpy's product on random data.
"""

from __future__ import annotations

import ast
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

pytest.importorskip("llvmlite")


def _aarch64_available() -> bool:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    try:
        llvm.Target.from_triple("aarch64-unknown-linux-gnu")
    except RuntimeError:
        return False
    return True


@pytest.mark.skipif(not _aarch64_available(), reason="this llvmlite has no AArch64 back end")
def test_avx2_micro_kernels_compile_for_neon_without_spills():
    out = subprocess.run(
        [sys.executable, str(BENCH / "neon_codegen.py"), "--cpu", "neoverse-n1", "apple-m1"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=600,
    ).stdout  # fmt: skip
    sys.path.insert(0, str(BENCH))
    try:
        from neon_codegen import MICRO
    finally:
        sys.path.remove(str(BENCH))
    rows = {}
    for line in out.splitlines():
        label = next((k for k in MICRO if line.strip().startswith(k + " ")), None)
        if label is not None:
            parts = line.strip()[len(label) :].split()
            fma, fp, ld, st, spill = map(int, parts[1:6])
            rows[label, parts[0]] = (fma, fp, ld, st, spill, float(parts[6]))
    assert len(rows) == 2 * len(MICRO), out
    for (label, cpu), (fma, fp, ld, st, spill, cycles) in rows.items():
        _, r, w, _ = MICRO[label]
        per_entry = 2 * r * w  # NEON multiply-adds of one entry of d (or one pair of entries)
        assert fma > 0 and fma % per_entry == 0, (label, cpu, fma, per_entry)
        assert spill == 0, (label, cpu, spill)
        assert fp >= fma
        # the dots load each row entry (a broadcast) and the lane vectors of one row of Vtt
        if label.startswith("dots"):
            entries = fma // per_entry
            assert ld == entries * (r + 2 * w), (label, ld, entries)
            assert st == 0
        else:  # the updates read and write the lane vectors of one row of acc
            entries = fma // per_entry
            assert st == entries * 2 * w, (label, st, entries)
        f = {"neoverse-n1": 2, "apple-m1": 4}[cpu]
        assert cycles >= fp / f


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="the 128-bit proxy compiles x86 code (Haswell codegen); this CPU is not x86",
)
def test_v128_codegen_puts_the_portable_product_on_xmm_registers():
    out = subprocess.run(
        [sys.executable, str(BENCH / "emulate_128.py"), "--check"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=600,
    ).stdout  # fmt: skip
    errors = [float(e) for e in re.findall(r"max relative error against numpy: (\S+)", out)]
    assert len(errors) == 2 and max(errors) < 1e-12, out  # correct at NEON's width too
    counts = re.findall(r"FP vector ops by register: (\{[^}]*\})", out)
    assert len(counts) == 2, out
    v128, native = (ast.literal_eval(c) for c in counts)
    assert set(v128) == {"xmm"} and v128["xmm"] > 0
    # this machine's own codegen is wider (AVX2 or AVX-512)
    assert native.get("ymm", 0) + native.get("zmm", 0) > 0
