"""Scale-out on a real LocalCluster (2 worker processes): sharded Hessian and the task runner."""

import os
import signal

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import rmt
from rmt.operators.distributed import DistributedHessian, TasksFailedError, run_tasks

from .conftest import assert_operator_matches_dense

N, D_DIM, M = 301, 19, 3


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _problem(rng, activation="tanh", loss="square"):
    data = rmt.MultiIndexModel("z1z2").sample(N, D_DIM, rng)
    net = rmt.TwoLayerNet(M, activation, loss)
    W = rng.standard_normal((D_DIM, M)) / np.sqrt(D_DIM)
    return data, net, W


def _rel_err(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


# -- DistributedHessian ---------------------------------------------------------------------


@pytest.mark.parametrize("n_shards", [None, 5])
def test_sharded_product_matches_in_memory(client, rng, n_shards):
    data, net, W = _problem(rng)
    H = rmt.Hessian(net, data, W, weight_decay=0.25)
    with DistributedHessian(net, data, W, 0.25, client=client, n_shards=n_shards) as Hd:
        assert len(Hd.shards) == (n_shards or 2)
        np.testing.assert_allclose(Hd.D, H.D, rtol=1e-13, atol=1e-14)
        V = rng.standard_normal((M * D_DIM, 4))
        assert _rel_err(Hd.matmat(V), H.matmat(V)) <= 1e-12
        assert _rel_err(Hd.matvec(V[:, 1]), H.matvec(V[:, 1])) <= 1e-12
        assert (Hd.n_matvec, Hd.n_passes) == (5, 2)


def test_shards_loaded_by_workers_from_npy(client, rng, tmp_path):
    data, net, W = _problem(rng, activation="cubic", loss="huber")
    np.save(tmp_path / "X.npy", data.X)
    dense = rmt.Hessian(net, data, W, weight_decay=0.1).to_dense()
    source = rmt.RowData(tmp_path / "X.npy", data.y)
    Hd = DistributedHessian(net, source, W, 0.1, client=client, n_shards=3)
    assert Hd.data.path == str(tmp_path / "X.npy")
    assert_operator_matches_dense(Hd, dense, rng, rtol=1e-12)
    np.testing.assert_allclose(Hd.to_dense(), dense, rtol=0, atol=1e-12 * np.abs(dense).max())


def test_same_arguments_as_hessian_and_streaming(client, rng, tmp_path, monkeypatch):
    """``(net, data, W, weight_decay)`` with a Dataset or an out-of-core source: the three
    operators agree with ``Hessian.to_dense()``, also through the generic ``to_dense``."""
    import rmt.operators.distributed

    data, net, W = _problem(rng, activation="softplus", loss="huber")
    np.save(tmp_path / "X.npy", data.X)
    dense = rmt.Hessian(net, data, W, 0.3).to_dense()
    Hs = rmt.StreamingHessian(net, rmt.RowData(tmp_path / "X.npy", data.y), W, 0.3)
    np.testing.assert_allclose(Hs.to_dense(), dense, rtol=0, atol=1e-12 * np.abs(dense).max())
    memmap = rmt.RowData(np.load(tmp_path / "X.npy", mmap_mode="r"), data.y)
    for source in (data, memmap):
        with DistributedHessian(net, source, W, 0.3, client=client, n_shards=3) as Hd:
            assert Hd.data.path is None
            assert_operator_matches_dense(Hd, dense, rng, rtol=1e-12)
            with monkeypatch.context() as patch:
                patch.setattr(rmt.operators.distributed, "DENSE_MAX_BYTES", 0)  # products on I
                generic = Hd.to_dense()
            assert Hd.n_passes == 6 + 2  # the check above, then 57 columns in blocks of 32
            np.testing.assert_allclose(generic, dense, rtol=0, atol=1e-12 * np.abs(dense).max())


def test_smallest_eigenvalues_on_sharded_operator(client, rng):
    from scipy.sparse.linalg import eigsh

    data, net, W = _problem(rng)
    dense = rmt.Hessian(net, data, W).to_dense()
    expected = np.linalg.eigvalsh(dense)[:3]
    Hd = DistributedHessian(net, data, W, client=client)
    res = rmt.extreme_eigs(Hd, k=3, which="smallest", method="block_lanczos", tol=1e-10, rng=1)
    np.testing.assert_allclose(res.values, expected, atol=1e-8)
    assert res.n_passes < res.n_matvec  # blocks: fewer round trips than vectors
    vals = eigsh(Hd, k=3, which="SA", ncv=20, tol=1e-12, return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(vals), expected, atol=1e-10)


def test_bad_client_message(rng):
    data, net, W = _problem(rng)
    with pytest.raises(TypeError, match="distributed.Client"):
        DistributedHessian(net, data, W, client="tcp://nowhere")
    with pytest.raises(TypeError, match="positional"):
        DistributedHessian(net, data, W, 0.0, "tcp://nowhere")  # client is keyword-only


# -- run_tasks ------------------------------------------------------------------------------


def seeded_task(seed, size):
    """A deterministic computation from an explicit seed (a stand-in for one sweep point)."""
    x = np.random.default_rng(seed).standard_normal((size, size))
    return float(np.linalg.eigvalsh(x + x.T)[0]), seed


def dies_once_task(seed, size, marker_dir, victim):
    """Like ``seeded_task``, but task ``victim`` kills its own worker process the first time."""
    marker = os.path.join(marker_dir, f"died-{seed}")
    if seed == victim and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return seeded_task(seed, size)


def failing_task(seed):
    if seed == 2:
        raise ValueError("bad point")
    return seed


def _collect(scheduler, func, tasks):
    seen = []
    results = run_tasks(func, tasks, scheduler, on_result=lambda t, r: seen.append((t, r)))
    return results, seen


def test_local_cluster_matches_serial():
    tasks = [(seed, 30) for seed in range(12)]
    serial, seen_serial = _collect(None, seeded_task, tasks)
    local, seen_local = _collect("local", seeded_task, tasks)
    assert local == serial  # bit for bit, seed for seed
    assert serial == [seeded_task(*t) for t in tasks]
    assert seen_serial == list(zip(tasks, serial))
    assert sorted(seen_local) == sorted(seen_serial)


def test_killed_worker_loses_and_duplicates_nothing(client, tmp_path):
    tasks = [(seed, 60, str(tmp_path), 5) for seed in range(16)]
    results, seen = _collect(client, dies_once_task, tasks)
    assert os.path.exists(tmp_path / "died-5")  # the worker really died
    assert results == [seeded_task(seed, 60) for seed in range(16)]
    assert sorted(t for t, _ in seen) == sorted(tasks)  # on_result exactly once per task
    assert len(seen) == len(tasks)
    # the nanny restarts the killed worker; later tests must not race its registration (a
    # client connecting meanwhile tripped an assertion inside distributed once in CI-like runs)
    client.wait_for_workers(2, timeout=120)


def test_failures_reported_after_the_rest_finish(client):
    for scheduler in (None, client):
        seen = []
        with pytest.raises(TasksFailedError, match="bad point") as err:
            run_tasks(
                failing_task,
                [(s,) for s in range(5)],
                scheduler,
                lambda t, r, seen=seen: seen.append(r),
            )
        assert sorted(seen) == [0, 1, 3, 4]
        assert err.value.failures[0][0] == (2,)


def test_no_tasks_starts_nothing():
    assert run_tasks(seeded_task, [], "local") == []


def test_address_string_connects(client):
    client.wait_for_workers(2, timeout=120)
    address = client.scheduler.address
    assert run_tasks(seeded_task, [(3, 10)], address) == [seeded_task(3, 10)]


def numba_threads_task(_):
    """The worker's Numba thread count as read at import, and the environment variable."""
    import numba

    return numba.config.NUMBA_NUM_THREADS, os.environ.get("NUMBA_NUM_THREADS")


def test_local_workers_start_numba_with_one_thread():
    """``scheduler="local"`` sets ``NUMBA_NUM_THREADS=1`` before a worker imports Numba, so
    that a kernel compiled in a worker (a cold cache) finds the count it started with."""
    assert run_tasks(numba_threads_task, [(0,), (1,)], "local") == [(1, "1"), (1, "1")]


def test_a_local_cluster_leaves_this_process_able_to_compile():
    """The Nanny of a local cluster sets ``NUMBA_NUM_THREADS`` in the parent's environment
    before it spawns a worker; ``scheduler="local"`` puts the parent's value back, so that a
    kernel compiled in this process afterwards (a cold cache) does not find a thread count
    other than the one its threads were launched with."""
    import numba

    before = os.environ.get("NUMBA_NUM_THREADS")
    numba.njit(parallel=True)(lambda x: x + 1)(np.zeros(4))  # threads launched here
    assert run_tasks(numba_threads_task, [(0,)], "local") == [(1, "1")]
    assert os.environ.get("NUMBA_NUM_THREADS") == before

    @numba.njit(parallel=True)
    def fresh(x):  # compiled only now, after the cluster
        s = 0.0
        for i in numba.prange(x.size):
            s += x[i]
        return s

    assert fresh(np.arange(5.0)) == 10.0
