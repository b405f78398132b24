"""Block Hessian products with explicit SIMD: ``<L x double>`` micro-kernels in LLVM IR.

The fused kernels of ``hessian.py`` and ``_generated/hvp_small.py`` leave the vectorisation to
LLVM, which vectorises along ``d`` (one accumulator per row and column) and runs out of
registers once a block has more than a few columns.  The kernels here keep the block's ``C``
columns in the vector lanes instead, with the loop over ``d`` scalar (docs/theory.md section 2):

* :func:`dot_rows`: ``U[q] = sum_t X[i+q, t] Vtt[t]`` for ``R`` rows, each ``Vtt[t]`` (``W``
  lane vectors of ``L`` lanes) loaded once and broadcast-multiplied by ``R`` entries of ``X``:
  ``R W`` accumulators in registers, no horizontal sums.  It prefetches each of its rows
  ``PREFETCH_LINES`` cache lines ahead of its reads, into L1.
* :func:`axpy_rows`: ``acc[t] += sum_q X[i+q, t] Rr[q]``, the coefficients held in registers,
  two partial sums per lane vector, the rows read again from cache.
* :func:`dot_axpy_rows`: both in one loop, the dots of the next ``R`` rows and the updates of
  the ``R`` rows before (:func:`_pipelined_sums`, ``simd_w1_pipe``), so that the stream of
  ``X`` overlaps the updates.
* :func:`_panel_product` (``panel_w4``, ``panel4_c32``): panels of rows that fit in a cache
  (``panel_bytes``), swept twice through blocks of ``d`` that fit in L1 (dots, then updates),
  so that ``Vtt`` and the accumulator cross the caches once per panel, not once per step.

``R``, ``W`` and ``L`` are compile-time constants (literal arguments of the intrinsics), so
every shape gets its own unrolled code; ``L = 8`` (``simd_w*``, ``panel_w4``) is sized for
AVX-512's 32 registers, ``L = 4`` (``simd4_*``, ``panel4_c32``, ``grad4_c4``) for AVX2's 16.
Which kernel serves which block is decided in :mod:`rmt.kernels.dispatch`; the measurements
behind it are in ``benchmarks/RESULTS.md``.  The row chunks are those of ``hvp_fused`` (fixed
``n_chunks``, summed in order), so results do not depend on the number of threads.  The
kernels accept any strides of ``X`` and are correct on any CPU (LLVM splits vectors wider
than the hardware's).

``X`` may be float32: each step's rows are first widened into a float64 scratch of ``R x d``
(:func:`_staged_rows`), which the micro-kernels read, so every product and sum is float64.
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.core.extending import intrinsic, overload

from rmt.kernels import dispatch
from rmt.kernels._generated.descent_small import row_coefficients

LANES = 8
#: doubles in a cache line (the prefetch steps in lines, not in lane vectors)
LINE = 8
#: how far ahead of its reads ``dot_rows`` prefetches each row, in cache lines (into L1)
PREFETCH_LINES = 4

_F64 = ir.DoubleType()
_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


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


def _prologue(context, builder, signature, args, nr, lanes):
    """Strides of ``X``, ``A`` and ``B`` (data, strides), the trip count of the loop (``d``,
    the columns of ``X``), the ``fma`` intrinsic for ``lanes`` and the byte addresses of rows
    ``i .. i+nr-1``."""
    xd, xsh, xst = _unpack(context, builder, signature.args[0], args[0])
    ad, ash, ast = _unpack(context, builder, signature.args[2], args[2])
    bd, bsh, bst = _unpack(context, builder, signature.args[3], args[3])
    rows = _row_pointers(builder, xd, xst[0], args[1], nr)
    return xst, (ad, ast), (bd, bst), xsh[1], _fma(builder, lanes), rows


def _x_entries(builder, row, off, nl):
    """The entry at byte ``off`` of ``row`` in every lane (a 64-bit broadcast)."""
    return _splat(builder, _load(builder, _at(builder, row, off), _F64), nl)


def _dot_codegen(nr, nw, nl, accumulate, updates=False):
    """Code of ``U[q, :LW] (+)= sum_t X[i+q, t] * Vtt[t, :LW]`` with row prefetches: from zero
    (:func:`dot_rows`) or from the current ``U`` (:func:`dot_rows_acc`); with ``updates``, the
    loop also adds ``sum_q Y[j+q, t] Rr[q, :LW]`` to ``acc[t, :LW]`` (:func:`dot_axpy_rows`,
    arguments 4-7: ``Y, j, Rr, acc``)."""
    vty = _vec(nl)

    def codegen(context, builder, signature, args):
        xst, (vd, vst), (ud, ust), d, fma, rows = _prologue(
            context, builder, signature, args, nr, nl
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
        _row_prefetch(builder, rows[0], xst, t, nr)
        vrow = _at(builder, vd, builder.mul(t, vst[0]))
        v = [_load(builder, _at(builder, vrow, _I64(8 * nl * w)), vty) for w in range(nw)]
        toff = builder.mul(t, xst[1])
        new = []
        for q in range(nr):
            s = _x_entries(builder, rows[q], toff, nl)
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


def _axpy_step(builder, fma, acc, t, rows, off, coef, nw, nl):
    """Emit ``acc[t, :LW] += sum_q rows[q][off] * coef[q]``: the body of one column of the
    update loop, two partial sums per lane vector (shorter dependency chains)."""
    vty = _vec(nl)
    arow = _at(builder, acc[0], builder.mul(t, acc[1][0]))
    part = [[_load(builder, _at(builder, arow, _I64(8 * nl * w)), vty), None] for w in range(nw)]
    for q in range(len(rows)):
        s = _x_entries(builder, rows[q], off, nl)
        for w in range(nw):
            h = q % 2
            if part[w][h] is None:
                part[w][h] = builder.fmul(s, coef[q][w])
            else:
                part[w][h] = builder.call(fma, [s, coef[q][w], part[w][h]])
    for w in range(nw):
        total = part[w][0] if part[w][1] is None else builder.fadd(part[w][0], part[w][1])
        _store(builder, total, _at(builder, arow, _I64(8 * nl * w)))


def _axpy_codegen(nr, nw, nl):
    """Code of ``acc[t, :LW] += sum_q X[i+q, t] * Rr[q, :LW]`` (:func:`axpy_rows`)."""
    vty = _vec(nl)

    def codegen(context, builder, signature, args):
        xst, (rd, rst), (ad, ast), d, fma, rows = _prologue(
            context, builder, signature, args, nr, nl
        )
        coef = [
            [_load(builder, _at(builder, rd, builder.add(builder.mul(_I64(q), rst[0]),
                                                        _I64(8 * nl * w))), vty)
             for w in range(nw)]
            for q in range(nr)
        ]  # fmt: skip
        t, _, body, done = _loop(builder, d, "axpy")
        off = builder.mul(t, xst[1])
        _axpy_step(builder, fma, (ad, ast), t, rows, off, coef, nw, nl)
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


#: bytes of the column block of ``Vtt`` (and of the accumulator) a panel step keeps in L1:
#: ``TB = PANEL_L1_BYTES / (8 C)`` columns of ``d`` (64 for 32 columns; fits every L1 >= 32 kB)
PANEL_L1_BYTES = 16384
#: steps of ``R`` rows a panel holds at most (small ``d``: the scratch ``U`` stays small)
PANEL_MAX_STEPS = 64


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


# The kernels, each with the signature ``(X, D, Vt, n_chunks)`` and the result of
# ``hessian.hvp_fused`` (the panel kernels take the panel budget in bytes as a fifth argument).
# ``<8 x double>`` (AVX-512, 32 registers): ``R W <= 24`` accumulators.
@njit(cache=True, parallel=True)
def simd_w1(X, D, Vt, n_chunks):
    """8 columns, 16 rows per step, two loops over ``d`` (dots, then updates)."""
    return _product(X, D, Vt, n_chunks, 16, 1)[1]


@njit(cache=True, parallel=True)
def simd_w2(X, D, Vt, n_chunks):
    """16 columns, 8 rows per step."""
    return _product(X, D, Vt, n_chunks, 8, 2)[1]


@njit(cache=True, parallel=True)
def simd_w3(X, D, Vt, n_chunks):
    """24 columns, 8 rows per step."""
    return _product(X, D, Vt, n_chunks, 8, 3)[1]


@njit(cache=True, parallel=True)
def simd_w1_pipe(X, D, Vt, n_chunks):
    """8 columns pipelined (:func:`_pipelined_sums`), 12 rows per step: 12 dot accumulators
    and 12 coefficient vectors in 32 registers."""
    return _pipelined_sums(X, D, Vt, n_chunks, 12, 1)[1]


@njit(cache=True, parallel=True)
def panel_w4(X, D, Vt, n_chunks, panel_bytes):
    """32 columns on panels of at most ``panel_bytes`` (:func:`_panel_product`), 6 rows of
    4 lane vectors per step."""
    return _panel_product(X, D, Vt, n_chunks, panel_bytes, 6, 4, 8, 1)


# ``<4 x double>`` (AVX2, 16 registers): at most 12 accumulators, so that the lane vectors of
# ``Vtt`` and a broadcast fit beside them; 16 and 24 columns go in two and three column groups
# of ``5 rows x 2`` lane vectors over the same staged rows (one pass over ``X``).
@njit(cache=True, parallel=True)
def simd4_c4(X, D, Vt, n_chunks):
    """At most 4 columns in one lane vector, 8 rows per step."""
    return _product(X, D, Vt, n_chunks, 8, 1, 4, 1)[1]


@njit(cache=True, parallel=True)
def simd4_c8(X, D, Vt, n_chunks):
    """8 columns, 5 rows per step: the update loop keeps ``5 x 2`` coefficient vectors and
    ``2 x 2`` partial sums in registers, 15 of 16 with the broadcast."""
    return _product(X, D, Vt, n_chunks, 5, 2, 4, 1)[1]


@njit(cache=True, parallel=True)
def simd4_c16(X, D, Vt, n_chunks):
    """16 columns as two groups of :func:`simd4_c8`'s ``5 x 2`` shape over the same rows."""
    return _product(X, D, Vt, n_chunks, 5, 2, 4, 2)[1]


@njit(cache=True, parallel=True)
def simd4_c24(X, D, Vt, n_chunks):
    """24 columns as three groups of the ``5 x 2`` shape."""
    return _product(X, D, Vt, n_chunks, 5, 2, 4, 3)[1]


@njit(cache=True, parallel=True)
def panel4_c32(X, D, Vt, n_chunks, panel_bytes):
    """32 columns in four groups of ``2 x <4 x double>``, 5 rows per step, on panels of at
    most ``panel_bytes``: 10 accumulators for the dots; 10 coefficient vectors and 4 partial
    sums for the updates (15 of 16 registers with the broadcast, no spills)."""
    return _panel_product(X, D, Vt, n_chunks, panel_bytes, 5, 2, 4, 4)


@njit(cache=True, parallel=True)
def grad4_c4(X, Wt, y, a, act_code, loss_code, huber_delta, n_chunks):
    """Loss and gradient sums of one gradient-descent step for ``m <= 4``.

    The ``m`` columns of ``W`` in the lanes of one ``<4 x double>``, 8 rows per step: their
    dots, their coefficients ``l'_q a_j sigma'(u_qj)``, then their updates (docs/theory.md
    section 1.3).

    Parameters
    ----------
    X : ndarray, shape (n, d), float64 or float32
    Wt : ndarray, shape (m, d)
        ``W^T``, at most 4 rows.
    y, a : ndarray
        Targets (``n``) and second-layer weights (``m``).
    act_code, loss_code : int
        Codes of the activation and the loss (``rmt.kernels.elementwise``).
    huber_delta : float
    n_chunks : int
        Fixed row chunks, summed in order.

    Returns
    -------
    (float, ndarray of shape (m, d))
        ``sum_i l_i`` and ``sum_i (l'_i a (.) sigma'(u_i)) x_i^T``, as
        ``descent.loss_grad_generic``.
    """
    if Wt.shape[0] > 4:
        raise ValueError("grad4_c4 takes W^T with at most 4 rows (m <= 4)")
    rule = (y, a, act_code, loss_code, huber_delta)
    return _product(X, rule, Wt, n_chunks, 8, 1, 4, 1)


def __getattr__(name):
    """``SIMD_TARGET``: the SIMD path of this process (``dispatch.default_target()``), read on
    first use, not at import."""
    if name == "SIMD_TARGET":
        return dispatch.default_target()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
