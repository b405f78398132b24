"""``rmt.configure_threads`` in fresh interpreters: libgomp reads its environment once per process.

Each case runs in a subprocess started without ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT``
(unless the case sets them, as a user would): ``import rmt`` leaves the environment alone, the
call sets what is unset, a user's value wins, a call after a parallel kernel sets nothing and
says it was too late, and a call made after ``import rmt`` reaches libgomp (an ``ACTIVE``
thread pool burns CPU while the main thread sleeps, a ``PASSIVE`` one does not).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import rmt

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
started = rmt.threads.openmp_started()
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
