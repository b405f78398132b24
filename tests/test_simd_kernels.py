"""Explicit-SIMD block products (``rmt/kernels/simd.py``) against the obvious numpy product.

Every kernel for widths ``m`` whose blocks fill its lane vectors, numbers of rows that leave
remainders after the steps of 16, 12, 8, 6 and 5 rows, ``d`` below and above one lane vector,
strided and Fortran-ordered ``X``; results must not depend on the number of threads; and the
dispatch (``rmt/kernels/dispatch.py``) sends each block to the kernel of its table row.  The
panel kernels with small panel budgets, so that every shape has several panels, blocks of
``d`` with a remainder and rows left over after the panels.

On a CPU without AVX-512 the tests of the ``<8 x double>`` kernels (LLVM splits each vector in
two there) are ``slow``: ``make test-all`` runs them, the CI suite tests the kernels this CPU
dispatches.  Every path runs in CI on a CPU that dispatches it.
"""

import functools

import numpy as np
import pytest

from rmt.kernels import dispatch
from rmt.kernels._generated.hvp_small import KERNELS as SMALL
from rmt.kernels._generated.hvp_small import PIPELINED
from rmt.kernels.dispatch import (
    avx2_panel_bytes,
    default_target,
    hvp_kernel,
    panel_bytes,
    simd_target,
)
from rmt.kernels.hessian import hvp_fused
from rmt.kernels.simd import (
    panel4_c32,
    panel_w4,
    simd4_c4,
    simd4_c8,
    simd4_c16,
    simd4_c24,
    simd_w1,
    simd_w1_pipe,
    simd_w2,
    simd_w3,
)

SIMD_TARGET = default_target()
WIDE_VECTORS = SIMD_TARGET == "avx512"
#: the AVX-512 kernels by lane-vector count ``W`` (``8 W`` columns; 32 on panels)
KERNELS = {
    1: simd_w1_pipe,
    2: simd_w2,
    3: simd_w3,
    4: functools.partial(panel_w4, panel_bytes=1 << 20),
}
#: the AVX2 kernels by column count
KERNELS_AVX2 = {
    4: simd4_c4,
    8: simd4_c8,
    16: simd4_c16,
    24: simd4_c24,
    32: functools.partial(panel4_c32, panel_bytes=1 << 20),
}


def kernel_name(kernel):
    """The name of a kernel, or of the kernel under a ``functools.partial``."""
    return getattr(kernel, "func", kernel).__name__


from .conftest import ALL_THREADS, numba_threads
from .test_hvp_kernels import assert_close, numpy_product, random_problem

#: (m, b) with b*m = 8, 16, 24, 32: one case per kernel and width
CASES = [(1, 8), (2, 4), (4, 2), (8, 1), (4, 4), (2, 8), (3, 8), (6, 4), (4, 8), (8, 4)]
N_ROWS = 16 * 6 + 13  # 109: remainders after 16, 8 and 6 rows per step
#: the marks of a test of the AVX-512 kernels: ``slow`` where this CPU does not dispatch them
#: (a compile of 10-15 s each on a fresh clone for a path the CPU never takes)
AVX512_MARKS = () if WIDE_VECTORS else (pytest.mark.slow,)


def avx512_only(test):
    """``test`` with :data:`AVX512_MARKS`."""
    for mark in AVX512_MARKS:
        test = mark(test)
    return test


@avx512_only
@pytest.mark.parametrize("m, b", CASES)
@pytest.mark.parametrize("n_chunks", [1, 3, 8])
def test_simd_kernels_match_numpy(m, b, n_chunks, rng):
    X, D, Vt = random_problem(m, b, rng, n=N_ROWS, d=29)
    assert_close(KERNELS[b * m // 8](X, D, Vt, n_chunks), numpy_product(X, D, Vt))


@avx512_only
@pytest.mark.parametrize("n", [1, 5, 11, 12, 13, 24, N_ROWS])
def test_two_loop_and_pipelined_kernels_match_numpy(n, rng):
    """The two-loop ``simd_w1`` (float32 rows take it) and the pipelined ``simd_w1_pipe``, for
    row counts around one and two steps of the pipeline (12 rows) and every split of the 8
    columns into vectors."""
    for m in (1, 2, 4, 8):
        X, D, Vt = random_problem(m, 8 // m, rng, n=n, d=29)
        ref = numpy_product(X, D, Vt)
        for k in (simd_w1, simd_w1_pipe):
            for n_chunks in (1, 3):
                assert_close(k(X, D, Vt, n_chunks), ref)


@pytest.mark.parametrize("n", [1, 5, 7, 8, 9, 24, N_ROWS])
def test_4_lane_kernel_matches_numpy(n, rng):
    """``simd4_c4`` (the 4 columns in one ``<4 x double>``, 8 rows per step) for row counts
    around one step, every split of the columns."""
    for m in (1, 2, 4):
        X, D, Vt = random_problem(m, 4 // m, rng, n=n, d=29)
        for n_chunks in (1, 3):
            assert_close(simd4_c4(X, D, Vt, n_chunks), numpy_product(X, D, Vt))


#: the ``<4 x double>`` (AVX2) kernels: every column count, with one or two column groups
AVX2_CASES = [
    (4, 1),
    (2, 2),
    (1, 4),
    (1, 8),
    (4, 2),
    (2, 8),
    (4, 4),
    (3, 8),
    (4, 6),
    (8, 4),
    (4, 8),
]


@pytest.mark.parametrize("m, b", AVX2_CASES)
@pytest.mark.parametrize("n_chunks", [1, 3])
def test_avx2_kernels_match_numpy(m, b, n_chunks, rng):
    """Runs on any x86 CPU with AVX2 (an AVX-512 one too): remainders after 8, 5 and 3 rows."""
    X, D, Vt = random_problem(m, b, rng, n=N_ROWS, d=29)
    assert_close(KERNELS_AVX2[b * m](X, D, Vt, n_chunks), numpy_product(X, D, Vt))


@pytest.mark.parametrize("n, d", [(1, 3), (5, 1), (40, 7), (33, 64)])
def test_avx2_kernels_small_shapes_and_float32(n, d, rng):
    """Float64 rows through the avx2 kernels, float32 rows through the kernels avx2
    dispatches for them (``hvp_m4`` for 4 columns)."""
    for cols in (4, 8, 32):
        X, D, Vt = random_problem(4, cols // 4, rng, n=n, d=d)
        assert_close(KERNELS_AVX2[cols](X, D, Vt, 4), numpy_product(X, D, Vt))
        X32 = X.astype(np.float32)
        kernel = hvp_kernel(4, cols, "avx2", dtype=np.float32)
        assert_close(kernel(X32, D, Vt, 4), numpy_product(X32.astype(float), D, Vt))


@avx512_only
@pytest.mark.parametrize("n, d", [(1, 3), (2, 8), (5, 1), (40, 7), (33, 64)])
def test_simd_kernels_small_shapes(n, d, rng):
    """Fewer rows than chunks or than one step, ``d`` below, at and above one lane vector."""
    for m, b in [(4, 2), (4, 4), (4, 8)]:
        X, D, Vt = random_problem(m, b, rng, n=n, d=d)
        assert_close(KERNELS[b * m // 8](X, D, Vt, 4), numpy_product(X, D, Vt))


@pytest.mark.parametrize("target", [pytest.param("avx512", marks=AVX512_MARKS), "avx2"])
def test_simd_kernels_no_rows(target, rng):
    X, D, Vt = random_problem(4, 2, rng, n=0, d=11)
    out = hvp_kernel(4, 8, target)(X, D, Vt, 8)
    assert out.shape == Vt.shape and not out.any()


#: Fortran order is a specialisation (and a compile) of its own: with the slow tests
LAYOUTS = ["strided", pytest.param("fortran", marks=pytest.mark.slow)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_simd_kernels_any_layout_of_x(layout, rng):
    """The explicit-SIMD kernels this CPU dispatches for a strided ``X`` (blocks of 2 and 4
    vectors of m = 4) read it through its strides (the prefetch walk only assumes rows)."""
    if SIMD_TARGET == "portable":
        pytest.skip("the portable path dispatches no explicit-SIMD kernel")
    X, D, _ = random_problem(4, 2, rng, n=N_ROWS, d=37)
    X = np.repeat(X, 2, axis=1)[:, ::2] if layout == "strided" else np.asfortranarray(X)
    for b in (2, 4):
        kernel = hvp_kernel(4, 4 * b)
        Vt = rng.standard_normal((4 * b, X.shape[1]))
        ref = numpy_product(np.ascontiguousarray(X), D, Vt)
        assert_close(kernel(X, D, Vt, 3), ref)


@pytest.mark.slow
def test_strided_x_on_the_avx2_path(rng):
    """The ``avx2`` kernel of 4 columns reads a Fortran-ordered ``X`` through its strides (a
    compile of its own for that layout, hence slow)."""
    X, D, Vt = random_problem(4, 1, rng, n=N_ROWS, d=29)
    kernel = hvp_kernel(4, 4, "avx2")
    assert_close(kernel(np.asfortranarray(X), D, Vt, 3), numpy_product(X, D, Vt))


THREAD_KERNELS = [
    pytest.param(KERNELS[1], 4, 2, id="w1", marks=AVX512_MARKS),
    pytest.param(simd4_c4, 2, 2, id="c4"),
]


@pytest.mark.parametrize("kernel, m, b", THREAD_KERNELS)
def test_simd_kernels_do_not_depend_on_thread_count(kernel, m, b, rng):
    """Fixed row chunks summed in order: bit-identical on 1 and on all threads."""
    X, D, Vt = random_problem(m, b, rng, n=N_ROWS, d=29)
    with numba_threads(1):
        one = kernel(X, D, Vt, 8)
    with numba_threads(ALL_THREADS):
        np.testing.assert_array_equal(kernel(X, D, Vt, 8), one)


#: (n, d, panel steps): several panels per chunk, ``d`` below one block of 64 columns, at it and
#: with a remainder; rows left after the panels and after the steps of 6 and 5 rows
PANEL_SHAPES = [(109, 29, 2), (109, 150, 3), (203, 64, 5), (37, 301, 1), (5, 3, 4), (0, 11, 2)]


PANEL_PATHS = [
    pytest.param(panel_w4, 6, id="w4", marks=AVX512_MARKS),
    pytest.param(panel4_c32, 5, id="c32"),
]


def _panel_problem(m, n, d, rows, steps, rng):
    X, D, Vt = random_problem(m, 32 // m, rng, n=n, d=d)
    return X, D, Vt, 8 * max(d, 1) * rows * steps


@pytest.mark.parametrize("kernel, rows", PANEL_PATHS)
@pytest.mark.parametrize("n, d, steps", PANEL_SHAPES)
def test_panel_kernels_match_numpy(kernel, rows, n, d, steps, rng):
    """1 and 3 chunks, ``m = 4`` and 8."""
    for m in (4, 8):
        X, D, Vt, budget = _panel_problem(m, n, d, rows, steps, rng)
        ref = numpy_product(X, D, Vt)
        for n_chunks in (1, 3):
            assert_close(kernel(X, D, Vt, n_chunks, budget), ref)


#: each float32 (or Fortran-order) specialisation is a 15-20 s compile on a fresh clone: the
#: float32 path of the panel kernel this CPU dispatches in CI, the other with the slow tests
FLOAT32_PANEL = [
    pytest.param(panel_w4, 6, id="w4", marks=pytest.mark.ci if WIDE_VECTORS else ()),
    pytest.param(panel4_c32, 5, id="c32", marks=() if WIDE_VECTORS else pytest.mark.ci),
]


@pytest.mark.slow
@pytest.mark.parametrize("kernel, rows", FLOAT32_PANEL)
def test_panel_kernels_widen_float32_rows(kernel, rows, rng):
    for n, d, steps in PANEL_SHAPES:
        X, D, Vt, budget = _panel_problem(4, n, d, rows, steps, rng)
        X32 = X.astype(np.float32)
        assert_close(kernel(X32, D, Vt, 3, budget), numpy_product(X32.astype(float), D, Vt))


@pytest.mark.parametrize("kernel, rows", PANEL_PATHS)
def test_panel_kernel_does_not_depend_on_thread_count(kernel, rows, rng):
    X, D, Vt, budget = _panel_problem(4, N_ROWS, 150, rows, 3, rng)
    with numba_threads(1):
        one = kernel(X, D, Vt, 8, budget)
    with numba_threads(ALL_THREADS):
        np.testing.assert_array_equal(kernel(X, D, Vt, 8, budget), one)


@pytest.mark.slow
def test_panel_kernel_any_layout_and_machine_budget(rng):
    X, D, Vt, budget = _panel_problem(4, N_ROWS, 150, 6, 3, rng)
    assert_close(panel_w4(np.asfortranarray(X), D, Vt, 3, budget), numpy_product(X, D, Vt))
    budget = panel_bytes("panel_w4")  # one panel per chunk
    assert_close(panel_w4(X, D, Vt, 3, budget), numpy_product(X, D, Vt))


def test_panel_kernels_take_every_block_of_32_columns():
    """32 columns go to the panel kernel of the path, with this machine's budget bound."""
    for target, kernel in (("avx512", panel_w4), ("avx2", panel4_c32)):
        for m in (4, 8):
            got = hvp_kernel(m, 32, target)
            assert got.func is kernel
            assert got.keywords == {"panel_bytes": panel_bytes(kernel.__name__)}
    assert hvp_kernel(4, 32, "portable") is SMALL[4]
    assert panel_bytes("panel_w4") > 0


def test_avx2_panel_budget():
    """2 MiB while the panels of all threads fit in half of the L3, less where they do not,
    never less than the L2 panel."""
    mib = 1 << 20
    assert avx2_panel_bytes(358_400, 32 * mib, 2) == 2 * mib  # 8 MiB a thread
    assert avx2_panel_bytes(358_400, 16 * mib, 16) == 512 * 1024  # 16 threads share 16 MiB
    assert avx2_panel_bytes(734_003, 8 * mib, 32) == 734_003  # never below the L2 panel
    assert avx2_panel_bytes(358_400, 32 * mib, 0) == 2 * mib  # a thread count of 0 counts as 1
    l2_panel, l3_panel = panel_bytes("panel_w4"), panel_bytes("panel4_c32")
    assert l2_panel <= l3_panel <= max(l2_panel, 2 * mib)


def test_dispatch_by_block_columns():
    """Whole lane vectors (8, 16, 24, 32 columns) go to SIMD on avx512; others keep their
    kernels."""
    if not WIDE_VECTORS:
        pytest.skip("no AVX-512 path in this process: its dispatch is tested with target=")
    for columns, w in [(8, 1), (16, 2), (24, 3), (32, 4)]:
        m = 4 if columns % 4 == 0 else 2
        assert kernel_name(hvp_kernel(m, columns)) == kernel_name(KERNELS[w])
    assert hvp_kernel(4, 12) is SMALL[4]  # 3 vectors of m = 4: padding would not pay
    assert hvp_kernel(4) is SMALL[4]  # one vector of m = 4: the two-loop kernel
    assert hvp_kernel(2) is PIPELINED[2]  # one vector of m = 2: the pipelined kernel
    assert hvp_kernel(2, 4) is SMALL[2]  # two vectors of m = 2: the unrolled kernel
    assert hvp_kernel(8, 40) is hvp_fused  # 5 vectors of m = 8: too wide for registers
    assert hvp_kernel(8) is KERNELS[1]  # one vector of m = 8 fills one lane vector


@pytest.mark.parametrize("target", ["avx512", "avx2", "portable"])
def test_dispatch_of_every_path(target):
    """``hvp_kernel(m, columns, target)``: each path's rows of ``dispatch.TABLE``."""
    for columns, w in [(8, 1), (16, 2), (24, 3), (32, 4)]:
        m = 4 if columns % 4 == 0 else 2
        want = {"avx512": KERNELS[w], "avx2": KERNELS_AVX2[columns]}.get(target, SMALL[m])
        assert kernel_name(hvp_kernel(m, columns, target)) == kernel_name(want)
    for m in (1, 2, 4):  # 4 columns: the 4-lane kernel on avx2, the unrolled ones elsewhere
        want = simd4_c4 if target == "avx2" else SMALL[m]
        assert hvp_kernel(m, 4, target) is want
    for m in (1, 2, 3):  # one vector: pipelined where its path has a row for it
        row = dispatch.TABLE.get(("hvp", target, f"1 vector, m = {m}"))
        want = PIPELINED[m] if row is not None else SMALL[m]
        assert hvp_kernel(m, None, target) is want and hvp_kernel(m, m, target) is want
    assert hvp_kernel(4, 12, target) is SMALL[4] and hvp_kernel(2, 6, target) is SMALL[2]
    assert hvp_kernel(8, 40, target) is hvp_fused
    with pytest.raises(ValueError, match="target must be one of"):
        hvp_kernel(4, 8, "sse2")


def test_every_table_row_names_a_kernel():
    """Every kernel named in ``dispatch.TABLE`` exists, with a reason."""
    for equation, path, situation, kernel, reason in dispatch.table_rows():
        assert path in (*dispatch.TARGETS, "any") and reason
        if kernel is not None:
            assert callable(dispatch._resolve(kernel, 4 if "{m}" in kernel else 1))


@pytest.mark.parametrize(
    "env, want",
    [
        ({"RMT_SIMD": "avx2"}, "avx2"),
        ({"RMT_SIMD": "portable", "NUMBA_CPU_FEATURES": "+avx512f"}, "portable"),
        ({"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+avx2,+fma,-avx512f"}, "avx2"),
        ({"NUMBA_CPU_NAME": "x", "NUMBA_CPU_FEATURES": "+avx2,+fma,+avx512f"}, "avx512"),
        ({"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": "+sse4.2,-avx2"}, "portable"),
        ({"NUMBA_CPU_NAME": "haswell"}, "avx2"),
        ({"NUMBA_CPU_NAME": "skylake-avx512"}, "avx512"),
    ],
)
def test_simd_target_follows_the_compile_features(env, want, monkeypatch):
    """The path comes from what Numba compiles for (its env variables), or ``RMT_SIMD``."""
    for k in ("RMT_SIMD", "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert simd_target() == want
    monkeypatch.setenv("RMT_SIMD", "neon")
    with pytest.raises(ValueError, match="RMT_SIMD must be one of"):
        simd_target()


def test_no_simd_dispatch_on_the_portable_path(monkeypatch):
    """On the portable path (``RMT_SIMD=portable``, or no AVX2) every block keeps the fused
    kernels; the path is read at the first choice, not at import."""
    monkeypatch.setenv("RMT_SIMD", "portable")
    dispatch.default_target.cache_clear()
    try:
        for columns in (8, 16, 24, 32):
            assert hvp_kernel(4, columns) is SMALL[4]
        assert hvp_kernel(8) is hvp_fused
    finally:
        monkeypatch.undo()
        dispatch.default_target.cache_clear()


def test_float32_rows_take_the_two_loop_form_of_the_pipelined_kernels():
    """For float32 ``X`` the dispatch takes the float32 rows of the table: the two-loop
    ``simd_w1`` for 8 columns on avx512, the unrolled kernel for 4 columns on avx2; and
    ``fused_product`` passes the dtype."""
    from rmt.kernels.hessian import fused_product

    assert hvp_kernel(4, 8, "avx512") is simd_w1_pipe
    assert hvp_kernel(4, 8, "avx512", dtype=np.float32) is simd_w1
    assert hvp_kernel(4, 4, "avx2") is simd4_c4
    assert hvp_kernel(4, 4, "avx2", dtype=np.float32) is SMALL[4]
    assert hvp_kernel(2, 4, "avx2", dtype=np.float32) is SMALL[2]
    assert hvp_kernel(4, 8, "avx2", dtype=np.float32) is KERNELS_AVX2[8]  # not pipelined: kept
    assert hvp_kernel(4, 16, "avx512", dtype=np.float32) is KERNELS[2]  # not pipelined: kept
    rng = np.random.default_rng(3)
    X, D, Vt = random_problem(4, 2, rng, n=50, d=29)
    X32 = X.astype(np.float32)
    assert_close(fused_product(X32, D, Vt, 3), numpy_product(X32.astype(np.float64), D, Vt))
