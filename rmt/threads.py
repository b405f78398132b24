"""How Numba's OpenMP threads wait between kernels, set explicitly: :func:`configure_threads`.

Numba's parallel kernels run on libgomp's thread pool (Numba's ``omp`` threading layer).  By
default its threads spin for a few milliseconds after each kernel (``ACTIVE``: for ever), and
on a machine with few cores the spinning threads slow the LAPACK/OpenBLAS calls that follow.  A
thread that sleeps at once, on the other hand, takes tens of microseconds to wake, and an
iterative solver starts several parallel kernels per step.  ``OMP_WAIT_POLICY=PASSIVE`` with ``GOMP_SPINCOUNT=10000``
(a short spin, then sleep) keeps the kernels of one step close together and leaves BLAS alone
(``benchmarks/bench_wakeup.py``; figures in ``benchmarks/RESULTS.md``, "Thread wake-up").

When a setting takes effect.  libgomp reads both variables once, when it is loaded into the
process.  Numba loads its threading layer, and with it libgomp, lazily: at the first parallel
kernel (or the first ``numba.set_num_threads``/``get_num_threads``), not at ``import numba`` or
``import rmt`` (checked: ``/proc/self/maps`` holds no libgomp after ``import rmt``).  So a call
of :func:`configure_threads` anywhere before the first parallel kernel is enough, and ``import
rmt`` changes no process-wide state.  After that, the running threads keep their policy: the
call then sets nothing, warns once and says so in its result (``too_late``).  A value that the
user has set in the environment always wins.  With Numba's ``tbb`` or ``workqueue`` layers the
variables have no effect (they only concern libgomp).
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass, field

#: the wait policies that libgomp accepts
WAIT_POLICIES = ("PASSIVE", "ACTIVE")

_warned_too_late = False


@dataclass(frozen=True)
class ThreadSettings:
    """What :func:`configure_threads` did.

    ``applied``: the environment variables it set (name -> value); ``kept``: those it left as
    the user had set them; ``too_late``: whether Numba's OpenMP layer (libgomp) had already
    started, so that nothing was set; ``numba_threads``: Numba's thread count after the call
    when ``numba_threads`` was given, else ``None``.
    """

    applied: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)
    too_late: bool = False
    numba_threads: int | None = None


def openmp_started() -> bool:
    """Whether Numba's threading layer has started, or libgomp is already loaded (by anyone).

    Either way libgomp has read its environment, and a new setting would not take effect.
    """
    from numba.np.ufunc import parallel

    if getattr(parallel, "_is_initialized", False):
        return True
    try:
        with open("/proc/self/maps") as f:
            return any(os.path.basename(line.split()[-1]).startswith("libgomp.so") for line in f)
    except (OSError, IndexError):  # no /proc (not Linux): only Numba's own flag is known
        return False


def _requested(wait_policy, spin_count) -> dict:
    """The variables asked for, validated, as strings (``None`` leaves a variable alone)."""
    wanted = {}
    if wait_policy is not None:
        if not isinstance(wait_policy, str):
            raise TypeError(f"wait_policy must be a str or None, got {type(wait_policy).__name__}")
        if wait_policy.upper() not in WAIT_POLICIES:
            raise ValueError(f"wait_policy must be one of {WAIT_POLICIES}, got {wait_policy!r}")
        wanted["OMP_WAIT_POLICY"] = wait_policy.upper()
    if spin_count is not None:
        if isinstance(spin_count, bool) or not isinstance(spin_count, int):
            raise TypeError(f"spin_count must be an int or None, got {type(spin_count).__name__}")
        if spin_count < 0:
            raise ValueError(f"spin_count must be >= 0, got {spin_count}")
        wanted["GOMP_SPINCOUNT"] = str(spin_count)
    return wanted


def _check_numba_threads(n) -> None:
    """Raise unless ``n`` is ``None`` or an int with ``1 <= n <= NUMBA_NUM_THREADS``."""
    import numba

    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"numba_threads must be an int or None, got {type(n).__name__}")
    top = numba.config.NUMBA_NUM_THREADS
    if not 1 <= n <= top:
        raise ValueError(f"numba_threads must be in 1..{top} (NUMBA_NUM_THREADS), got {n}")


def _set_numba_threads(n) -> int | None:
    """``numba.set_num_threads(n)`` (``None``: nothing); Numba's thread count afterwards."""
    if n is None:
        return None
    import numba

    numba.set_num_threads(n)
    return numba.get_num_threads()


def configure_threads(
    wait_policy: str | None = "PASSIVE", spin_count: int | None = 10000, *, numba_threads=None
) -> ThreadSettings:
    """Set how Numba's OpenMP threads wait between kernels; call it before the first kernel.

    Sets ``OMP_WAIT_POLICY=wait_policy`` and ``GOMP_SPINCOUNT=spin_count`` in ``os.environ``,
    each only if the user has not set it and only if libgomp has not started yet (see the
    module docstring); ``None`` leaves a variable alone.  When it has started, nothing is set,
    a ``RuntimeWarning`` is issued once per process and the result has ``too_late=True``.
    ``numba_threads``, if given, is passed to ``numba.set_num_threads`` afterwards (which
    starts the thread pool with the settings just made).  The CLI and ``rmt.demo`` call it
    with the defaults; library users call it themselves, first thing.
    """
    global _warned_too_late
    wanted = _requested(wait_policy, spin_count)
    _check_numba_threads(numba_threads)
    kept = {k: os.environ[k] for k in wanted if k in os.environ}
    todo = {k: v for k, v in wanted.items() if k not in kept}
    too_late = openmp_started()
    if too_late:
        if todo and not _warned_too_late:
            _warned_too_late = True
            warnings.warn(
                f"configure_threads: Numba's OpenMP threads have already started; {todo} "
                "would take effect only in a new process (call it before the first kernel)",
                RuntimeWarning,
                stacklevel=2,
            )
        todo = {}
    os.environ.update(todo)
    threads = _set_numba_threads(numba_threads)
    return ThreadSettings(applied=todo, kept=kept, too_late=too_late, numba_threads=threads)


_BLAS_CONTROLLER = None


def single_threaded_blas():
    """A context in which BLAS (OpenBLAS, MKL, ...) runs on one thread (``threadpoolctl``).

    OpenBLAS threads spin for a while after each call.  On a machine with few cores they then
    hold the cores that a Numba parallel kernel which follows needs: the first pass over the
    nodes after the BLAS products of building an m = 4 law took 24-61 ms instead of 0.5 ms
    (Zen 3, 2 cores; benchmarks/HISTORY.md, "Zen 3").  Where the dense work is small (thin products,
    ``eigh`` of small matrices), one thread costs less than that.  The controller is made once
    (it lists the loaded libraries); entering the context costs about 20 us."""
    global _BLAS_CONTROLLER
    if _BLAS_CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER = ThreadpoolController()
    return _BLAS_CONTROLLER.limit(limits=1, user_api="blas")


def with_single_threaded_blas(func):
    """Decorator: ``func`` runs inside :func:`single_threaded_blas`."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with single_threaded_blas():
            return func(*args, **kwargs)

    return wrapper
