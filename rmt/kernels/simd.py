"""Block Hessian products with explicit SIMD: ``<8 x double>`` micro-kernels in LLVM IR.

The fused kernels of ``hessian.py``/``_generated/hvp_small.py`` leave the vectorisation to LLVM, which
vectorises along ``d`` (one accumulator per row and column) and runs out of registers once a
block has more than a few columns.  For blocks of ``C = b*m >= 8`` columns this module keeps
the columns in the vector lanes instead, with the loop over ``d`` scalar:

* ``dot_rows``: ``U[q] = sum_t X[i+q, t] * Vtt[t]`` for ``R`` rows, each ``Vtt[t]`` (``8 W``
  columns, ``W`` vectors of 8 lanes) loaded once and broadcast-multiplied by ``R`` entries of
  ``X``: ``R W`` accumulators in registers, no horizontal sums.
* ``axpy_rows``: ``acc[t] += sum_q X[i+q, t] * Rr[q]``, the coefficients ``Rr[q]`` held in
  registers, two partial sums per lane vector (shorter dependency chains), ``X`` read from
  cache (``dot_rows`` just streamed the same rows).

``dot_rows`` prefetches each of its ``R`` rows ``PREFETCH_LINES`` cache lines ahead of its
reads, into L1 (``R / 8`` prefetches per step: every row advances one line per 8 steps).  The
hardware prefetcher alone left DRAM latency exposed: rows already in L3 ran at the compute
floor, rows from memory well above it; the prefetch closes most of that gap (the figures are in
benchmarks/RESULTS.md).  ``axpy_rows`` reads the same rows again from cache.  ``R`` and ``W``
are compile-time constants (literal arguments of the intrinsics; one compiled wrapper per
``W``), so every width gets its own unrolled code.  The scratch arrays start on 64-byte boundaries, so that a row of
8 lanes is one cache line.  The row chunks are those of ``hvp_fused`` (fixed ``n_chunks``,
summed in order), so results do not depend on the number of threads.  Works with any strides
of ``X``; on machines without AVX-512 LLVM splits each ``<8 x double>`` in two.

The lanes ``L`` are a compile-time parameter too: ``KERNELS`` (``simd_w1..4``) use
``<8 x double>`` for AVX-512's 32 registers (8 columns by the pipelined ``simd_w1_pipe``);
``KERNELS_AVX2`` (``pair4_c4``, ``simd4_c8..c24``, ``panel4_c32``) use
``<4 x double>`` with ``R W <= 12`` accumulators for AVX2's 16 registers, the blocks of 16
and 24 columns in two and three column groups of ``5 rows x 2`` lane vectors that read the
same staged rows (``G``: still one pass over ``X``).  :func:`simd_target` picks the path
(``RMT_SIMD``, else the features Numba compiles for, so that
``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` are honoured).

Blocks of 32 columns on long rows have a second form, :func:`_panel_product` (``panel_w4``,
``panel4_c32``): streaming whole rows, every step of ``R`` rows reads all of ``Vtt`` and reads
and writes all of the accumulator (``d x 32`` doubles each, 2 MB at ``d = 4000``: beyond L2),
so the kernel moves more bytes through the caches than it does FMAs.  The panel kernels take
``P`` rows at a time (a panel that fits in L2, :data:`PANEL_BYTES`) through ``d`` in blocks of
``TB`` columns that fit in L1, twice (dots, then updates): ``Vtt`` and the accumulator cross
the caches once per panel.  :func:`panels_pay` picks ``panel_w4`` by ``d``
(``hvp_kernel(..., d=)``).  The ``avx2`` form, ``panel4_c32``, takes four groups of
``2 x <4 x double>`` with 5 rows per step and a panel in L3 (:data:`PANEL_BYTES_AVX2`), and
takes every block of 32 columns there.

Blocks of at most 4 columns on ``avx2`` go to the pair form, :func:`_pair_product`
(``pair4_c4``): one ``<4 x double>`` holds two columns at two consecutive entries of ``d``,
so a 128-bit broadcast of ``(x_t, x_{t+1})`` feeds two FMAs where the 4-lane layout of
``simd4_c4`` spends a broadcast on each (:func:`dot_rows_pairs`, :func:`axpy_rows_pairs`).

The pipelined form, :func:`_pipelined_sums` (``simd_w1_pipe``), joins the
two loops of a step: :func:`dot_axpy_rows` forms the dots of the next ``R`` rows and adds the
updates of the ``R`` rows before, whose coefficients the previous loop finished, so the stream of
``X`` from memory overlaps the updates (``R`` dot accumulators and ``R`` coefficient vectors in
registers: 12 rows for 8 columns on AVX-512).  Its 4-lane form for AVX2 (4 rows of 4 columns)
won under AVX2 codegen on an AVX-512 Xeon and lost on a real Zen 3 (32-39 ms against 28-29 for
``simd4_c4``, 2026-12-02), and was removed with the pair kernel that replaced both.

``X`` may be float32 (float32 storage of ``X``): each step of ``R`` rows is then first widened
into a float64 scratch of ``R x d`` (one vectorised pass: ``<8 x float>`` loads, ``fpext`` to
``<8 x double>``; the scratch stays in L2), which the two micro-kernels read, so every product
and sum is float64 and only the bytes read from memory halve.  (Widening in the micro-kernels,
one scalar ``fpext`` per broadcast entry, measured 1.2x slower for ``W = 1``: a conversion per
FMA.)
"""

from __future__ import annotations

import functools
import os

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.core.extending import intrinsic, overload

from rmt.kernels._generated.descent_small import row_coefficients

LANES = 8
#: doubles in a cache line (the prefetch steps in lines, not in lane vectors)
LINE = 8
#: how far ahead of its reads ``dot_rows`` prefetches each row, in cache lines (4-5 measured
#: best: 2 and 8 lose the gain); into L1 (locality 3: prefetches into L2 gained half as much)
PREFETCH_LINES = 4

_F64 = ir.DoubleType()
_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

#: the SIMD paths: ``avx512`` (``<8 x double>`` block kernels, 32 registers), ``avx2``
#: (``<4 x double>`` block kernels and unrolled kernels sized for 16 registers), ``portable``
#: (no explicit SIMD: the plain Numba kernels, sized for 16 registers)
TARGETS = ("avx512", "avx2", "portable")


def _compile_features() -> tuple[str, dict]:
    """``(cpu name, {feature: on})`` that Numba compiles for: ``NUMBA_CPU_NAME`` and
    ``NUMBA_CPU_FEATURES`` when set (Numba then ignores the host), else the host's."""
    from llvmlite import binding

    name = os.environ.get("NUMBA_CPU_NAME", "").strip()
    spec = os.environ.get("NUMBA_CPU_FEATURES", "").strip()
    if spec:
        flags = {f[1:]: f[0] == "+" for f in spec.split(",") if f[:1] in "+-" and len(f) > 1}
        return name or "generic", flags
    if name and name != "host":  # a named CPU without a feature list: LLVM's table for it
        return name, {}
    return binding.get_host_cpu_name(), dict(binding.get_host_cpu_features())


def simd_target() -> str:
    """The SIMD path of this process: ``RMT_SIMD`` (``avx512`` | ``avx2`` | ``portable``) when
    set, else from the features Numba compiles for (:func:`_compile_features`): ``avx512``
    with ``avx512f``, ``avx2`` with ``avx2`` and ``fma``, else ``portable``.  A named
    ``NUMBA_CPU_NAME`` without ``NUMBA_CPU_FEATURES`` counts as AVX-512 only for the
    Skylake-AVX512 and later server/client names LLVM knows to have it."""
    forced = os.environ.get("RMT_SIMD", "").strip().lower()
    if forced:
        if forced not in TARGETS:
            raise ValueError(f"RMT_SIMD must be one of {', '.join(TARGETS)}; got {forced!r}")
        return forced
    try:
        name, flags = _compile_features()
    except Exception:  # pragma: no cover - no feature query on this platform
        return "portable"
    if not flags:
        wide = ("skylake-avx512", "cascadelake", "cooperlake", "icelake", "tigerlake",
                "sapphirerapids", "graniterapids", "emeraldrapids", "znver4", "znver5")  # fmt: skip
        avx2 = ("haswell", "broadwell", "skylake", "znver", "alderlake", "raptorlake")
        name = name.lower()
        return (
            "avx512" if name.startswith(wide) else "avx2" if name.startswith(avx2) else "portable"
        )
    if flags.get("avx512f"):
        return "avx512"
    return "avx2" if flags.get("avx2") and flags.get("fma") else "portable"


def _wide_vectors() -> bool:
    """Whether the ``<8 x double>`` kernels are dispatched: :func:`simd_target` is
    ``avx512`` (512-bit vectors and 32 registers, which their ``R W`` accumulators assume;
    elsewhere LLVM would split every ``<8 x double>`` and spill)."""
    return simd_target() == "avx512"


#: the SIMD path of this process (:func:`simd_target`, read once at import)
SIMD_TARGET = simd_target()
#: whether :func:`simd_kernel` hands out the ``<8 x double>`` kernels in this process
WIDE_VECTORS = SIMD_TARGET == "avx512"


def resolve_target(target: str | None) -> str:
    """``target``, or :data:`SIMD_TARGET` for ``None``; ValueError for anything not in
    :data:`TARGETS` (the ``target`` argument of the dispatchers)."""
    target = SIMD_TARGET if target is None else target
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    return target


def simd_kernel(columns: int, target: str | None = None, d: int | None = None):
    """The kernel for a block of ``columns`` columns, or ``None`` when the fused kernels win.

    With ``d`` given, 32 columns on ``avx512`` go to the panel kernel of
    :data:`PANEL_KERNELS` where :func:`panels_pay` (``d = 4000`` on a 2 MB L2: about 1.3-1.6x
    the streaming ``simd_w4``).  On ``avx2`` 32 columns always go to the panel kernel of
    :data:`KERNELS_AVX2` (``panel4_c32``: 1.26-1.83x faster than the unrolled ``hvp_m4`` on a
    Zen 3, in seven runs).

    ``target`` defaults to :data:`SIMD_TARGET`.  ``avx512``: whole ``<8 x double>`` lane
    vectors, ``columns = 8 W`` with ``W <= 4``.  Padding does not pay (a block of 3 or 5
    vectors of ``m = 4`` is as fast in ``hvp_m4``), nor do fewer than 8 columns; above 32 the
    ``R W`` accumulators no longer fit in the 32 vector registers.  ``avx2``: the
    ``<4 x double>`` kernels of :data:`KERNELS_AVX2` (at most 12 accumulators for 16
    registers) for the column counts of :data:`AVX2_DISPATCH`.  ``portable``: always ``None`` (no explicit SIMD); the
    kernels themselves are correct everywhere.
    """
    target = SIMD_TARGET if target is None else target
    panel = PANEL_KERNELS.get(target, {}).get(columns)
    if panel is not None and d is not None and panels_pay(d, columns, panel[1]):
        return panel[0]
    if target == "avx512":
        return KERNELS.get(columns // LANES) if columns % LANES == 0 else None
    if target == "avx2":
        return KERNELS_AVX2.get(columns) if columns in AVX2_DISPATCH else None
    return None


def _vec(lanes):
    """``<lanes x double>``."""
    return ir.VectorType(_F64, lanes)


def _fma(builder, lanes):
    vec = _vec(lanes)
    fnty = ir.FunctionType(vec, [vec, vec, vec])
    return cgutils.get_or_insert_function(builder.module, fnty, f"llvm.fma.v{lanes}f64")


def _splat(builder, x, lanes):
    vec = builder.insert_element(ir.Constant(_vec(lanes), ir.Undefined), x, _I32(0))
    mask = ir.Constant(ir.VectorType(_I32, lanes), [0] * lanes)
    return builder.shuffle_vector(vec, ir.Constant(_vec(lanes), ir.Undefined), mask)


def _at(builder, base, offset):
    """Byte address ``base + offset`` (an ``i8*``)."""
    if base.type != _I8P:
        base = builder.bitcast(base, _I8P)
    return builder.gep(base, [offset])


def _load(builder, ptr, ty):
    return builder.load(builder.bitcast(ptr, ty.as_pointer()), align=8)


def _store(builder, value, ptr):
    builder.store(value, builder.bitcast(ptr, value.type.as_pointer()), align=8)


def _unpack(context, builder, ty, value):
    """Data pointer, shape and strides (bytes) of a Numba array value."""
    ary = context.make_array(ty)(context, builder, value)
    shape = cgutils.unpack_tuple(builder, ary.shape, ty.ndim)
    strides = cgutils.unpack_tuple(builder, ary.strides, ty.ndim)
    return ary.data, shape, strides


def _row_pointers(builder, data, stride, first, count):
    return [
        _at(builder, data, builder.mul(builder.add(first, _I64(q)), stride)) for q in range(count)
    ]


def _typed(X, i, A, B, R, W, L, codegen_for):
    """Typing shared by the intrinsics ``f(X, i, A, B, R, W, L)``: ``(sig, codegen_for(R, W,
    L))`` with the literal values, or ``None`` (a typing error) unless ``X`` is a 2-D float64
    array, ``A`` and ``B`` 2-D float64 arrays with contiguous rows (C order, or a column slice
    of one: the kernels step rows by their strides), ``R``, ``W`` literal integers >= 1 and
    ``L`` (lanes) a literal 4 or 8."""
    arrays = (X, A, B)
    if not all(
        isinstance(a, types.Array) and a.ndim == 2 and a.dtype == types.float64 for a in arrays
    ):
        return None
    if A.layout not in ("C", "A") or B.layout not in ("C", "A"):
        return None
    if not all(isinstance(v, types.IntegerLiteral) and v.literal_value >= 1 for v in (R, W, L)):
        return None
    if L.literal_value not in (4, 8):
        return None
    sig = types.void(X, i, A, B, R, W, L)
    return sig, codegen_for(R.literal_value, W.literal_value, L.literal_value)


def _loop(builder, d, name):
    """Open ``for t in range(d)`` (``d > 0`` is checked): returns ``(t, preheader, body, exit)``."""
    pre = builder.block
    body = builder.append_basic_block(f"{name}.body")
    done = builder.append_basic_block(f"{name}.done")
    builder.cbranch(builder.icmp_signed(">", d, _I64(0)), body, done)
    builder.position_at_end(body)
    t = builder.phi(_I64)
    t.add_incoming(_I64(0), pre)
    return t, pre, body, done


def _close(builder, t, d, body, done):
    t1 = builder.add(t, _I64(1))
    t.add_incoming(t1, builder.block)
    builder.cbranch(builder.icmp_signed("<", t1, d), body, done)
    builder.position_at_end(done)


def _row_prefetch(builder, row0, xst, t, nr, k=1):
    """Emit, for step ``t`` (``k`` columns a step), prefetches of rows ``q = p (t mod S) + j``
    (``S = 8 / k`` steps a cache line, ``j < p = ceil(nr/S)``) at column ``k t + 8
    PREFETCH_LINES``: every row gets its line ``PREFETCH_LINES`` ahead once per ``S`` steps.
    Past the last row or column they touch the next rows (prefetches never fault)."""
    pfty = ir.FunctionType(ir.VoidType(), [_I8P, _I32, _I32, _I32])
    prefetch = cgutils.get_or_insert_function(builder.module, pfty, "llvm.prefetch.p0i8")
    steps = LINE // k
    per = -(-nr // steps)
    first = builder.mul(builder.and_(t, _I64(steps - 1)), _I64(per))
    ahead = builder.add(builder.mul(t, _I64(k)), _I64(LINE * PREFETCH_LINES))
    column = builder.mul(ahead, xst[1])
    for j in range(per):
        row = builder.mul(builder.add(first, _I64(j)), xst[0])
        addr = _at(builder, row0, builder.add(row, column))
        builder.call(prefetch, [addr, _I32(0), _I32(3), _I32(1)])


def _prologue(context, builder, signature, args, nr, lanes, count=None):
    """Strides of ``X``, ``A`` and ``B`` (data, strides), the trip count of the loop (``d``,
    the columns of ``X``; with ``count = 2`` or ``3`` the rows of ``A`` or ``B``: the pairs of
    the pair kernels), the ``fma`` intrinsic for ``lanes`` and the byte addresses of rows
    ``i .. i+nr-1``."""
    xd, xsh, xst = _unpack(context, builder, signature.args[0], args[0])
    ad, ash, ast = _unpack(context, builder, signature.args[2], args[2])
    bd, bsh, bst = _unpack(context, builder, signature.args[3], args[3])
    rows = _row_pointers(builder, xd, xst[0], args[1], nr)
    trips = {None: xsh[1], 2: ash[0], 3: bsh[0]}[count]
    return xst, (ad, ast), (bd, bst), trips, _fma(builder, lanes), rows


def _step_offset(builder, t, stride, pair):
    """Byte offset in a row of ``X`` of loop step ``t``: column ``t``, or ``2t`` with ``pair``."""
    return builder.mul(t, builder.mul(stride, _I64(2)) if pair else stride)


def _x_entries(builder, row, off, nl, pair):
    """The lane vector of one step's ``X`` entries at byte ``off`` of ``row``: one entry in
    every lane (a 64-bit broadcast), or with ``pair`` the two consecutive entries ``(x_t,
    x_{t+1})`` repeated across the lanes (one 128-bit broadcast, ``vbroadcastf128``)."""
    if not pair:
        return _splat(builder, _load(builder, _at(builder, row, off), _F64), nl)
    two = _load(builder, _at(builder, row, off), _vec(2))
    mask = ir.Constant(ir.VectorType(_I32, nl), [q % 2 for q in range(nl)])
    return builder.shuffle_vector(two, ir.Constant(_vec(2), ir.Undefined), mask)


def _dot_codegen(nr, nw, nl, accumulate, updates=False, pair=False):
    """Code of ``U[q, :LW] (+)= sum_t X[i+q, t] * Vtt[t, :LW]`` with row prefetches: from zero
    (:func:`dot_rows`) or from the current ``U`` (:func:`dot_rows_acc`); with ``updates``, the
    loop also adds ``sum_q Y[j+q, t] Rr[q, :LW]`` to ``acc[t, :LW]`` (:func:`dot_axpy_rows`,
    arguments 4-7: ``Y, j, Rr, acc``).  With ``pair`` the loop runs over the rows of ``Vtt``,
    each the pair of columns ``2t, 2t+1`` (:func:`dot_rows_pairs`)."""
    vty = _vec(nl)

    def codegen(context, builder, signature, args):
        xst, (vd, vst), (ud, ust), d, fma, rows = _prologue(
            context, builder, signature, args, nr, nl, 2 if pair else None
        )

        def slot(base, stride, q, w):  # the address of row q's w-th lane vector
            return _at(builder, base, builder.add(builder.mul(_I64(q), stride), _I64(8 * nl * w)))

        if updates:
            yd, _, yst = _unpack(context, builder, signature.args[4], args[4])
            rd, _, rst = _unpack(context, builder, signature.args[6], args[6])
            acc = _unpack(context, builder, signature.args[7], args[7])[::2]
            olds = _row_pointers(builder, yd, yst[0], args[5], nr)
            coef = [[_load(builder, slot(rd, rst[0], q, w), vty) for w in range(nw)]
                    for q in range(nr)]  # fmt: skip
        if accumulate:
            start = [[_load(builder, slot(ud, ust[0], q, w), vty) for w in range(nw)]
                     for q in range(nr)]  # fmt: skip
        else:
            zero = ir.Constant(vty, [0.0] * nl)
            start = [[zero] * nw for _ in range(nr)]
        t, pre, body, done = _loop(builder, d, "dot")
        accs = [[builder.phi(vty) for _ in range(nw)] for _ in range(nr)]
        for q in range(nr):
            for w in range(nw):
                accs[q][w].add_incoming(start[q][w], pre)
        _row_prefetch(builder, rows[0], xst, t, nr, 2 if pair else 1)
        vrow = _at(builder, vd, builder.mul(t, vst[0]))
        v = [_load(builder, _at(builder, vrow, _I64(8 * nl * w)), vty) for w in range(nw)]
        toff = _step_offset(builder, t, xst[1], pair)
        new = []
        for q in range(nr):
            s = _x_entries(builder, rows[q], toff, nl, pair)
            new.append([builder.call(fma, [s, v[w], accs[q][w]]) for w in range(nw)])
        if updates:
            _axpy_step(builder, fma, acc, t, olds, builder.mul(t, yst[1]), coef, nw, nl)
        for q in range(nr):
            for w in range(nw):
                accs[q][w].add_incoming(new[q][w], body)
        _close(builder, t, d, body, done)
        results = []
        for q in range(nr):  # the phis first: LLVM wants them at the top of the block
            for w in range(nw):
                res = builder.phi(vty)
                res.add_incoming(start[q][w], pre)
                res.add_incoming(new[q][w], body)
                results.append((q, w, res))
        for q, w, res in results:
            _store(builder, res, slot(ud, ust[0], q, w))
        return context.get_dummy_value()

    return codegen


@intrinsic
def dot_rows(typingctx, X, i, Vtt, U, R, W, L):
    """``U[q, :LW] = sum_t X[i+q, t] * Vtt[t, :LW]`` for ``q < R`` (literal ``R``, ``W`` and
    lanes ``L``); prefetches its rows ahead of the reads (:func:`_row_prefetch`)."""
    return _typed(X, i, Vtt, U, R, W, L, functools.partial(_dot_codegen, accumulate=False))


@intrinsic
def dot_rows_acc(typingctx, X, i, Vtt, U, R, W, L):
    """``U[q, :LW] += sum_t X[i+q, t] * Vtt[t, :LW]`` (as :func:`dot_rows`, started from
    ``U``): the dots of one block of ``d`` columns in :func:`_panel_product`."""
    return _typed(X, i, Vtt, U, R, W, L, functools.partial(_dot_codegen, accumulate=True))


def _axpy_step(builder, fma, acc, t, rows, off, coef, nw, nl, pair=False):
    """Emit ``acc[t, :LW] += sum_q rows[q][off] * coef[q]``: the body of one column (with
    ``pair``, of two: :func:`_x_entries`) of the update loop, two partial sums per lane vector
    (shorter dependency chains)."""
    vty = _vec(nl)
    arow = _at(builder, acc[0], builder.mul(t, acc[1][0]))
    part = [[_load(builder, _at(builder, arow, _I64(8 * nl * w)), vty), None] for w in range(nw)]
    for q in range(len(rows)):
        s = _x_entries(builder, rows[q], off, nl, pair)
        for w in range(nw):
            h = q % 2
            if part[w][h] is None:
                part[w][h] = builder.fmul(s, coef[q][w])
            else:
                part[w][h] = builder.call(fma, [s, coef[q][w], part[w][h]])
    for w in range(nw):
        total = part[w][0] if part[w][1] is None else builder.fadd(part[w][0], part[w][1])
        _store(builder, total, _at(builder, arow, _I64(8 * nl * w)))


def _axpy_codegen(nr, nw, nl, pair=False):
    """Code of ``acc[t, :LW] += sum_q X[i+q, t] * Rr[q, :LW]`` (:func:`axpy_rows`; with
    ``pair``, over the rows of ``acc``, each two columns of ``X``: :func:`axpy_rows_pairs`)."""
    vty = _vec(nl)

    def codegen(context, builder, signature, args):
        xst, (rd, rst), (ad, ast), d, fma, rows = _prologue(
            context, builder, signature, args, nr, nl, 3 if pair else None
        )
        coef = [
            [_load(builder, _at(builder, rd, builder.add(builder.mul(_I64(q), rst[0]),
                                                        _I64(8 * nl * w))), vty)
             for w in range(nw)]
            for q in range(nr)
        ]  # fmt: skip
        t, _, body, done = _loop(builder, d, "axpy")
        off = _step_offset(builder, t, xst[1], pair)
        _axpy_step(builder, fma, (ad, ast), t, rows, off, coef, nw, nl, pair)
        _close(builder, t, d, body, done)
        return context.get_dummy_value()

    return codegen


@intrinsic
def axpy_rows(typingctx, X, i, Rr, acc, R, W, L):
    """``acc[t, :LW] += sum_q X[i+q, t] * Rr[q, :LW]`` for ``q < R``, the rows read from cache
    (``dot_rows`` just streamed them)."""
    return _typed(X, i, Rr, acc, R, W, L, _axpy_codegen)


@intrinsic
def dot_axpy_rows(typingctx, X, i, Vtt, U, Y, j, Rr, acc, R, W, L):
    """``U[q, :LW] = sum_t X[i+q, t] Vtt[t, :LW]`` and ``acc[t, :LW] += sum_q Y[j+q, t]
    Rr[q, :LW]`` for ``q < R`` in one loop over ``t``: the dot products of a step and the
    updates of the step before (the pipelined kernels, :func:`_pipelined_sums`)."""
    first = _typed(X, i, Vtt, U, R, W, L, lambda *a: None)
    second = _typed(Y, j, Rr, acc, R, W, L, lambda *a: None)
    if first is None or second is None:
        return None
    sig = types.void(X, i, Vtt, U, Y, j, Rr, acc, R, W, L)
    return sig, _dot_codegen(R.literal_value, W.literal_value, L.literal_value, False, True)


@intrinsic
def dot_rows_pairs(typingctx, X, i, Vtt, U, R, W, L):
    """:func:`dot_rows` on pairs of columns: ``U[q, :LW] = sum_t (x_{2t}, x_{2t+1}, x_{2t},
    ...) * Vtt[t, :LW]`` over the rows ``t`` of ``Vtt``, ``x = X[i+q]`` read two entries at a
    time (one 128-bit broadcast feeds ``W`` FMAs).  The caller keeps ``2 Vtt.shape[0] <=
    X.shape[1]``, the entries of a row of ``X`` contiguous (``X.strides[1] == 8``), and lays
    ``Vtt`` out as :func:`_pair_block`."""
    return _typed(
        X, i, Vtt, U, R, W, L, functools.partial(_dot_codegen, accumulate=False, pair=True)
    )


@intrinsic
def axpy_rows_pairs(typingctx, X, i, Rr, acc, R, W, L):
    """:func:`axpy_rows` on pairs of columns: ``acc[t, :LW] += sum_q (x_{2t}, x_{2t+1}, ...) *
    Rr[q, :LW]`` over the rows ``t`` of ``acc``, ``x = X[i+q]``; with ``Rr[q]`` holding each
    coefficient twice, ``acc[t, 2c + p]`` gathers column ``c`` at entry ``2t + p``.  The
    caller keeps the entries of a row of ``X`` contiguous, as for :func:`dot_rows_pairs`."""
    return _typed(X, i, Rr, acc, R, W, L, functools.partial(_axpy_codegen, pair=True))


#: rows of ``d`` per task when the block is transposed in and the chunks are summed out
REDUCE_ROWS = 512


@njit(cache=True, inline="always")
def _empty64(size):
    """``np.empty(size)`` starting on a 64-byte boundary (Numba aligns to 32): every row of
    8 doubles is then one cache line, never split across two."""
    buf = np.empty(size + LANES)
    skip = ((64 - buf.ctypes.data % 64) % 64) // 8
    return buf[skip : skip + size]


def _staged_rows(X, i, nr, Xs):
    """``(Y, j)`` such that rows ``j .. j+nr-1`` of ``Y`` are rows ``i .. i+nr-1`` of ``X`` in
    float64: ``(X, i)`` itself for a float64 ``X``; for a float32 ``X`` the rows are widened
    into the scratch ``Xs`` (``R x d``, in L2) by one vectorised pass, and ``(Xs, 0)``."""


@overload(_staged_rows, inline="always")
def _staged_rows_impl(X, i, nr, Xs):
    if X.dtype == types.float32:

        def widen(X, i, nr, Xs):
            d = X.shape[1]
            for q in range(nr):
                src = X[i + q]
                dst = Xs[q]
                for t in range(d):
                    dst[t] = src[t]
            return Xs, 0

        return widen
    return lambda X, i, nr, Xs: (X, i)


def _row_scratch(X, R):
    """Scratch for :func:`_staged_rows`: ``R x d`` float64 for a float32 ``X``, else 1 x 1."""


@overload(_row_scratch, inline="always")
def _row_scratch_impl(X, R):
    if X.dtype == types.float32:
        return lambda X, R: _empty64(R * X.shape[1]).reshape((R, X.shape[1]))
    return lambda X, R: _empty64(1).reshape((1, 1))


@njit(cache=True, inline="always")
def _contract(U, D, i, nr, m, C, Rr):
    """``Rr[q, c*m + k] = sum_j U[q, c*m + j] D[i+q, j, k]`` for the ``C // m`` vectors."""
    for q in range(nr):
        Di = D[i + q]
        for c0 in range(0, C, m):
            for k in range(m):
                s = 0.0
                for j in range(m):
                    s += U[q, c0 + j] * Di[j, k]
                Rr[q, c0 + k] = s


def _coefficients(rule, U, i, nr, C, Rr):
    """Row coefficients ``Rr[q]`` of rows ``i .. i+nr-1`` from their dot products ``U[q]``,
    and the sum of their losses.  ``rule`` picks the map at compile time: the curvature blocks
    ``D`` (``n x m x m``) of a Hessian product (:func:`_contract`; no loss: 0.0), or the tuple
    ``(y, a, act_code, loss_code, huber_delta)`` of a gradient step, whose coefficients are
    ``l'_q a_j sigma'(u_qj)`` (``row_coefficients`` of the step kernels; ``C = m``)."""


@overload(_coefficients)
def _coefficients_impl(rule, U, i, nr, C, Rr):
    if isinstance(rule, types.Array):

        def contract(rule, U, i, nr, C, Rr):
            _contract(U, rule, i, nr, rule.shape[1], C, Rr)
            return 0.0

        return contract

    def gradient(rule, U, i, nr, C, Rr):
        y, a, act_code, loss_code, huber_delta = rule
        c = Rr[:nr, :C]
        return row_coefficients(U[:nr, :C], nr, y, i, a, act_code, loss_code, huber_delta, c)

    return gradient


@njit(cache=True, inline="always")
def _step(X, rule, i, nr, Xs, Vtt, U, Rr, acc, C, G, R, W, L):
    """One step of ``nr`` rows from row ``i``: ``G`` groups of ``W`` vectors of ``L`` lanes
    (``R``, ``W``, ``L`` literal), the rows staged once and read by every group from cache;
    returns the rows' losses (:func:`_coefficients`)."""
    Y, j = _staged_rows(X, i, nr, Xs)
    LW = L * W
    for g in range(G):
        dot_rows(Y, j, Vtt[:, g * LW : (g + 1) * LW], U[:, g * LW : (g + 1) * LW], R, W, L)
    total = _coefficients(rule, U, i, nr, C, Rr)
    for g in range(G):
        axpy_rows(Y, j, Rr[:, g * LW : (g + 1) * LW], acc[:, g * LW : (g + 1) * LW], R, W, L)
    return total


@njit(cache=True, inline="always")
def _transposed_block(Vt, d, Cp):
    """``Vtt`` (``d x Cp``, 64-byte aligned): ``Vtt[t, c] = Vt[c, t]``, zero in the padding
    columns ``c >= Vt.shape[0]``; rows of ``d`` in parallel blocks of ``REDUCE_ROWS``."""
    C = Vt.shape[0]
    Vtt = _empty64(d * Cp).reshape((d, Cp))
    blocks = (d + REDUCE_ROWS - 1) // REDUCE_ROWS
    for blk in prange(blocks):
        for t in range(blk * REDUCE_ROWS, min(d, (blk + 1) * REDUCE_ROWS)):
            for c in range(Cp):
                Vtt[t, c] = Vt[c, t] if c < C else 0.0
    return Vtt


@njit(cache=True, inline="always")
def _sum_chunks(partial, C):
    """``out[c, t] = sum_ch partial[ch, t, c]`` for ``c < C`` (``C x d``): the chunks summed in
    a fixed order, so the result does not depend on the number of threads."""
    n_chunks, d = partial.shape[0], partial.shape[1]
    out = np.empty((C, d))
    blocks = (d + REDUCE_ROWS - 1) // REDUCE_ROWS
    for blk in prange(blocks):
        for t in range(blk * REDUCE_ROWS, min(d, (blk + 1) * REDUCE_ROWS)):
            for c in range(C):
                s = 0.0
                for ch in range(n_chunks):
                    s += partial[ch, t, c]
                out[c, t] = s
    return out


@njit(cache=True, inline="always")
def _chunk_total(losses):
    """The chunks' losses summed in chunk order (independent of the number of threads)."""
    total = 0.0
    for ch in range(losses.shape[0]):
        total += losses[ch]
    return total


@njit(cache=True, inline="always")
def _blocks(Vt, n, d, n_chunks, Cp):
    """``Vtt`` (:func:`_transposed_block`), the per-chunk accumulators (``n_chunks x d x Cp``)
    and the rows per chunk: the fixed chunks of ``hvp_fused``."""
    Vtt = _transposed_block(Vt, d, Cp)
    partial = _empty64(n_chunks * d * Cp).reshape((n_chunks, d, Cp))
    return Vtt, partial, (n + n_chunks - 1) // n_chunks


@njit(cache=True, inline="always")
def _chunk_scratch(X, partial, ch, chunk, rows, Cp):
    """``(lo, hi, acc, U, Rr, Xs)`` of chunk ``ch``: its rows, its zeroed accumulator, and the
    scratch for ``rows`` rows at a time (``U``, ``Rr`` zeroed for the padding columns, and
    :func:`_row_scratch`)."""
    n = X.shape[0]
    lo = ch * chunk
    hi = min(n, lo + chunk)
    acc = partial[ch]
    acc[:] = 0.0
    U = _empty64(rows * Cp).reshape((rows, Cp))
    Rr = _empty64(rows * Cp).reshape((rows, Cp))
    Rr[:] = 0.0
    return lo, hi, acc, U, Rr, _row_scratch(X, rows)


@njit(cache=True, inline="always")
def _product(X, rule, Vt, n_chunks, R, W, L=LANES, G=1):
    """``(sum of the row losses, sum_i x_i r_i^T)`` for the block ``Vt`` (``C x d``) with the
    row coefficients ``r_i`` of ``rule`` (:func:`_coefficients`: ``r_i = (x_i^T V) D_i`` as
    ``hessian.hvp_fused``, or a gradient step's); ``R`` rows per step, ``G`` column groups of
    ``W`` vectors of ``L`` lanes (``G L W >= C``), ``R``, ``W``, ``L`` compile-time constants
    (one wrapper per shape below)."""
    n, d = X.shape
    C = Vt.shape[0]
    Cp = G * L * W
    Vtt, partial, chunk = _blocks(Vt, n, d, n_chunks, Cp)
    losses = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        lo, hi, acc, U, Rr, Xs = _chunk_scratch(X, partial, ch, chunk, R, Cp)
        total = 0.0
        i = lo
        while i + R <= hi:
            total += _step(X, rule, i, R, Xs, Vtt, U, Rr, acc, C, G, R, W, L)
            i += R
        while i < hi:
            total += _step(X, rule, i, 1, Xs, Vtt, U, Rr, acc, C, G, 1, W, L)
            i += 1
        losses[ch] = total
    return _chunk_total(losses), _sum_chunks(partial, C)


@njit(cache=True, inline="always")
def _pipelined_sums(X, rule, Vt, n_chunks, R, W, L=LANES):
    """:func:`_product` (one column group) with the two loops over ``d`` of a step in one
    (:func:`dot_axpy_rows`): the dot products of the next ``R`` rows and the updates of the
    ``R`` rows before, whose coefficients the previous loop finished, so that the stream of
    ``X`` overlaps the updates.  A chunk starts with the dot products alone and ends with the
    pending updates alone; leftover rows take the two-loop step one at a time.  A float32 ``X``
    is widened into two scratch blocks of ``R`` rows, used in turn.  ``rule`` is that of
    :func:`_coefficients` (a Hessian product or a gradient step); returns ``(sum of the row
    losses, sum_i x_i r_i^T as C x d)``, the chunks summed in order."""
    n, d = X.shape
    C = Vt.shape[0]
    Cp = L * W
    Vtt, partial, chunk = _blocks(Vt, n, d, n_chunks, Cp)
    losses = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        lo, hi, acc, U, Rr, Xs = _chunk_scratch(X, partial, ch, chunk, R, Cp)
        Xs2 = _row_scratch(X, R)
        total = 0.0
        i = lo
        if i + R <= hi:
            Y, j = _staged_rows(X, i, R, Xs)
            dot_rows(Y, j, Vtt, U, R, W, L)
            total += _coefficients(rule, U, i, R, C, Rr)
            i += R
            flip = True
            while i + R <= hi:
                Z, k = _staged_rows(X, i, R, Xs2 if flip else Xs)
                dot_axpy_rows(Z, k, Vtt, U, Y, j, Rr, acc, R, W, L)
                total += _coefficients(rule, U, i, R, C, Rr)
                Y, j = Z, k
                flip = not flip
                i += R
            axpy_rows(Y, j, Rr, acc, R, W, L)
        while i < hi:
            total += _step(X, rule, i, 1, Xs, Vtt, U, Rr, acc, C, 1, 1, W, L)
            i += 1
        losses[ch] = total
    return _chunk_total(losses), _sum_chunks(partial, C)


@njit(cache=True, inline="always")
def _pair_block(Vt, d2, Cp):
    """``Vtt`` of the pair kernels (``d2 x Cp``, 64-byte aligned): ``Vtt[t, 2c + p] = Vt[c,
    2t + p]`` for ``p = 0, 1``, zero in the padding columns ``c >= Vt.shape[0]``."""
    C = Vt.shape[0]
    Vtt = _empty64(d2 * Cp).reshape((d2, Cp))
    blocks = (d2 + REDUCE_ROWS - 1) // REDUCE_ROWS
    for blk in prange(blocks):
        for t in range(blk * REDUCE_ROWS, min(d2, (blk + 1) * REDUCE_ROWS)):
            for c in range(Cp // 2):
                for p in range(2):
                    Vtt[t, 2 * c + p] = Vt[c, 2 * t + p] if c < C else 0.0
    return Vtt


@njit(cache=True, inline="always")
def _sum_pairs(partial, tails, C, d):
    """``out[c, 2t + p] = sum_ch partial[ch, t, 2c + p]`` and, for odd ``d``, ``out[c, d-1] =
    sum_ch tails[ch, c]`` (``C x d``): the chunks summed in a fixed order (:func:`_sum_chunks`
    on the ``2 C`` half-columns, then interleaved)."""
    halves = _sum_chunks(partial, 2 * C)
    out = np.empty((C, d))
    for c in range(C):
        for t in range(partial.shape[1]):
            out[c, 2 * t] = halves[2 * c, t]
            out[c, 2 * t + 1] = halves[2 * c + 1, t]
    if d % 2 == 1:
        for c in range(C):
            s = 0.0
            for ch in range(tails.shape[0]):
                s += tails[ch, c]
            out[c, d - 1] = s
    return out


@njit(cache=True, inline="always")
def _pair_step(X, rule, i, nr, Xs, Vtt, Vt, U, Rr, Uc, Rc, acc, tail, C, R):
    """One step of ``nr`` rows of :func:`_pair_product` (``R`` literal): the dots on pairs of
    columns, the coefficients (:func:`_pair_coefficients`), then the updates; returns the
    rows' losses."""
    Y, j = _staged_rows(X, i, nr, Xs)
    dot_rows_pairs(Y, j, Vtt, U, R, 2, 4)
    total = _pair_coefficients(rule, Y, j, i, nr, Vt, U, Rr, Uc, Rc, C)
    axpy_rows_pairs(Y, j, Rr, acc, R, 2, 4)
    _pair_tail(Y, j, nr, Rc, C, tail)
    return total


@njit(cache=True, inline="always")
def _pair_coefficients(rule, Y, j, i, nr, Vt, U, Rr, Uc, Rc, C):
    """The coefficients of rows ``i .. i+nr-1`` (staged as rows ``j ..`` of ``Y``) from their
    pair dots ``U`` (the two halves summed, plus the last column of an odd ``d``), by
    :func:`_coefficients` into ``Rc``, each written twice into ``Rr``; returns the losses."""
    d = Y.shape[1]
    last = d - 1
    odd = d % 2 == 1
    for q in range(nr):
        for c in range(C):
            s = U[q, 2 * c] + U[q, 2 * c + 1]
            if odd:
                s += Y[j + q, last] * Vt[c, last]
            Uc[q, c] = s
    total = _coefficients(rule, Uc, i, nr, C, Rc)
    for q in range(nr):
        for c in range(C):
            Rr[q, 2 * c] = Rc[q, c]
            Rr[q, 2 * c + 1] = Rc[q, c]
    return total


@njit(cache=True, inline="always")
def _pair_tail(Y, j, nr, Rc, C, tail):
    """``tail[c] += sum_q Rc[q, c] Y[j+q, d-1]``: the updates of the last column of an odd
    ``d``, which no pair covers."""
    d = Y.shape[1]
    if d % 2 == 1:
        for q in range(nr):
            for c in range(C):
                tail[c] += Rc[q, c] * Y[j + q, d - 1]


@njit(cache=True, inline="always")
def _pair_product(X, rule, Vt, n_chunks, R):
    """``(sum of the row losses, sum_i x_i r_i^T)`` as :func:`_product` for ``C <= 4`` columns,
    with the dots and updates on pairs of columns of ``d``: the lanes of a ``<4 x double>``
    hold two columns of the block at two consecutive entries of ``d`` (``Vtt[t] = (v_0[2t],
    v_0[2t+1], v_1[2t], v_1[2t+1])``, two lane vectors for four columns), so that one 128-bit
    broadcast of ``(x_{2t}, x_{2t+1})`` feeds two FMAs.  :func:`_product`'s 4-column shape
    broadcasts one entry per FMA (``8 x 1``: 33-35 GFLOP/s a core in L1 on a Zen 3, against
    38-40 for the dots and 32-41 for the updates of ``4 x 2`` pairs, RESULTS.md); here the
    micro-kernels are ``R x 2``.  An odd
    ``d`` leaves its last column to scalar code.  Chunks and the order of every sum are fixed
    (independent of the number of threads).  The entries of a row of ``X`` must be contiguous
    (float64, or float32 widened into a scratch per step)."""
    n, d = X.shape
    if X.strides[1] != X.itemsize:
        raise ValueError("the pair kernels need rows of X with contiguous entries")
    C = Vt.shape[0]
    if C > 4:
        raise ValueError("the pair kernels take at most 4 columns")
    Cp = 8
    d2 = d // 2
    Vtt = _pair_block(Vt, d2, Cp)
    partial = _empty64(n_chunks * d2 * Cp).reshape((n_chunks, d2, Cp))
    tails = np.zeros((n_chunks, 4))
    chunk = (n + n_chunks - 1) // n_chunks
    losses = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        lo, hi, acc, U, Rr, Xs = _chunk_scratch(X, partial, ch, chunk, R, Cp)
        Uc = np.zeros((R, 4))
        Rc = np.zeros((R, 4))
        tail = tails[ch]
        total = 0.0
        i = lo
        while i + R <= hi:
            total += _pair_step(X, rule, i, R, Xs, Vtt, Vt, U, Rr, Uc, Rc, acc, tail, C, R)
            i += R
        while i < hi:
            total += _pair_step(X, rule, i, 1, Xs, Vtt, Vt, U, Rr, Uc, Rc, acc, tail, C, 1)
            i += 1
        losses[ch] = total
    return _chunk_total(losses), _sum_pairs(partial, tails, C, d)


#: bytes of the column block of ``Vtt`` (and of the accumulator) a panel step keeps in L1:
#: ``TB = PANEL_L1_BYTES / (8 C)`` columns of ``d`` (64 for 32 columns; fits every L1 >= 32 kB)
PANEL_L1_BYTES = 16384
#: steps of ``R`` rows a panel holds at most (small ``d``: the scratch ``U`` stays small)
PANEL_MAX_STEPS = 64


def _cache_bytes(level: int, default: int) -> int:
    """The cache of ``level`` seen by core 0 in bytes (Linux sysfs), else ``default``."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level")) as f:
                if f.read().strip() != str(level):
                    continue
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
            return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return default


#: the bytes of a panel of rows (``P x d`` doubles) that :func:`_panel_product` keeps in L2
#: between its two sweeps: 0.7 of this core's L2 (``P = 42`` rows at ``d = 4000`` on a 2 MB L2),
#: per thread (two SMT threads of one core would share the L2: not measured)
PANEL_BYTES = int(0.7 * _cache_bytes(2, 1 << 20))  # the L2 of one core, else 1 MiB
#: the largest panel of the ``avx2`` kernel (:func:`panel4_c32`)
PANEL_MAX_BYTES_AVX2 = 2 << 20


def avx2_panel_bytes(l2_panel: int, l3: int, threads: int) -> int:
    """The panel of the ``avx2`` kernel (:func:`panel4_c32`): ``PANEL_MAX_BYTES_AVX2`` (2 MiB)
    where the panels of all ``threads`` fit in half of the L3 (``l3`` bytes), less where they
    do not, and never less than the L2 panel ``l2_panel`` (:data:`PANEL_BYTES`).  Its second
    sweep reads the panel from L3 rather than L2; on a Zen 3 (512 kB L2, 32 MB L3, d = 4000,
    2026-12-03) panels of 1, 2 and 4 MB ran at 78-84% of the in-run DGEMM against 76% for
    350 kB (two steps of 5 rows), and at d = 16000 (a row is 128 kB) 2 MB against 640 kB: 67%
    against 61%."""
    share = l3 // (2 * max(1, threads))
    return max(l2_panel, min(PANEL_MAX_BYTES_AVX2, share))


#: the panel of :func:`panel4_c32` on this machine, for Numba's largest thread count
PANEL_BYTES_AVX2 = avx2_panel_bytes(
    PANEL_BYTES, _cache_bytes(3, 16 << 20), numba.config.NUMBA_NUM_THREADS
)


@njit(cache=True, inline="always")
def _panel_product(X, D, Vt, n_chunks, panel_bytes, R, W, L, G):
    """``sum_i x_i r_i^T`` like :func:`_product`, on panels of ``P`` rows blocked by ``TB``
    columns of ``d``.

    :func:`_product` streams whole rows: each step of ``R`` rows reads all of ``Vtt`` and reads
    and writes all of the accumulator (``d x C`` each) from L2 or L3.  Here a panel of
    ``P = R S`` rows (``P d`` doubles within ``panel_bytes``, so in L2) goes through ``d`` in
    blocks of ``TB`` columns twice: first the dots of each step with the block of ``Vtt``
    (``TB x C``, in L1) are added to the panel's ``U`` (:func:`dot_rows_acc`); then, after the
    contraction with the ``D_i``, the updates of the block of the accumulator (in L1), the rows
    read again from L2 (:func:`axpy_rows`).  ``Vtt`` and the accumulator cross the cache once per
    panel instead of once per step.  Chunks and the order of every sum are those of
    :func:`_product`'s chunks; the last rows of a chunk that do not fill a step go one by one."""
    n, d = X.shape
    m = D.shape[1]
    C = Vt.shape[0]
    LW = L * W
    Cp = G * LW
    TB = max(8, PANEL_L1_BYTES // (8 * Cp))
    S = max(1, min(PANEL_MAX_STEPS, panel_bytes // (8 * max(d, 1) * R)))
    P = S * R
    Vtt, partial, chunk = _blocks(Vt, n, d, n_chunks, Cp)
    for ch in prange(n_chunks):
        lo, hi, acc, U, Rr, Xp = _chunk_scratch(X, partial, ch, chunk, P, Cp)
        p0 = lo
        while p0 + R <= hi:
            steps = min(S, (hi - p0) // R)
            npr = steps * R
            Y, j = _staged_rows(X, p0, npr, Xp)
            U[:npr] = 0.0
            for t0 in range(0, d, TB):
                t1 = min(d, t0 + TB)
                Yb = Y[:, t0:t1]
                Vb = Vtt[t0:t1]
                for k in range(steps):
                    for g in range(G):
                        dot_rows_acc(Yb, j + k * R, Vb[:, g * LW : (g + 1) * LW],
                                     U[k * R : (k + 1) * R, g * LW : (g + 1) * LW], R, W, L)  # fmt: skip
            _contract(U, D, p0, npr, m, C, Rr)
            for t0 in range(0, d, TB):
                t1 = min(d, t0 + TB)
                Yb = Y[:, t0:t1]
                Ab = acc[t0:t1]
                for k in range(steps):
                    for g in range(G):
                        axpy_rows(Yb, j + k * R, Rr[k * R : (k + 1) * R, g * LW : (g + 1) * LW],
                                  Ab[:, g * LW : (g + 1) * LW], R, W, L)  # fmt: skip
            p0 += npr
        while p0 < hi:  # the scratch of the panel serves the one-row steps too
            _step(X, D, p0, 1, Xp, Vtt, U, Rr, acc, C, G, 1, W, L)
            p0 += 1
    return _sum_chunks(partial, C)


# One compiled kernel per lane-vector count W, with R W <= 24 accumulators (R = 16 rows for
# W = 1: 16 rows of d = 4000 are 512 kB, which fits in a core's L2 cache); each has the
# signature ``(X, D, Vt, n_chunks)`` of ``hessian.hvp_fused``.
@njit(cache=True, parallel=True)
def simd_w1(X, D, Vt, n_chunks):
    return _product(X, D, Vt, n_chunks, 16, 1)[1]


@njit(cache=True, parallel=True)
def simd_w2(X, D, Vt, n_chunks):
    return _product(X, D, Vt, n_chunks, 8, 2)[1]


@njit(cache=True, parallel=True)
def simd_w3(X, D, Vt, n_chunks):
    return _product(X, D, Vt, n_chunks, 8, 3)[1]


@njit(cache=True, parallel=True)
def simd_w4(X, D, Vt, n_chunks):
    return _product(X, D, Vt, n_chunks, 6, 4)[1]


@njit(cache=True, parallel=True)
def simd_w1_pipe(X, D, Vt, n_chunks):
    """8 columns pipelined (:func:`_pipelined_sums`), 12 rows per step: 12 dot accumulators
    and 12 coefficient vectors in AVX-512's 32 registers; 0.80-0.83x ``simd_w1`` (10 and 16
    rows measured the same, benchmarks/RESULTS.md)."""
    return _pipelined_sums(X, D, Vt, n_chunks, 12, 1)[1]


#: the ``<8 x double>`` kernels (AVX-512) by lane-vector count ``W`` (``8 W`` columns); the
#: two-loop ``simd_w1`` stays compiled and tested, not dispatched
KERNELS = {1: simd_w1_pipe, 2: simd_w2, 3: simd_w3, 4: simd_w4}


# The ``<4 x double>`` kernels for 16 vector registers (AVX2): R W <= 12 accumulators, so
# that the W lane vectors of ``Vtt`` and a broadcast fit beside them; 24 and 32 columns go in
# two groups of 12 and 16 over the same staged rows (one pass over ``X``).
@njit(cache=True, parallel=True)
def simd4_c4(X, D, Vt, n_chunks):
    return _product(X, D, Vt, n_chunks, 8, 1, 4, 1)[1]


@njit(cache=True, parallel=True)
def simd4_c8(X, D, Vt, n_chunks):
    """8 columns, 5 rows per step: the update loop keeps ``5 x 2`` coefficient vectors and
    ``2 x 2`` partial sums in registers, 15 of 16 with the broadcast (with 6 rows its 12
    coefficients spill).  On a Zen 3 (2026-12-03, a block of 2 of m = 4, side by side in five
    processes) 5 rows took 0.86-0.95x the time of 4 rows (26.4-28.5 against 29.6-33.4 ms at
    ``n = 16000, d = 4000``, ``64000 x 1000`` and ``4000 x 16000``); 6 rows 1.0-1.1x, 3 rows
    1.2-1.3x.  (Measured in separate processes on 2026-12-02, 5 rows had looked no better:
    39-52 against 42-47 ms; the guest's noise between processes is larger than the gain.)"""
    return _product(X, D, Vt, n_chunks, 5, 2, 4, 1)[1]


@njit(cache=True, parallel=True)
def simd4_c16(X, D, Vt, n_chunks):
    """16 columns as two groups of :func:`simd4_c8`'s ``5 x 2`` shape over the same staged
    rows.  On a Zen 3 (2026-12-03, n = 16000, d = 4000, in turn): a block of 8 of m = 2 in
    66 ms against 93 for ``hvp_m2`` (69% against 50% of the in-run DGEMM), a block of 4 of
    m = 4 in 60 ms against 98 for ``hvp_m4`` and 95 for the ``3 x 4`` shape this kernel had."""
    return _product(X, D, Vt, n_chunks, 5, 2, 4, 2)[1]


@njit(cache=True, parallel=True)
def simd4_c24(X, D, Vt, n_chunks):
    """24 columns as three groups of the ``5 x 2`` shape.  On a Zen 3 (2026-12-03, as
    :func:`simd4_c16`): a block of 8 of m = 3 in 100 ms against 141 for ``hvp_m3``, a block of
    6 of m = 4 in 97 ms against 145 for ``hvp_m4`` (panels of the same shape: 95 ms, not kept)."""
    return _product(X, D, Vt, n_chunks, 5, 2, 4, 3)[1]


@njit(cache=True, parallel=True)
def panel4_c32(X, D, Vt, n_chunks, panel_bytes=PANEL_BYTES_AVX2):
    """32 columns in four groups of ``2 x <4 x double>``, 5 rows per step: 10 accumulators for
    the dots; 10 coefficient vectors and 4 partial sums for the updates (15 of AVX2's 16
    registers with the broadcast, no spills).  Single-core rates in L1 (Zen 3, 2026-12-03,
    ``d`` = 64-128): 45 and 49 GFLOP/s for the dots and the updates, against 19-21 and 15-33
    for the ``3 x 4`` shape this kernel had before, whose 12 coefficients spilled.  The block
    of 8 of m = 4 at n = 16000, d = 4000 ran at 78-88% of the in-run DGEMM against 45-53% for
    the ``3 x 4`` panels and 47-49% for the streamed ``hvp_m4`` when the guest was in its fast
    state, and at 63-67% against 45-52% in its slow state (benchmarks/HISTORY.md, "Zen 3")."""
    return _panel_product(X, D, Vt, n_chunks, panel_bytes, 5, 2, 4, 4)


@njit(cache=True, parallel=True)
def pair4_c4(X, D, Vt, n_chunks):
    """At most 4 columns on pairs of columns of ``d`` (:func:`_pair_product`), 4 rows per
    step: ``4 x 2`` lane vectors, 8 accumulators for the dots; 8 coefficient vectors and 4
    partial sums for the updates.  On a Zen 3 (2026-12-03, side by side with
    :func:`simd4_c4` in 23 processes): 0.81-0.93x its time with ``X`` in L3 (2000-4000 rows of
    d = 1000, m = 4 and m = 2), 0.91-1.10x streamed from memory (16000 x 4000, 64000 x 1000),
    where a product costs about a pass plus its update loop whatever the micro-kernel.  (5
    rows: the same streamed, and its dot loop spills with two row prefetches a step.)"""
    return _pair_product(X, D, Vt, n_chunks, 4)[1]


@njit(cache=True, parallel=True)
def grad4_c4(X, Wt, y, a, act_code, loss_code, huber_delta, n_chunks):
    """Loss and gradient sums of one gradient-descent step for ``m <= 4`` (the signature and
    result of ``descent.loss_grad_generic``) in the layout of :func:`simd4_c4`: the ``m``
    columns of ``W`` in the lanes of one ``<4 x double>``, 8 rows per step (their dots, their
    coefficients ``l'_q a_j sigma'(u_qj)``, then their updates), no spills on 16 registers."""
    if Wt.shape[0] > 4:
        raise ValueError("grad4_c4 takes W^T with at most 4 rows (m <= 4)")
    rule = (y, a, act_code, loss_code, huber_delta)
    return _product(X, rule, Wt, n_chunks, 8, 1, 4, 1)


KERNELS_AVX2 = {4: pair4_c4, 8: simd4_c8, 16: simd4_c16, 24: simd4_c24, 32: panel4_c32}

#: the two-loop kernel that takes a pipelined one's place for float32 ``X``: a step of the
#: pipelined kernel widens its rows into a scratch before it reads them, so the stream no
#: longer overlaps anything (the block of 2 took 36 ms pipelined against 33 for ``simd_w1``)
TWO_LOOP_FOR_FLOAT32 = {simd_w1_pipe: simd_w1}
#: the explicit-SIMD kernels that give way to the unrolled kernels (which read float32 rows
#: directly) for float32 ``X``: ``pair4_c4`` widens each step's rows into a scratch first
#: (on a Zen 3, 2026-12-03: 28.9 and 31.3 ms on float32 rows against 24.8 and 27.9 for
#: ``hvp_m4``; on 2026-12-02 the 4-lane ``simd4_c4`` took 36.9 ms against 28.9 the same way)
UNROLLED_FOR_FLOAT32 = (pair4_c4,)
#: the kernel that takes a pair kernel's place when the entries of a row of ``X`` are not
#: contiguous (a strided or Fortran-ordered ``X``): the 4-lane form reads any strides
STRIDED_FORM = {pair4_c4: simd4_c4}
#: the column counts :func:`simd_kernel` hands to them on ``avx2``: those measured faster
#: than the unrolled kernel under AVX2 codegen (benchmarks/RESULTS.md, "HVP: SIMD paths"):
#: 4 columns (one vector of m = 4, two of m = 2, four of m = 1: ``pair4_c4``, pairs of
#: columns of ``d`` in ``4 x 2`` lane vectors, 0.81-1.10x the time of the 8-row ``simd4_c4``
#: on a Zen 3 on 2026-12-03; ``simd4_c4`` itself took 1.05-1.4x less than the unrolled
#: kernels, and on a real Zen 3 28-29 ms against 32-39 for its pipelined form, which won
#: only under AVX2 codegen on an AVX-512 Xeon and is gone), 8, 16 and 24 (the ``5 x 2`` shape, on a Zen 3
#: on 2026-12-03: 1.4-1.65x the unrolled kernels side by side in probes, 1.06-1.17x in the
#: benchmark's runs, once 0.91x for 16 columns of m = 2) and 32, whatever ``d``: the panel
#: kernel ``panel4_c32`` beats the unrolled kernel by its micro-kernel, not only by the
#: blocking (Zen 3, 2026-12-03, block of 8 of m = 4: 45% of DGEMM at d = 250, 80% at d = 1000
#: and 4000, 61-70% at d = 16000, against 36-49% for ``hvp_m4`` in the same runs; the streamed
#: ``3 x 4`` kernel ``simd4_c32`` it replaced measured 0.7x ``hvp_m4``)
AVX2_DISPATCH = (4, 8, 16, 24, 32)

#: widths ``m`` whose single product (``hvp_m{m}_p4``) and loss-and-gradient step
#: (``grad_m{m}_p4``) run pipelined on each path: the dot products of a step's 4 rows in the
#: loop over ``d`` that updates with the 4 rows before (``tools/gen_hvp_small.py``,
#: ``pipelined_source``).  Measured 0.84-0.96x the two-loop kernels for m = 1..4 natively on an
#: AVX-512 Xeon; under AVX2 codegen 0.84-0.92x for m = 1..3, while for m = 4 the 16 dot
#: accumulators and 16 coefficients spill (1.29-1.33x), so m = 4 goes to ``pair4_c4`` and
#: ``grad4_c4`` there.  ``portable`` keeps the two-loop kernels (not measured off x86).
PIPELINED_WIDTHS = {"avx512": (1, 2, 3, 4), "avx2": (1, 2, 3), "portable": ()}


# The panel kernels for 32 columns (:func:`_panel_product`): the one width where the streamed
# ``Vtt`` and accumulator (``2 x 8 d C`` bytes) overflow L2 at the sizes of the benchmarks and
# the panels measured faster (benchmarks/RESULTS.md, "HVP: panels"); ``panel_bytes`` defaults
# to :data:`PANEL_BYTES` (this machine's L2).
@njit(cache=True, parallel=True)
def panel_w4(X, D, Vt, n_chunks, panel_bytes=PANEL_BYTES):
    return _panel_product(X, D, Vt, n_chunks, panel_bytes, 6, 4, 8, 1)


#: rows a panel must hold for the panel kernel to pay: the block of ``Vtt`` and of the
#: accumulator crosses the caches once per panel.  Measured at d = 4000: 18 rows (Zen 4,
#: ``panel_w4``, 1 MB L2) 1.43x and 21 rows (Zen 4, the ``3 x 4`` form of ``panel4_c32``
#: under AVX2 codegen) 1.11x faster than streaming; 9 rows (Zen 3, the same) 0.86x (2026-12-02)
PANEL_MIN_ROWS = 16
#: the panel kernels that :func:`panels_pay` decides by ``d``: ``(kernel, rows per step)``
#: (on ``avx2`` the panel kernel ``panel4_c32`` takes every block of 32 columns)
PANEL_KERNELS = {"avx512": {32: (panel_w4, 6)}}


def panels_pay(d: int, columns: int, rows: int, panel_bytes: int = PANEL_BYTES) -> bool:
    """Whether the panel kernel beats streaming whole rows for ``d`` and a block of
    ``columns``: the streamed ``Vtt`` and accumulator (``16 d columns`` bytes) overflow the panel
    budget, and a panel holds at least two steps of ``rows`` rows (else it is one step, the
    streaming kernel's, measured equal) and at least :data:`PANEL_MIN_ROWS` rows."""
    steps = panel_bytes // (8 * max(d, 1) * rows)
    return 16 * d * columns > panel_bytes and steps >= 2 and steps * rows >= PANEL_MIN_ROWS
