"""Scale-out on ``dask.distributed``: a task runner for sweeps and a row-sharded Hessian.

``dask.distributed`` is optional (the ``[dist]`` extra): this module imports it only when a
function is asked to use it, and then says how to install it when it is missing.

- ``run_tasks(func, tasks, scheduler)`` runs ``func(*task)`` for every task, serially or as one
  Dask task each, and hands every result to ``on_result`` in the calling process as soon as it
  arrives, exactly once.  A task whose worker dies is rerun by the scheduler.
- ``DistributedHessian(net, data, W, weight_decay, client=client)`` keeps row shards ``X_s`` of
  ``X`` and their curvature blocks ``D_s`` on the workers (scattered once).  A product sends
  ``V`` and gets back ``X_s^T R_s`` per shard (docs/theory.md section 2):
  ``H V = (1/n) sum_s X_s^T R_s + weight_decay V``.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import numpy as np
from tqdm.auto import tqdm

from rmt.kernels.hessian import default_chunks, dense_hessian, fused_product, preactivations
from rmt.operators.base import SymmetricOperator
from rmt.operators.hessian import finish_product, neuron_rows
from rmt.operators.streaming import DENSE_MAX_BYTES, as_row_data, open_rows, read_rows
from rmt.problem.network import TwoLayerNet
from rmt.progress import progress_enabled
from rmt.validation import check_nonneg_float, check_positive_int

INSTALL_HINT = 'pip install "rmt[dist]"  (from a checkout: pip install -e ".[dist]")'


def require_distributed(what: str):
    """Import and return ``distributed``, or raise ``ImportError`` saying how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(
            f"{what} needs dask.distributed, which is not installed. Install the scale-out "
            f"extra: {INSTALL_HINT}"
        ) from exc
    return distributed


class TasksFailedError(RuntimeError):
    """Some tasks raised (after their retries); the others finished and were delivered.

    ``failures`` is a list of ``(task, exception)``.
    """

    def __init__(self, failures):
        self.failures = list(failures)
        task, exc = self.failures[0]
        super().__init__(
            f"{len(self.failures)} task(s) failed; the first, {_task_label(task)}, raised "
            f"{type(exc).__name__}: {exc}"
        )


def _task_label(task) -> str:
    """A short name of a task for messages: its numbers (``delta``, seed) and the class names of
    its other arguments, never their whole ``repr``."""
    parts = task if isinstance(task, tuple) else (task,)
    shown = [
        f"{p:g}"
        if isinstance(p, float)
        else str(p)
        if isinstance(p, (int, str))
        else type(p).__name__
        for p in parts
    ]
    return "(" + ", ".join(shown) + ")"


# -- task runner ---------------------------------------------------------------------------


def run_tasks(func, tasks, scheduler=None, on_result=None, retries=2, progress=False):
    """Run ``func(*task)`` for each task tuple; return the results in task order.

    Parameters
    ----------
    func : callable
        A module-level function (it is pickled to the workers).  Its result must depend only on
        its arguments (pass explicit seeds), so it does not matter which worker runs it.
    tasks : iterable of tuples
    scheduler : None, "local", str or distributed.Client
        ``None`` runs serially in this process.  ``"local"`` starts a ``LocalCluster`` with one
        single-threaded worker process per core (``NUMBA_NUM_THREADS=1`` there) and closes it at
        the end.  Any other string is the address of a running scheduler.  A ``Client`` is used
        as it is and left open.
    on_result : callable, optional
        ``on_result(task, result)``, called in this process once per finished task, in order of
        completion (for example, to append a row to a resumable CSV).
    retries : int
        Extra attempts for a task that raises.  A task whose worker dies is rescheduled by Dask
        regardless (up to ``distributed.scheduler.allowed-failures`` deaths).
    progress : bool or None
        Show a tqdm bar: ``None`` when stderr is a terminal
        (:func:`rmt.progress.progress_enabled`), ``True`` always, ``False`` never.

    Raises
    ------
    TasksFailedError
        After every other task has finished, if some tasks raised on their last attempt.
    ImportError
        If ``scheduler`` is not ``None`` and dask.distributed is not installed.
    ConnectionError
        If ``scheduler`` is an address that is malformed or where no scheduler answers (before
        any task ran).
    TypeError, ValueError
        For a ``func`` or ``on_result`` that is not callable, or a negative ``retries``.

    Examples
    --------
    Serially, with every result handed to ``on_result`` as it arrives:

    >>> import rmt
    >>> seen = []
    >>> rmt.run_tasks(pow, [(2, 3), (3, 2)], on_result=lambda task, r: seen.append((task, r)))
    [8, 9]
    >>> seen
    [((2, 3), 8), ((3, 2), 9)]
    """
    tasks = [tuple(t) for t in tasks]
    if not callable(func):
        raise TypeError(f"func must be callable; got {type(func).__name__}")
    if on_result is not None and not callable(on_result):
        raise TypeError(f"on_result must be callable or None; got {type(on_result).__name__}")
    retries = check_positive_int(retries, "retries", minimum=0)
    if not tasks:
        return []
    bar = _progress_bar(len(tasks), progress)
    try:
        if scheduler is None:
            results, failures = _run_serial(func, tasks, on_result, bar)
        else:
            with contextlib.ExitStack() as stack:
                client = _enter_client(stack, scheduler)
                results, failures = _run_on_client(client, func, tasks, on_result, retries, bar)
    finally:
        bar.close()
    if failures:
        raise TasksFailedError(failures)
    return results


def _enter_client(stack, scheduler):
    """The client of :func:`connect`, entered on ``stack``; an address that cannot be reached
    (malformed, or no scheduler answering) is a one-line ``ConnectionError``."""
    try:
        return stack.enter_context(connect(scheduler))
    except (OSError, ValueError) as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise ConnectionError(
            f"cannot reach the Dask scheduler at {scheduler!r}: {message}"
        ) from None


def _progress_bar(total, enabled):

    return tqdm(total=total, disable=not progress_enabled(enabled), desc="tasks")


def _run_serial(func, tasks, on_result, bar):
    results, failures = [None] * len(tasks), []
    for i, task in enumerate(tasks):
        try:
            results[i] = func(*task)
        except Exception as exc:  # noqa: BLE001 - reported together at the end
            failures.append((task, exc))
            continue
        if on_result is not None:
            on_result(task, results[i])
        bar.update(1)
    return results, failures


def _run_on_client(client, func, tasks, on_result, retries, bar):
    distributed = require_distributed("run_tasks")
    token = uuid.uuid4().hex[:12]
    futures = [
        client.submit(func, *task, key=f"rmt-task-{token}-{i}", retries=retries, pure=False)
        for i, task in enumerate(tasks)
    ]
    index = {fut.key: i for i, fut in enumerate(futures)}
    results, failures = [None] * len(tasks), []
    try:
        for fut in distributed.as_completed(futures):
            i = index[fut.key]
            if fut.status == "error":
                failures.append((tasks[i], fut.exception()))
            else:
                results[i] = fut.result()
                if on_result is not None:
                    on_result(tasks[i], results[i])
                bar.update(1)
            fut.release()
    finally:
        # cancel only what is left: even an empty cancel is broadcast to every client of the
        # scheduler, and a client whose handshake is in flight then fails to connect
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
    return results, failures


def _restore_environ(name, value) -> None:
    """Set ``os.environ[name]`` back to ``value`` (removed when ``value`` is None)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def connect(scheduler, n_workers=None):
    """Yield a ``distributed.Client`` for ``scheduler`` ("local", an address, or a Client).

    ``"local"`` starts ``LocalCluster(n_workers or os.cpu_count(), threads_per_worker=1,
    processes=True)`` and closes it on exit; a Client passed in is left open.
    """
    distributed = require_distributed(f"scheduler={scheduler!r}")
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    if not isinstance(scheduler, str):
        raise TypeError(
            'scheduler must be None, "local", a scheduler address or a distributed.Client; '
            f"got {type(scheduler).__name__}"
        )
    if scheduler == "local":
        import dask  # lazy: dask comes with distributed, an optional extra

        # NUMBA_NUM_THREADS=1 before each worker process starts: a worker imports Numba before
        # a Nanny's ``env`` is applied, and a Numba compiling with a thread count that differs
        # from the one it read at import fails.  The Nanny sets it in *this* process's
        # environment before spawning, so it is put back here: else every later compile in this
        # process would read 1 against the count its threads were launched with, and fail
        spawn = {**dask.config.get("distributed.nanny.pre-spawn-environ"), "NUMBA_NUM_THREADS": 1}
        before = os.environ.get("NUMBA_NUM_THREADS")
        try:
            with dask.config.set({"distributed.nanny.pre-spawn-environ": spawn}):
                cluster = distributed.LocalCluster(
                    n_workers=n_workers or os.cpu_count() or 2,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",  # any free port: None still binds 8787 for it
                )
        finally:
            _restore_environ("NUMBA_NUM_THREADS", before)
        try:
            with cluster, distributed.Client(cluster) as client:
                yield client
        finally:  # a worker restarted by its Nanny sets it again
            _restore_environ("NUMBA_NUM_THREADS", before)
        return
    with distributed.Client(scheduler) as client:
        yield client


# -- row-sharded Hessian -------------------------------------------------------------------


class _Shard:
    """Rows ``X_s`` of ``X`` and their curvature blocks ``D_s``, living on one worker."""

    def __init__(self, X, D):
        self.X = X
        self.D = D


def _build_shard(X_s, y_s, W, net) -> _Shard:
    """On the worker: ``D_s`` from ``U_s = X_s W``; keeps ``X_s`` by reference (no copy).

    A float32 ``X_s`` (float32 storage) stays float32; ``U_s`` is summed in float64."""
    return _Shard(X_s, net.curvature(preactivations(X_s, W), y_s))


def _load_shard(path, lo, hi, y_s, W, net) -> _Shard:
    """On the worker: read rows ``lo:hi`` of the ``.npy`` file into memory, then as above."""
    X_s = np.array(read_rows(open_rows(path), lo, hi))
    return _build_shard(X_s, y_s, W, net)


def _shard_product(shard: _Shard, Vt) -> np.ndarray:
    """On the worker: ``X_s^T R_s`` (no ``1/n``) through the fused Numba kernel."""
    return fused_product(shard.X, shard.D, Vt, default_chunks())


def _shard_curvature(shard: _Shard) -> np.ndarray:
    return shard.D


class DistributedHessian(SymmetricOperator):
    """First-layer Hessian with the rows of ``X`` sharded across Dask workers.

        H V = (1/n) sum_s X_s^T R_s + weight_decay V,     row i of R_s: r_i = (x_i^T V) D_i

    The shards ``(X_s, D_s)`` are placed once, round-robin over the workers, and stay there
    (``D_s`` is computed on its worker).  A product scatters ``Vt`` (``b m x d``) to the workers,
    runs the fused Numba kernel on every shard and gathers the partial sums: per product it
    moves ``d m b`` floats out to each worker and back from each shard, never ``X``.  It is a
    :class:`rmt.operators.base.SymmetricOperator`; block products (``matmat``) cost one round trip.
    A float32 ``X`` (float32 storage) is sharded as float32, half the bytes on the workers;
    the kernels there sum in float64.

    Parameters
    ----------
    net : TwoLayerNet
    data : rmt.Dataset, rmt.RowData, or any object with ``X`` and ``y``
        As for ``rmt.Hessian`` and ``rmt.StreamingHessian``.  An in-memory ``X`` (or any
        source ``RowData`` accepts) is read shard by shard here and scattered; an ``X`` given
        as a path to an ``.npy`` file (``rmt.RowData("X.npy", y)``) is opened by each worker,
        which reads its own rows (the path must be visible to every worker).
    W : array_like (d, m)
    weight_decay : float
    client : distributed.Client
        Keyword only.
    n_shards : int, optional
        Default: the number of workers.  Each shard must fit in its worker's memory.

    Attributes
    ----------
    data : RowData
    n_matvec, n_passes : int
        Vectors multiplied and calls of the product (a block counts one).
    """

    def __init__(self, net: TwoLayerNet, data, W, weight_decay=0.0, *, client, n_shards=None):
        distributed = require_distributed("DistributedHessian")
        if not isinstance(client, distributed.Client):
            raise TypeError(f"client must be a distributed.Client; got {type(client).__name__}")
        if not isinstance(net, TwoLayerNet):
            raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
        self.client = client
        self.data = as_row_data(data)
        self.y = self.data.y
        self.n, self.d = self.data.n, self.data.d
        self.net, self.m = net, net.width
        self.W = net.check_weights(W, self.d)
        self.weight_decay = check_nonneg_float(weight_decay, "weight_decay")
        self.workers = sorted(client.scheduler_info()["workers"])
        if not self.workers:
            raise ValueError("the Dask cluster has no workers")
        n_shards = len(self.workers) if n_shards is None else n_shards
        n_shards = min(check_positive_int(n_shards, "n_shards"), self.n)
        self.bounds = [
            (s * self.n // n_shards, (s + 1) * self.n // n_shards) for s in range(n_shards)
        ]
        self.shards = [self._place(s) for s in range(n_shards)]
        distributed.wait(self.shards)
        super().__init__((self.m * self.d, self.m * self.d))

    def _place(self, s):
        """Future of shard ``s`` built on worker ``s mod n_workers``."""
        lo, hi = self.bounds[s]
        worker = [self.workers[s % len(self.workers)]]
        args = (self.y[lo:hi], self.W, self.net)
        if self.data.path is not None:
            return self.client.submit(
                _load_shard, self.data.path, lo, hi, *args, workers=worker, pure=False
            )
        rows = np.array(read_rows(self.data.X, lo, hi))
        X_s = self.client.scatter(rows, workers=worker, hash=False)
        return self.client.submit(_build_shard, X_s, *args, workers=worker, pure=False)

    def __repr__(self):
        return (
            f"DistributedHessian(n={self.n}, d={self.d}, m={self.m}, "
            f"weight_decay={self.weight_decay}, shards={len(self.shards)}, "
            f"workers={len(self.workers)})"
        )

    @property
    def D(self) -> np.ndarray:
        """Curvature blocks ``D`` (``n x m x m``), gathered from the shards."""
        parts = self.client.gather([self.client.submit(_shard_curvature, s) for s in self.shards])
        return np.concatenate(parts)

    def _matmat(self, V):
        """``H V`` for ``V`` of shape ``(m*d, b)``: one scatter and one gather."""
        Vt = neuron_rows(V, self.m, self.d)
        vt = self.client.scatter(Vt, broadcast=True, hash=False)
        parts = self.client.gather(
            [self.client.submit(_shard_product, s, vt, pure=False) for s in self.shards]
        )
        out = parts[0]
        for p in parts[1:]:
            out += p
        return finish_product(out, Vt, self.m, self.n, self.weight_decay)

    def to_dense(self) -> np.ndarray:
        """Dense ``(m d) x (m d)`` matrix: the reference kernel on this process's ``X`` and the
        gathered ``D`` for ``X`` up to ``DENSE_MAX_BYTES``, else products on the identity."""
        if self.n * self.d * 8 > DENSE_MAX_BYTES:
            return super().to_dense()
        return dense_hessian(read_rows(self.data.X, 0, self.n), self.D, self.weight_decay)

    def close(self):
        """Release the shards on the workers."""
        self.client.cancel(self.shards)
        self.shards = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
