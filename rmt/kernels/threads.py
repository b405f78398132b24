"""Numba's threads: how many a call runs on (:func:`adaptive_threads`), how they wait.

**How many threads a call runs on.**  The parallel kernels split their work statically over
Numba's threads, and one step of gradient descent or of Lanczos starts several short parallel
regions, each ending at a barrier.  A region therefore runs at the speed of its slowest thread,
and a thread that shares its core with another busy process loses whole scheduler time slices
at each barrier, and a call next to a busy process can run several times slower on all
threads than on fewer (``benchmarks/bench_contention.py``; the figures are in
``benchmarks/RESULTS.md``, "Runs next to a CPU-bound process").  So the long-running public calls of ``rmt``
(``gradient_descent``, ``extreme_eigs``, ``spectral_density``, the products of a Hessian, the
experiments, the DMFT solvers) are wrapped in :func:`adaptive_threads`, which sets Numba's
thread count for the call from the CPUs that are idle when it starts, and restores the caller's
count when it returns:

    threads = clip(cpus - others, 1, usable)

``usable`` is the least of Numba's count at the call (``numba.get_num_threads()``: a count the
caller has lowered is kept as a ceiling), ``numba.config.NUMBA_NUM_THREADS`` and ``cpus``, the
CPUs this process may run on (``os.sched_getaffinity``).  ``others`` is the number of runnable
threads of other processes: the median of three reads, a short sleep apart, of the kernel's
count of runnable threads (the fourth field of ``/proc/loadavg``, the counter that
``procs_running`` in ``/proc/stat`` shows too, cheaper to read), less the caller and this
process's own pool threads (OpenMP and BLAS workers still spinning after a previous call, seen
as running in ``/proc/self/task``).  Other threads are put first on the machine's CPUs outside
this process's affinity (a cluster job pinned to some cores does not count the other jobs on
theirs).  Where the count cannot be read (not Linux), a call keeps Numba's count.

A choice reads the run queue three times, two short sleeps apart, and is reused for
:data:`DECISION_TTL` (0.5 s), so short calls in a loop do not repeat it.  A decorated
call nested in another keeps the outer count, except that a choice older than ``DECISION_TTL``
is taken again at its entry: a sweep of many points follows the load.  The count is chosen when
a call starts; a process that starts later is not seen until the next choice.  Results do not
depend on the count: the kernels sum fixed chunks in a fixed order.

To fix the count: ``rmt.set_num_threads(n)`` (``None``: back to the default), or the
environment variable ``RMT_NUM_THREADS=n`` (``auto`` or empty: the automatic choice);
:func:`choose_threads` says what a call starting now would use.

**How the threads wait between kernels: :func:`configure_threads`.**  Numba's parallel kernels
run on libgomp's thread pool (Numba's ``omp`` threading layer).  By default its threads spin for
a few milliseconds after each kernel (``ACTIVE``: for ever), and on a machine with few cores the
spinning threads slow the LAPACK/OpenBLAS calls that follow.  A thread that sleeps at once, on
the other hand, takes tens of microseconds to wake, and an iterative solver starts several
parallel kernels per step.  ``OMP_WAIT_POLICY=PASSIVE`` with ``GOMP_SPINCOUNT=10000`` (a short
spin, then sleep) keeps the kernels of one step close together and leaves BLAS alone
(``benchmarks/bench_wakeup.py``; figures in ``benchmarks/RESULTS.md``, "Thread wake-up").

When a setting takes effect.  libgomp reads both variables once, when it is loaded into the
process.  Numba loads its threading layer, and with it libgomp, lazily: at the first parallel
kernel (or the first ``numba.set_num_threads``/``get_num_threads``, which the first decorated
call makes), not at ``import numba`` or ``import rmt`` (checked: ``/proc/self/maps`` holds no
libgomp after ``import rmt``).  So a call of :func:`configure_threads` anywhere before the
first parallel kernel is enough, and ``import rmt`` changes no process-wide state.  After that,
the running threads keep their policy: the call then sets nothing, warns once and says so in
its result (``too_late``).  A value that the user has set in the environment always wins.  With
Numba's ``tbb`` or ``workqueue`` layers the variables have no effect (they only concern libgomp).
"""

from __future__ import annotations

import functools
import os
import statistics
import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

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
    starts the thread pool with the settings just made).  The CLI and ``rmt.app.demo`` call it
    with the defaults; library users call it themselves, first thing.

    Examples
    --------
    First thing in a program, before any kernel runs (it changes the process environment, so
    it is not run as a test here):

    >>> import rmt
    >>> settings = rmt.configure_threads()  # doctest: +SKIP
    >>> settings.too_late  # doctest: +SKIP
    False
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
    hold the cores that a Numba parallel kernel which follows needs (the first pass over a
    law's nodes after the BLAS products that built it waits for them; benchmarks/RESULTS.md).
    Where the dense work is small (thin products, ``eigh`` of small matrices), one thread costs
    less than that.  The controller is made once (it lists the loaded libraries)."""
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


# ---------------------------------------------------------------------------------------------
# the thread count of a call, chosen from the cores that are idle when it starts
# ---------------------------------------------------------------------------------------------
#: the environment variable that fixes the thread count of the library's calls
ENV_VAR = "RMT_NUM_THREADS"
#: seconds for which an automatic choice is reused (by later calls, and by nested calls)
DECISION_TTL = 0.5
#: reads of the run queue per choice (their median is used), and the pause between reads
N_READS = 3
READ_GAP = 5e-5
#: where Linux counts the runnable threads of the machine (fourth field: ``running/total``)
RUNQUEUE_FILE = "/proc/loadavg"

_override: int | None = None  # set by set_num_threads
_cache = [-1.0, None]  # [time.monotonic() of the choice, (cpus, idle CPUs) then]
_local = threading.local()


def _check_count(n, name) -> int:
    """``n`` as an int in ``1..NUMBA_NUM_THREADS``, else a one-line ``TypeError``/``ValueError``."""
    import numba

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name} must be an int or None, got {type(n).__name__}")
    top = numba.config.NUMBA_NUM_THREADS
    if not 1 <= n <= top:
        raise ValueError(f"{name} must be in 1..{top} (NUMBA_NUM_THREADS), got {n}")
    return int(n)


def set_num_threads(n: int | None) -> int | None:
    """Fix the Numba thread count of ``rmt``'s calls, or return to the default (``None``).

    Parameters
    ----------
    n : int or None
        ``1 <= n <= numba.config.NUMBA_NUM_THREADS``: every decorated call of the library runs
        its kernels on ``n`` threads, whatever the load.  ``None``: the default again, which is
        ``RMT_NUM_THREADS`` when that is set, else the automatic choice of
        :func:`choose_threads`.

    Returns
    -------
    int or None
        The previous setting, so that ``set_num_threads(set_num_threads(1))`` restores it.

    Examples
    --------
    >>> import rmt
    >>> previous = rmt.set_num_threads(1)
    >>> rmt.choose_threads()
    1
    >>> rmt.set_num_threads(previous)
    1
    """
    global _override
    previous = _override
    _override = None if n is None else _check_count(n, "n")
    return previous


def _env_threads() -> int | None:
    """``RMT_NUM_THREADS`` as an int (``None`` when unset, empty or ``auto``)."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if raw == "" or raw.lower() == "auto":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_VAR} must be an integer or 'auto', got {raw!r}") from None
    return _check_count(value, ENV_VAR)


def _read_runqueue() -> str | None:
    """The text of :data:`RUNQUEUE_FILE`, or ``None`` where it cannot be read (not Linux)."""
    try:
        with open(RUNQUEUE_FILE, "rb") as f:
            return f.read().decode("ascii", "replace")
    except OSError:
        return None


def _runnable(text: str | None) -> int | None:
    """The number of runnable threads of the machine in ``/proc/loadavg``'s text (the
    ``running`` of its fourth field ``running/total``), or ``None``."""
    try:
        return int(text.split()[3].split("/")[0])
    except (AttributeError, IndexError, ValueError):
        return None


def _own_pool_running() -> int:
    """Threads of this process, other than Python's, that are running now: Numba's OpenMP
    workers and BLAS threads still spinning after a previous call.  They are this process's
    own and will be free for the next kernel, so they are not counted as others' load.  (A
    running Python thread other than the caller is counted as load: it competes for cores.)"""
    python = {t.native_id for t in threading.enumerate()}
    running = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tids:
        if int(tid) in python:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # the thread has just ended
            continue
        if stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"R":
            running += 1
    return running


def _others_running() -> float | None:
    """Runnable threads of other processes (and other Python threads of this one), or ``None``
    where the run queue cannot be read.

    The median of :data:`N_READS` samples, :data:`READ_GAP` s apart.  A sample is the run
    queue less the caller and this process's own pool threads; when pool threads are running,
    the run queue is read before and after them, and a sample whose two reads differ (a pool
    thread went to sleep in between) is read again, up to ``2 * N_READS`` tries in all.
    """
    samples, unsure = [], []
    for _ in range(2 * N_READS):
        if (samples or unsure) and READ_GAP > 0:
            time.sleep(READ_GAP)
        runnable = _runnable(_read_runqueue())
        if runnable is None:
            return None
        if runnable > 1:  # more than the caller: are some of them our own pool threads?
            own = _own_pool_running()
            if own:
                runnable -= own
                if _runnable(_read_runqueue()) != runnable + own:
                    unsure.append(max(0, runnable - 1))
                    continue
        samples.append(max(0, runnable - 1))
        if len(samples) == N_READS:
            break
    return statistics.median(samples or unsure)


def _machine() -> tuple[int, int]:
    """``(cpus, online)``: the CPUs this process may run on, and the machine's online CPUs."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        online = os.sysconf("SC_NPROCESSORS_ONLN")
    except (AttributeError, ValueError, OSError):
        online = cpus
    return cpus or 1, max(online or 1, cpus or 1)


def _idle_cpus() -> tuple[int, int | None]:
    """``(cpus, idle)``: this process's CPUs, and how many of them no other runnable thread
    needs now (``None``: unknown).

    Other threads are put on the machine's CPUs outside this process's affinity first (on a
    cluster node, the other jobs' own cores), and the rest on ours.  Reused for
    :data:`DECISION_TTL` seconds.
    """
    if time.monotonic() - _cache[0] < DECISION_TTL:
        return _cache[1]
    cpus, online = _machine()
    others = _others_running()
    idle = None if others is None else int(cpus - max(0.0, others - (online - cpus)))
    _cache[0], _cache[1] = time.monotonic(), (cpus, idle)
    return cpus, idle


def choose_threads(limit: int | None = None) -> int:
    """The Numba thread count that a call of ``rmt`` starting now runs on.

    ``set_num_threads(n)``, else ``RMT_NUM_THREADS``, fixes it.  Otherwise it is chosen from the
    load, at most ``limit`` (default: Numba's current count), ``numba.config.NUMBA_NUM_THREADS``
    and this process's CPUs (``os.sched_getaffinity``)::

        threads = clip(cpus - others, 1, usable)

    with ``others`` the runnable threads of other processes (module docstring).  Where the run
    queue cannot be read (not Linux) it is ``usable``, Numba's default.

    Parameters
    ----------
    limit : int, optional
        The most threads to use; default ``numba.get_num_threads()``.

    Returns
    -------
    int

    Examples
    --------
    >>> import numba
    >>> import rmt
    >>> 1 <= rmt.choose_threads() <= numba.config.NUMBA_NUM_THREADS
    True
    """
    import numba

    fixed = _override if _override is not None else _env_threads()
    if fixed is not None:
        return fixed
    if limit is None:
        limit = numba.get_num_threads()
    usable = min(limit, numba.config.NUMBA_NUM_THREADS)
    if usable <= 1:
        return 1
    cpus, idle = _idle_cpus()
    usable = max(1, min(usable, cpus))
    return usable if idle is None else max(1, min(idle, usable))


def _enter() -> None:
    """Enter a decorated call: the outermost one saves Numba's count and sets its choice."""
    import numba

    depth = getattr(_local, "depth", 0)
    if depth == 0:
        _local.caller = numba.get_num_threads()
        _local.chosen_at = time.monotonic()
        _set_current(choose_threads(_local.caller))
    elif time.monotonic() - _local.chosen_at >= DECISION_TTL:
        # a long outer call (a sweep, a bisection): its nested calls follow the load
        _local.chosen_at = time.monotonic()
        _set_current(choose_threads(_local.caller))
    _local.depth = depth + 1


def _set_current(k: int) -> None:
    """``numba.set_num_threads(k)`` unless ``k`` is already in force."""
    import numba

    if k != numba.get_num_threads():
        numba.set_num_threads(k)


def _exit() -> None:
    """Leave a decorated call: the outermost one restores the caller's count."""
    _local.depth -= 1
    if _local.depth == 0:
        _set_current(_local.caller)


class adaptive_threads:
    """Numba's thread count chosen by :func:`choose_threads` for a call, restored afterwards.

    A decorator (``@adaptive_threads``) or a context manager (``with adaptive_threads():``).
    The outermost decorated call of a thread chooses and, when it returns (or raises), restores
    the count its caller had; nested decorated calls keep it, except that a choice older than
    :data:`DECISION_TTL` is taken again at their entry, so that a long sweep follows the load.
    A choice (three reads of the run queue) is reused for :data:`DECISION_TTL` s, so short
    calls in a loop do not repeat it.

    Parameters
    ----------
    func : callable, optional
        The function to wrap; without it, a context manager.

    Examples
    --------
    >>> import numba
    >>> import rmt
    >>> @rmt.adaptive_threads
    ... def kernel_threads():
    ...     return numba.get_num_threads()
    >>> 1 <= kernel_threads() <= numba.config.NUMBA_NUM_THREADS
    True
    """

    def __new__(cls, func=None):
        if func is None:
            return super().__new__(cls)
        if not callable(func):
            raise TypeError(f"adaptive_threads wraps a callable, got {type(func).__name__}")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            _enter()
            try:
                return func(*args, **kwargs)
            finally:
                _exit()

        return wrapper

    def __enter__(self):
        _enter()
        return self

    def __exit__(self, *exc):
        _exit()
        return False
