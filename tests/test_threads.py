"""``rmt/kernels/threads.py``: the wait policy of Numba's threads, and the thread count of a call.

``rmt.configure_threads`` in fresh interpreters (libgomp reads its environment once per
process).  Each case runs in a subprocess started without ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT``
(unless the case sets them, as a user would): ``import rmt`` leaves the environment alone, the
call sets what is unset, a user's value wins, a call after a parallel kernel sets nothing and
says it was too late, and a call made after ``import rmt`` reaches libgomp (an ``ACTIVE``
thread pool burns CPU while the main thread sleeps, a ``PASSIVE`` one does not).

``rmt.adaptive_threads``: the count chosen from a faked run queue against its closed form, the
overrides (``RMT_NUM_THREADS``, ``rmt.set_num_threads``), the count restored after a call,
nested calls; and (``slow``) gradient descent next to a busy process.
"""

import json
import os
import subprocess
import sys
import threading
import time

import numba
import numpy as np
import pytest

import rmt
from rmt.kernels import threads

from .conftest import ALL_THREADS

VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

PRELUDE = """
import dataclasses, json, os, resource, time, warnings
import numpy as np
import rmt
from rmt.kernels.lanczos import gaussian_mixture_density

def kernel():
    # a cached parallel (prange) leaf kernel of rmt: starts Numba's OpenMP layer
    gaussian_mixture_density(np.zeros(3), np.ones(3), np.zeros(64), 1.0)

def report(result=None, **extra):
    out = {"env": {k: os.environ.get(k) for k in %r}, **extra}
    if result is not None:
        out["result"] = dataclasses.asdict(result)
    print(json.dumps(out))
""" % (VARIABLES,)


def run_child(body: str, **env) -> dict:
    """Run ``PRELUDE + body`` in a fresh interpreter; the JSON of its last line of output."""
    child_env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    child_env.update(env)
    out = subprocess.run(
        [sys.executable, "-c", PRELUDE + body],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_sets_nothing_and_the_call_sets_unset_variables():
    body = """
before = {k: os.environ.get(k) for k in %r}
started = rmt.kernels.threads.openmp_started()
report(rmt.configure_threads(), before=before, started=started)
""" % (VARIABLES,)
    out = run_child(body)
    assert out["before"] == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None}
    assert out["started"] is False  # import rmt runs no parallel kernel, loads no libgomp
    assert out["result"]["applied"] == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}
    assert out["result"]["kept"] == {} and out["result"]["too_late"] is False
    assert out["env"] == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}


def test_a_value_set_by_the_user_wins():
    body = "report(rmt.configure_threads(wait_policy='passive', spin_count=500))"
    out = run_child(body, OMP_WAIT_POLICY="ACTIVE")
    assert out["result"]["kept"] == {"OMP_WAIT_POLICY": "ACTIVE"}
    assert out["result"]["applied"] == {"GOMP_SPINCOUNT": "500"}
    assert out["env"] == {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "500"}


def test_a_call_after_a_parallel_kernel_is_too_late():
    body = """
kernel()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = rmt.configure_threads()
    second = rmt.configure_threads()
report(first, second=dataclasses.asdict(second),
       warnings=[str(w.message) for w in caught if w.category is RuntimeWarning])
"""
    out = run_child(body)
    for result in (out["result"], out["second"]):
        assert result["too_late"] is True and result["applied"] == {}
    assert out["env"] == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None}
    assert len(out["warnings"]) == 1 and "already started" in out["warnings"][0]


def test_numba_threads_is_applied_after_the_variables():
    out = run_child("report(rmt.configure_threads(numba_threads=1))")
    assert out["result"]["numba_threads"] == 1
    assert out["result"]["applied"] == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs: a pool with a worker")
def test_the_call_after_import_reaches_libgomp():
    """The worker thread of an ACTIVE pool spins while the main thread sleeps; a PASSIVE one
    with no spin sleeps at once: the process's CPU time over a 1 s sleep tells them apart
    (about 1 s against 0.1 ms on an idle machine; the bounds leave room for a loaded one)."""
    body = """
rmt.configure_threads(wait_policy=%r, spin_count=%r)
kernel()
kernel()
t0 = resource.getrusage(resource.RUSAGE_SELF)
time.sleep(1.0)
t1 = resource.getrusage(resource.RUSAGE_SELF)
report(cpu=(t1.ru_utime + t1.ru_stime) - (t0.ru_utime + t0.ru_stime))
"""
    active = run_child(body % ("ACTIVE", None), NUMBA_NUM_THREADS="2")
    passive = run_child(body % ("PASSIVE", 0), NUMBA_NUM_THREADS="2")
    assert active["env"]["OMP_WAIT_POLICY"] == "ACTIVE"
    assert active["cpu"] > 0.05, active
    assert passive["cpu"] < 0.01, passive


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"wait_policy": "LAZY"}, ValueError),
        ({"wait_policy": 1}, TypeError),
        ({"spin_count": -1}, ValueError),
        ({"spin_count": 1.5}, TypeError),
        ({"spin_count": True}, TypeError),
        ({"numba_threads": 0}, ValueError),
        ({"numba_threads": "2"}, TypeError),
    ],
)
def test_bad_arguments_raise_before_anything_is_set(kwargs, error, monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(error, match=next(iter(kwargs))):
        rmt.configure_threads(**kwargs)
    assert all(name not in os.environ for name in VARIABLES)


def test_a_network_law_is_built_with_blas_on_one_thread_and_restores_it(monkeypatch):
    """``SpikeLaw.from_network`` runs its BLAS on one thread (``single_threaded_blas``), as
    threadpoolctl reports from inside it, and leaves the thread count as it found it; the law
    is the same as one built with BLAS on two threads."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from rmt.freeprob import law as law_module

    seen = []
    perp = law_module._perp_factor

    def recording(*args, **kwargs):
        seen.extend(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
        return perp(*args, **kwargs)

    monkeypatch.setattr(law_module, "_perp_factor", recording)
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, "softplus", "huber", huber_delta=1.0)
    Q = np.array([[0.3, 0.1], [0.1, 0.2]])
    with threadpool_limits(limits=2, user_api="blas"):
        before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
        if set(before) != {2}:
            pytest.skip(f"BLAS does not run on two threads here ({before}): nothing to limit")
        law = rmt.SpikeLaw.from_network(model, net, Q, n_qmc=4096)
        inside, seen[:] = list(seen), []
        after = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
        raw = law_module.SpikeLaw.from_network.__func__.__wrapped__  # without the context
        two = raw(law_module.SpikeLaw, model, net, Q, n_qmc=4096)
    assert inside and set(inside) == {1}
    assert set(seen) == {2}  # the reference law was built on two threads
    assert after and set(after) == {2}
    for name in ("zhat", "D", "weights"):
        assert np.array_equal(getattr(law, name), getattr(two, name))


# ---------------------------------------------------------------------------------------------
# the thread count of a call: chosen from the idle CPUs, fixed by the user, restored afterwards
# ---------------------------------------------------------------------------------------------
def runqueue(running):
    """The text of ``/proc/loadavg`` with ``running`` runnable threads."""
    return f"0.52 0.48 0.40 {running}/231 4242\n"


@pytest.fixture
def fake_load(monkeypatch):
    """A machine of ``cpus`` CPUs (``online`` in all) whose run queue reads ``queue`` in turn
    (the last value repeats), with no pool thread of ours running; Numba at ``NUMBA_NUM_THREADS
    = top`` threads; no override, no cached choice.  Returns a setter."""
    reads = []

    def read():
        return runqueue(reads.pop(0) if len(reads) > 1 else reads[0])

    def setup(queue, cpus=2, online=None, top=None):
        reads[:] = list(queue) if isinstance(queue, (list, tuple)) else [queue]
        monkeypatch.setattr(threads, "_machine", lambda: (cpus, online or cpus))
        monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", top or cpus)
        threads._cache[0] = -1.0

    monkeypatch.setattr(threads, "_read_runqueue", read)
    monkeypatch.setattr(threads, "_own_pool_running", lambda: 0)
    monkeypatch.setattr(threads, "READ_GAP", 0.0)
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    previous = threads.set_num_threads(None)
    yield setup
    threads.set_num_threads(previous)
    threads._cache[0] = -1.0


def closed_form(cpus, online, running, usable):
    """``clip(cpus - others on our CPUs, 1, usable)`` with ``others = running - 1``."""
    others_here = max(0, (running - 1) - (online - cpus))
    return min(max(cpus - others_here, 1), usable)


@pytest.mark.parametrize("running, expected", [(1, 2), (2, 1), (3, 1), (5, 1)])
def test_two_cpus_one_thread_per_idle_cpu(fake_load, running, expected):
    fake_load(running)
    assert threads.choose_threads(limit=2) == expected


@pytest.mark.parametrize("cpus, online", [(4, 4), (8, 8), (4, 16)])
def test_the_choice_is_the_closed_form(fake_load, cpus, online):
    for running in range(1, online + 4):
        for limit in (1, 2, cpus):
            fake_load(running, cpus=cpus, online=online)
            got = threads.choose_threads(limit=limit)
            assert got == closed_form(cpus, online, running, limit), (running, limit)


def test_others_pinned_outside_our_cpus_leave_ours_idle(fake_load):
    fake_load(13, cpus=4, online=16)  # 12 others: all fit on the 12 CPUs that are not ours
    assert threads.choose_threads(limit=4) == 4
    fake_load(15, cpus=4, online=16)  # 14 others: two of them on ours
    assert threads.choose_threads(limit=4) == 2


def test_the_median_of_three_reads_ignores_one_passing_thread(fake_load):
    fake_load([4, 1, 1])
    assert threads.choose_threads(limit=2) == 2
    fake_load([1, 2, 2])
    assert threads.choose_threads(limit=2) == 1


def test_our_own_spinning_pool_threads_are_not_load(fake_load, monkeypatch):
    fake_load(3)  # the caller and two of our OpenMP workers still spinning
    monkeypatch.setattr(threads, "_own_pool_running", lambda: 2)
    assert threads.choose_threads(limit=2) == 2


def test_a_sample_during_which_a_pool_thread_stops_is_read_again(fake_load, monkeypatch):
    # one pool thread of ours is running at each look; the run queue goes 3 -> 2 (that thread
    # stopped between the two reads of a sample: unsure, dropped), then stays at 2 (the caller
    # and the spinning thread: no other)
    fake_load([3, 2, 2])
    monkeypatch.setattr(threads, "_own_pool_running", lambda: 1)
    assert threads._others_running() == 0
    assert threads.choose_threads(limit=2) == 2


def test_no_runqueue_keeps_numbas_count(fake_load, monkeypatch):
    fake_load(1, cpus=4)
    monkeypatch.setattr(threads, "_read_runqueue", lambda: None)
    assert threads.choose_threads(limit=3) == 3


def test_the_choice_is_reused_for_a_while(fake_load, monkeypatch):
    fake_load([2, 2, 2, 1])  # loaded at the first choice, idle afterwards
    assert threads.choose_threads(limit=2) == 1
    assert threads.choose_threads(limit=2) == 1  # cached
    threads._cache[0] -= threads.DECISION_TTL
    assert threads.choose_threads(limit=2) == 2


def test_the_real_runqueue_is_read_on_linux():
    if not os.path.exists(threads.RUNQUEUE_FILE):
        pytest.skip("no /proc/loadavg")
    assert threads._runnable(threads._read_runqueue()) >= 1
    assert threads._own_pool_running() >= 0
    cpus, online = threads._machine()
    assert 1 <= cpus <= online


def test_environment_variable_fixes_the_count(fake_load, monkeypatch):
    fake_load(5)  # loaded: the automatic choice would be 1
    monkeypatch.setenv("RMT_NUM_THREADS", "2")
    assert threads.choose_threads(limit=2) == 2
    for auto in ("auto", "", " AUTO "):
        monkeypatch.setenv("RMT_NUM_THREADS", auto)
        assert threads.choose_threads(limit=2) == 1


def test_set_num_threads_wins_over_the_environment_and_none_goes_back(fake_load, monkeypatch):
    fake_load(1)
    monkeypatch.setenv("RMT_NUM_THREADS", "2")
    assert threads.set_num_threads(1) is None
    assert threads.choose_threads(limit=2) == 1
    assert threads.set_num_threads(None) == 1
    assert threads.choose_threads(limit=2) == 2
    monkeypatch.delenv("RMT_NUM_THREADS")
    assert threads.choose_threads(limit=2) == 2


@pytest.mark.parametrize(
    "value, error, match",
    [
        (0, ValueError, r"n must be in 1\.\.2"),
        (3, ValueError, r"n must be in 1\.\.2"),
        ("2", TypeError, "n must be an int or None, got str"),
        (1.5, TypeError, "got float"),
        (True, TypeError, "got bool"),
    ],
)
def test_set_num_threads_rejects_bad_input_in_one_line(fake_load, value, error, match):
    fake_load(1)
    with pytest.raises(error, match=match) as info:
        rmt.set_num_threads(value)
    assert "\n" not in str(info.value)
    assert threads._override is None


@pytest.mark.parametrize("value", ["two", "1.5", "0", "3", "-1"])
def test_a_bad_environment_variable_fails_the_call_in_one_line(fake_load, monkeypatch, value):
    fake_load(1)
    monkeypatch.setenv("RMT_NUM_THREADS", value)
    with pytest.raises(ValueError, match="RMT_NUM_THREADS") as info:
        threads.choose_threads(limit=2)
    assert "\n" not in str(info.value)


two_threads = pytest.mark.skipif(ALL_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")


@pytest.fixture
def numba_at_two():
    """Numba at 2 threads for the test (a pytest-xdist worker runs on 1), restored after."""
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    yield
    numba.set_num_threads(before)


@rmt.adaptive_threads
def count_inside():
    return numba.get_num_threads()


@two_threads
def test_the_count_is_set_for_the_call_and_restored(fake_load, numba_at_two):
    fake_load(2)
    assert count_inside() == 1
    assert numba.get_num_threads() == 2
    fake_load(1)
    assert count_inside() == 2


@two_threads
def test_the_count_is_restored_when_the_call_raises(fake_load, numba_at_two):
    @rmt.adaptive_threads
    def fails():
        assert numba.get_num_threads() == 1
        raise KeyError("inside")

    fake_load(2)
    with pytest.raises(KeyError, match="inside"):
        fails()
    assert numba.get_num_threads() == 2
    assert threads._local.depth == 0


@two_threads
def test_a_lower_count_set_by_the_caller_is_a_ceiling(fake_load, numba_at_two):
    fake_load(1)  # idle: 2 threads would be chosen
    numba.set_num_threads(1)
    assert count_inside() == 1
    assert numba.get_num_threads() == 1


@two_threads
def test_nested_calls_keep_the_outer_choice(fake_load, numba_at_two):
    seen = []

    @rmt.adaptive_threads
    def outer():
        seen.append(numba.get_num_threads())
        fake_load(1)  # the load goes away: the inner calls do not look
        seen.append(count_inside())
        seen.append(numba.get_num_threads())
        with rmt.adaptive_threads():
            seen.append(numba.get_num_threads())
        return numba.get_num_threads()

    fake_load(2)
    assert outer() == 1
    assert seen == [1, 1, 1, 1]
    assert numba.get_num_threads() == 2


@two_threads
def test_a_nested_call_takes_a_stale_choice_again(fake_load, numba_at_two):
    @rmt.adaptive_threads
    def outer():
        first = numba.get_num_threads()
        fake_load(1)
        threads._local.chosen_at -= threads.DECISION_TTL  # the outer choice is old now
        return first, count_inside(), numba.get_num_threads()

    fake_load(2)
    assert outer() == (1, 2, 2)  # the sweep follows the load; the caller's count comes back
    assert numba.get_num_threads() == 2


@two_threads
def test_each_python_thread_decides_for_itself(fake_load, numba_at_two):
    fake_load(2)
    got = []
    started, release = threading.Event(), threading.Event()

    @rmt.adaptive_threads
    def hold():
        started.set()
        release.wait(10)
        return numba.get_num_threads()

    worker = threading.Thread(target=lambda: got.append(hold()))
    worker.start()
    started.wait(10)
    assert threads._local.__dict__.get("depth", 0) == 0  # this thread is not inside a call
    assert numba.get_num_threads() == 2
    release.set()
    worker.join(10)
    assert got == [1]


def test_a_cached_choice_costs_microseconds(fake_load):
    fake_load(1)
    count_inside()
    t0 = time.perf_counter()
    for _ in range(1000):
        count_inside()
    assert (time.perf_counter() - t0) / 1000 < 200e-6  # measured: about 5 us


@pytest.mark.slow
@pytest.mark.skipif(
    not os.path.exists("/proc/loadavg") or ALL_THREADS < 2 or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and 2 CPUs for Numba",
)
def test_gradient_descent_next_to_a_busy_process_takes_at_most_3x_its_time_alone(numba_at_two):
    """A busy loop pinned to one of our CPUs: with Numba on both, each step would wait at its
    barriers for the thread that shares that CPU (3-6x); the automatic choice runs on one."""
    model = rmt.MultiIndexModel("phase_retrieval")
    net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    data = model.sample(n=2000, d=1000, rng=0)
    previous = rmt.set_num_threads(None)

    def run():
        t0 = time.perf_counter()
        rmt.gradient_descent(net, data, lr=0.5, steps=400, rng=1, progress=False)
        return time.perf_counter() - t0

    try:
        run()  # compile
        time.sleep(0.5)
        alone = min(run() for _ in range(3))
        cpu = sorted(os.sched_getaffinity(0))[-1]
        busy = subprocess.Popen(
            [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile 1: pass"]
        )
        try:
            time.sleep(0.5)
            shared = min(run() for _ in range(3))
        finally:
            busy.kill()
            busy.wait()
    finally:
        rmt.set_num_threads(previous)
    assert shared <= 3 * alone, (alone, shared)
