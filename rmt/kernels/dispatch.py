"""Which kernel computes each equation: one table, read at first use.

:data:`TABLE` maps ``(equation, path, situation)`` to ``(kernel, reason)``.  The equations are
the Hessian product ``sum_i x_i r_i^T`` (``hvp``, docs/theory.md section 2) and the loss and
gradient of a descent step (``step``, section 1.3).  The path is the SIMD path of the process
(:func:`default_target`): ``avx512``, ``avx2`` or ``portable``; rows of path ``any`` hold on
every path, below the rows of the path itself.  Each equation has one portable reference
kernel (``hessian.hvp_fused``, ``descent.loss_grad_generic``, ``dmft.response_row``) that
serves what no other row does; every other kernel is a specialisation kept because it was
measured at least 1.15x faster than the kernel it would otherwise fall back to, on a CPU kind of its path (the
figures, and those of the kernels removed, are in ``benchmarks/RESULTS.md``).

Nothing is probed at import: the path (:func:`default_target`) and the panel budgets
(:func:`panel_bytes`, from the cache sizes in sysfs) are read the first time a kernel is
chosen, and each choice is kept (:func:`hvp_kernel`, :func:`step_kernel`,
:func:`response_kernel`).
"""

from __future__ import annotations

import functools
import importlib
import os

import numpy as np

#: the SIMD paths: ``avx512`` (``<8 x double>`` kernels for 32 vector registers), ``avx2``
#: (``<4 x double>`` kernels for 16 registers), ``portable`` (no explicit SIMD)
TARGETS = ("avx512", "avx2", "portable")

#: ``(equation, path, situation) -> (kernel, reason)``.  A kernel is ``module.name`` in
#: ``rmt.kernels`` (``hvp_small`` and ``descent_small`` in ``_generated``), ``{m}`` the width;
#: ``None`` defers to the rows of path ``any``.
TABLE = {
    # -- Hessian product, one vector or a block of ``columns = b m`` columns -------------------
    ("hvp", "any", "m > 4"): ("hessian.hvp_fused", "the portable reference: any m, any block"),
    ("hvp", "any", "m <= 4"): (
        "hvp_small.hvp_m{m}", "unrolled for m: the accumulators of a step in registers"),
    ("hvp", "avx512", "1 vector, m = 1"): (
        "hvp_small.hvp_m1_p4", "pipelined: the stream of X overlaps the updates"),
    ("hvp", "avx512", "1 vector, m = 2"): (
        "hvp_small.hvp_m2_p4", "pipelined: the stream of X overlaps the updates"),
    ("hvp", "avx512", "8 columns"): (
        "simd.simd_w1_pipe", "columns in the lanes, pipelined: faster than simd_w1 and hvp_m{m}"),
    ("hvp", "avx512", "8 columns, float32 X"): (
        "simd.simd_w1", "widened rows do not pipeline: the two-loop form is faster there"),
    ("hvp", "avx512", "16 columns"): (
        "simd.simd_w2", "columns in the lanes; kept until measured against hvp_m{m}"),
    ("hvp", "avx512", "24 columns"): (
        "simd.simd_w3", "columns in the lanes; kept until measured against hvp_m{m}"),
    ("hvp", "avx512", "32 columns"): (
        "simd.panel_w4", "panels in L2: Vtt and the accumulator cross the caches once a panel"),
    ("hvp", "avx2", "4 columns"): (
        "simd.simd4_c4", "one lane vector, no spills: faster than hvp_m{m}"),
    ("hvp", "avx2", "4 columns, float32 X"): (
        None, "hvp_m{m} reads float32 rows directly; simd4_c4 widens them first"),
    ("hvp", "avx2", "8 columns"): ("simd.simd4_c8", "5 x 2 lane vectors, no spills"),
    ("hvp", "avx2", "16 columns"): ("simd.simd4_c16", "two groups of 5 x 2, one pass over X"),
    ("hvp", "avx2", "24 columns"): ("simd.simd4_c24", "three groups of 5 x 2, one pass over X"),
    ("hvp", "avx2", "32 columns"): (
        "simd.panel4_c32", "four groups of 5 x 2 on panels in L3, whatever d"),
    # -- descent step: loss and gradient sums; the loss alone (held-out loss) -----------------
    ("step", "any", "m > 4"): ("descent.loss_grad_generic", "the portable reference: any m"),
    ("step", "any", "m <= 4"): ("descent_small.grad_m{m}", "unrolled for m"),
    ("step", "avx2", "m = 4"): ("simd.grad4_c4", "the 4 columns of W in one lane vector"),
    ("loss", "any", "m > 4"): ("descent.loss_generic", "the portable reference: any m"),
    ("loss", "any", "m <= 4"): ("descent_small.loss_m{m}", "unrolled for m"),
    # -- DMFT responses: a row R_psi(t, .) of docs/theory.md (D3), by reverse mode ------------
    ("response", "any", "m > 4"): ("dmft.response_row", "the portable reference: any m"),
    ("response", "any", "m <= 4"): (
        "dmft.response_row_m{m}", "dot_rows on 4 lanes: the sums over (q, j) in registers"),
    ("response", "avx512", "m = 3"): (
        "dmft.response_row8_m3", "8 lanes, 18 accumulators: faster than the 4-lane kernel"),
    ("response", "avx512", "m = 4"): (
        "dmft.response_row8_m4", "8 lanes, 16 accumulators: faster than the 4-lane kernel"),
    # -- DMFT per-sample process forward at solved kernels: (D1) for fresh draws (8.10) ------
    ("forward", "any", "m > 4"): ("dmft.forward_process", "the portable reference: any m"),
    ("forward", "any", "m <= 4"): (
        "dmft.forward_process_m{m}", "dot_rows on 4 lanes: the memory term in registers"),
}  # fmt: skip

#: kernels that take a panel budget in bytes as a fifth argument: which cache holds a panel
PANEL_CACHE = {"panel_w4": "L2", "panel4_c32": "L3"}
#: the largest panel of ``panel4_c32``
PANEL_MAX_BYTES_AVX2 = 2 << 20


def table_rows(equation: str | None = None) -> list[tuple[str, str, str, str | None, str]]:
    """The rows of :data:`TABLE` as ``(equation, path, situation, kernel, reason)``.

    Parameters
    ----------
    equation : str, optional
        ``"hvp"``, ``"step"`` or ``"loss"``; all rows when omitted.

    Returns
    -------
    list of tuple
        In the order of :data:`TABLE`.
    """
    return [(*key, *value) for key, value in TABLE.items() if equation in (None, key[0])]


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
    """The SIMD path that the environment and the compile features call for.

    Returns
    -------
    str
        ``RMT_SIMD`` (``avx512`` | ``avx2`` | ``portable``) when set; else, from the features
        Numba compiles for (``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` honoured): ``avx512``
        with ``avx512f``, ``avx2`` with ``avx2`` and ``fma``, else ``portable``.  A named
        ``NUMBA_CPU_NAME`` without ``NUMBA_CPU_FEATURES`` counts as AVX-512 or AVX2 by the
        LLVM CPU names known to have it.
    """
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


@functools.cache
def default_target() -> str:
    """The SIMD path of this process: :func:`simd_target`, read at the first call and kept."""
    return simd_target()


def resolve_target(target: str | None) -> str:
    """``target``, or :func:`default_target` for ``None``.

    Raises
    ------
    ValueError
        For a path not in :data:`TARGETS`.
    """
    target = default_target() if target is None else target
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    return target


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


def avx2_panel_bytes(l2_panel: int, l3: int, threads: int) -> int:
    """The panel of ``panel4_c32``, whose second sweep reads the panel back from L3.

    Parameters
    ----------
    l2_panel : int
        The L2 panel (:func:`panel_bytes` of ``panel_w4``), the least panel.
    l3 : int
        Bytes of L3.
    threads : int
        Threads that may hold a panel each.

    Returns
    -------
    int
        :data:`PANEL_MAX_BYTES_AVX2` where the panels of all ``threads`` fit in half of the
        L3, less where they do not, never less than ``l2_panel``.
    """
    share = l3 // (2 * max(1, threads))
    return max(l2_panel, min(PANEL_MAX_BYTES_AVX2, share))


@functools.cache
def panel_bytes(kernel: str) -> int:
    """The panel budget of the panel kernel ``kernel`` on this machine, read at the first call.

    ``panel_w4``: 0.7 of one core's L2 (1 MiB when sysfs does not say), per thread.
    ``panel4_c32``: :func:`avx2_panel_bytes` for the L3 and Numba's largest thread count.
    """
    l2_panel = int(0.7 * _cache_bytes(2, 1 << 20))
    if PANEL_CACHE[kernel] == "L2":
        return l2_panel
    import numba

    return avx2_panel_bytes(l2_panel, _cache_bytes(3, 16 << 20), numba.config.NUMBA_NUM_THREADS)


def _resolve(spec: str, m: int):
    """The kernel named by ``spec`` (a :data:`TABLE` kernel) for width ``m``; a panel kernel
    comes with its budget bound (``functools.partial``), so that every kernel takes the four
    arguments of ``hvp_fused``."""
    module, name = spec.format(m=m).split(".")
    package = "rmt.kernels._generated." if module.endswith("_small") else "rmt.kernels."
    kernel = getattr(importlib.import_module(package + module), name)
    if name in PANEL_CACHE:
        bound = functools.partial(kernel, panel_bytes=panel_bytes(name))
        bound.__name__ = name
        return bound
    return kernel


def _lookup(equation: str, path: str, situations, m: int):
    """The first row of ``situations`` on ``path``, then on ``any``, that names a kernel."""
    for where in (path, "any"):
        for situation in situations:
            row = TABLE.get((equation, where, situation))
            if row is not None:
                if row[0] is None:  # defers to the rows of every path
                    break
                return _resolve(row[0], m)
    width = "m <= 4" if m <= 4 else "m > 4"
    return _resolve(TABLE[(equation, "any", width)][0], m)


@functools.cache
def _hvp_kernel(m: int, columns: int, path: str, float32: bool):
    situations = []
    if float32:
        situations.append(f"{columns} columns, float32 X")
    situations.append(f"{columns} columns")
    if columns == m:
        situations.append(f"1 vector, m = {m}")
    return _lookup("hvp", path, situations, m)


def hvp_kernel(m: int, columns: int | None = None, target: str | None = None, dtype=np.float64):
    """The Hessian-product kernel for width ``m`` and a block of ``columns`` columns.

    Parameters
    ----------
    m : int
        Width of the network (neurons).
    columns : int, optional
        ``b m`` for a block of ``b`` vectors; ``m`` (one vector) by default.
    target : str, optional
        SIMD path, one of :data:`TARGETS`; :func:`default_target` by default.
    dtype : dtype
        That of ``X`` (float64, or float32 storage).

    Returns
    -------
    callable
        ``kernel(X, D, Vt, n_chunks) -> sum_i x_i r_i^T`` (``Vt.shape``), as
        ``hessian.hvp_fused``: the row of :data:`TABLE` for the path and the situation.
    """
    columns = int(m if columns is None else columns)
    float32 = np.dtype(dtype) == np.float32
    return _hvp_kernel(int(m), columns, resolve_target(target), float32)


@functools.cache
def _width_kernel(equation: str, m: int, path: str):
    """The kernel of an equation whose rows depend on the width alone (``step``, ``loss``,
    ``response``, ``forward``)."""
    return _lookup(equation, path, [f"m = {m}"], m)


def step_kernel(equation: str, m: int, target: str | None = None):
    """The kernel of a descent step for width ``m``.

    Parameters
    ----------
    equation : str
        ``"step"`` (loss and gradient sums) or ``"loss"`` (the loss alone).
    m : int
        Width of the network.
    target : str, optional
        SIMD path; :func:`default_target` by default.

    Returns
    -------
    callable
        ``kernel(X, Wt, y, a, act_code, loss_code, huber_delta, n_chunks)``, as
        ``descent.loss_grad_generic`` or ``descent.loss_generic``.
    """
    return _width_kernel(equation, int(m), resolve_target(target))


def response_kernel(m: int, target: str | None = None):
    """The kernel of a row of the DMFT responses for width ``m`` (docs/theory.md (D3)).

    Parameters
    ----------
    m : int
        Width of the network.
    target : str, optional
        SIMD path; :func:`default_target` by default.

    Returns
    -------
    callable
        ``kernel(KT, J, t, out)``, as ``rmt.kernels.dmft.response_row``.
    """
    return _width_kernel("response", int(m), resolve_target(target))


def forward_kernel(m: int, target: str | None = None):
    """The kernel of the per-sample process run forward at solved kernels, for width ``m``
    (docs/theory.md eq. (D1), section 8.10).

    Parameters
    ----------
    m : int
        Width of the network.
    target : str, optional
        SIMD path; :func:`default_target` by default.

    Returns
    -------
    callable
        ``kernel(act, loss_code, huber_delta, a, Rw, M, Z, Y, X, c, widths, slot, out)``, as
        ``rmt.kernels.dmft.forward_process``.
    """
    return _width_kernel("forward", int(m), resolve_target(target))
