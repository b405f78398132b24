"""Shared helpers of the benchmark scripts: thread setup, load from other processes, timing.

The machine is small and shared (see PERFORMANCE.md of the shared guides), so every benchmark

* sets its thread counts explicitly (:func:`set_threads`) and prints them;
* times the contenders round-robin, so that their ratios are measured under the same load
  (:func:`time_round_robin`);
* records the CPU time that *other* processes used during the measurement
  (:class:`LoadMeter`), prints it, and reruns when it is high (:func:`measure`).

Only numpy and the standard library are needed at import; numba, threadpoolctl and rmt are
imported lazily.
"""

from __future__ import annotations

import os
import resource
import statistics
import time

#: other processes' load (in cores) above which :func:`measure` reruns
HIGH_LOAD = 0.3


def set_threads(n: int) -> dict:
    """Set numba's and the BLAS libraries' thread counts to ``n``; return what is in force.

    First :func:`rmt.configure_threads` (OpenMP wait policy and spin count, unless the user set
    them), since ``numba.set_num_threads`` starts Numba's OpenMP layer, which reads them once.
    ``rmt.set_num_threads(n)`` fixes the count of the library's calls too (no choice from the
    load, see ``rmt/kernels/threads.py``), so that a benchmark runs on the threads it reports.  The BLAS
    limit is process-wide (threadpoolctl's ``threadpool_limits`` is kept alive on the returned
    dict under ``"_limiter"``).
    """
    import numba
    from threadpoolctl import threadpool_info, threadpool_limits

    import rmt

    rmt.configure_threads()
    numba.set_num_threads(n)
    rmt.set_num_threads(n)
    limiter = threadpool_limits(limits=n)
    blas = sorted({(p["internal_api"], p["num_threads"]) for p in threadpool_info()})
    return {"numba": numba.get_num_threads(), "blas": blas, "_limiter": limiter}


def _busy_seconds() -> float:
    """CPU seconds spent by all processes since boot (``/proc/stat``, all but idle/iowait)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    ticks = [int(x) for x in fields]
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU seconds of this process and its waited-for children (``getrusage``)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


class LoadMeter:
    """Context manager: CPU used by *other* processes during the block, in cores.

    ``other_load = (busy CPU time of the machine - this process's CPU time) / wall time``.
    The machine's figure comes from ``/proc/stat`` (clock ticks), so values of a few
    hundredths of a core are noise.
    """

    def __enter__(self):
        self._t0 = time.perf_counter()
        self._busy0 = _busy_seconds()
        self._own0 = _own_seconds()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._t0
        busy = _busy_seconds() - self._busy0
        own = _own_seconds() - self._own0
        self.other_load = max(0.0, (busy - own) / self.wall) if self.wall > 0 else 0.0
        return False


SETTLE = 0.3  # seconds of pause before each contender's turn (see time_round_robin)


def time_round_robin(funcs: dict, repeats: int) -> dict:
    """Median wall time of each callable in ``funcs``, timed in turn ``repeats`` times.

    Round-robin order makes the contenders share the same background load, which keeps their
    ratios meaningful on a noisy machine.  Each turn starts with a pause of ``SETTLE`` seconds
    and one untimed call: the thread pools of the previous contender (OpenBLAS spins for about
    0.1 s after a call, Numba's OpenMP pool too unless ``rmt.configure_threads`` made it
    passive) would otherwise be charged to whoever runs next (measured: a 19.5 ms fused
    product read 32-34 ms right after a numpy BLAS call).  Returns ``{name: {"median", "min", "times"}}``.
    """
    times = {name: [] for name in funcs}
    for _ in range(repeats):
        for name, f in funcs.items():
            time.sleep(SETTLE)  # let the previous contender's spinning threads go to sleep
            f()
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return {
        name: {"median": statistics.median(ts), "min": min(ts), "times": ts}
        for name, ts in times.items()
    }


def measure(funcs: dict, repeats: int = 7, max_tries: int = 3, high_load: float = HIGH_LOAD):
    """:func:`time_round_robin` under a :class:`LoadMeter`, rerun while others' load is high.

    Returns ``(timings, other_load, tries)`` of the try with the lowest load from other
    processes.  Each callable should have been called once before (compilation, caches).
    """
    best = None
    for tries in range(1, max_tries + 1):
        with LoadMeter() as meter:
            timings = time_round_robin(funcs, repeats)
        if best is None or meter.other_load < best[1]:
            best = (timings, meter.other_load, tries)
        if meter.other_load <= high_load:
            break
    return best


def wait_for_quiet(threshold: float = HIGH_LOAD, timeout: float = 300.0, probe: float = 3.0):
    """Wait (up to ``timeout`` s) until other processes use at most ``threshold`` cores.

    Probes the load for ``probe`` seconds at a time; returns the last probe's load, which is
    above ``threshold`` when the wait timed out.
    """
    deadline = time.perf_counter() + timeout
    while True:
        with LoadMeter() as meter:
            time.sleep(probe)
        if meter.other_load <= threshold or time.perf_counter() >= deadline:
            return meter.other_load


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds with one decimal."""
    return f"{1e3 * seconds:7.1f} ms"


def cpu_info() -> dict:
    """CPU model (lscpu "Model name") and the widest SIMD among avx512f / avx2 (with the
    codegen where an emulation script set it), for the line that names the CPU beside every
    figure."""
    import subprocess

    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                      if ln.startswith("Model name")), model)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        flags = []
    simd = (
        "avx512f (512-bit)" if "avx512f" in flags else "avx2 (256-bit)" if "avx2" in flags else "?"
    )
    # the codegen of emulate_avx2.py / emulate_128.py is not the CPU's own
    try:
        from emulate_128 import PREFER_128
    except ImportError:  # imported as benchmarks._util
        from benchmarks.emulate_128 import PREFER_128
    if PREFER_128 in os.environ.get("NUMBA_CPU_FEATURES", ""):
        simd += "; Numba code for 128-bit vectors (emulate_128.py)"
    elif os.environ.get("NUMBA_CPU_NAME"):
        simd += f"; Numba code for {os.environ['NUMBA_CPU_NAME']}"
    # "AMD EPYC" names Zen 3 and Zen 4 alike: the family and model tell them apart
    family = _cpuinfo_field("cpu family")
    number = _cpuinfo_field("model")
    if family and number:
        model = f"{model} (family {family} model {number})"
    return {"model": model, "simd": simd}


def _cpuinfo_field(name: str) -> str:
    """The first value of ``name`` in /proc/cpuinfo, or "" where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                key, _, value = ln.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return ""


#: a square DGEMM of this size, timed in a run beside the kernels: the machine's compute
#: ceiling (DGEMM runs at the FMA peak)
GEMM_N = 2000
GEMM_NAME = f"DGEMM {GEMM_N}^3 (compute ceiling)"


def peak_share(flops: float, seconds: float, gemm_rate: float) -> float:
    """The share of the in-run DGEMM rate (flop/s; DGEMM runs at the FMA peak) that doing
    ``flops`` in ``seconds`` takes: above 1, no kernel can do it in that time on this machine."""
    return flops / seconds / gemm_rate


def time_runs(funcs: dict, run: int, repeats: int) -> dict:
    """Median seconds per call of each callable, in runs of ``run`` consecutive calls (as a
    solver or the trainer makes them), the contenders taking turns (round robin, so that they
    share the background load), each turn after a 0.3 s pause and one untimed call."""
    per_call = {name: [] for name in funcs}
    for _ in range(repeats):
        for name, f in funcs.items():
            time.sleep(0.3)  # let the previous contender's spinning threads sleep
            f()
            t0 = time.perf_counter()
            for _ in range(run):
                f()
            per_call[name].append((time.perf_counter() - t0) / run)
    return {name: statistics.median(ts) for name, ts in per_call.items()}
