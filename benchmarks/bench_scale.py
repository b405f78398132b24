"""Scale-out: streaming and distributed Hessian products, an out-of-core eigen-solve, sweeps.

Questions, each a subcommand (``all`` runs the first three):

``throughput``  Streaming product over a memmapped ``X`` (``--gb``, default 4, warm page cache)
                against the in-memory product, side by side; peak memory of a streaming-only
                process (private memory and RSS including mapped page cache).
``distributed`` ``DistributedHessian`` on a ``LocalCluster`` (2 workers x 1 thread) against the
                in-memory product; the cost of an empty round trip; bytes moved per product.
``eigs``        The 5 smallest eigenvalues of a Hessian whose ``X`` (``--eig-gb``, default 30)
                does not fit in RAM, by block Lanczos over ``StreamingHessian``; peak memory,
                passes, bytes read from disk.
``passes``      ``--passes`` block products over the ``eigs`` file straight from disk: the time
                per pass of an out-of-core solve, when the whole solve outlasts the budget.
``sweep``       32 sweep points, ``rmt.run_sweep`` serial against ``scheduler="local"``.

    python benchmarks/bench_scale.py throughput --gb 4 --dir /work/scratch/rmt_scale
    python benchmarks/bench_scale.py eigs --eig-gb 30 --dir /work/scratch/rmt_scale

Big ``.npy`` files go to ``--dir`` (never the repository) and are deleted at the end unless
``--keep``.  Results are printed and written to ``benchmarks/results/bench_scale_<part>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _kernels import stream_pass
from _util import LoadMeter, fmt_ms, measure, set_threads

import rmt

RESULTS = Path(__file__).resolve().parent / "results"
GB = 1e9


# -- helpers -------------------------------------------------------------------------------


class MemorySampler:
    """Peak private (``RssAnon``) and file-backed (``RssFile``) resident memory, sampled.

    The peak RSS alone counts mapped page-cache pages of a memmap as the process's memory;
    the private part is what the process really holds.
    """

    def __init__(self, interval=0.01):
        self.interval = interval
        self.peak_anon = self.peak_file = 0
        self._stop = threading.Event()

    @staticmethod
    def read():
        vals = {}
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("RssAnon", "RssFile")):
                    key, v, _ = line.split()
                    vals[key[:-1]] = int(v) * 1024
        return vals["RssAnon"], vals["RssFile"]

    def _run(self):
        while not self._stop.is_set():
            a, f = self.read()
            self.peak_anon, self.peak_file = max(self.peak_anon, a), max(self.peak_file, f)
            time.sleep(self.interval)

    def __enter__(self):
        self.base_anon, self.base_file = self.read()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


def maxrss_bytes() -> int:
    """Peak resident memory of this process, ``VmHWM`` (unlike ``ru_maxrss``, which a child
    started by ``subprocess`` inherits from its parent, it starts afresh at ``exec``)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))


def tree_cpu_times() -> dict:
    """CPU seconds of this process and each live descendant (Dask workers included), by pid."""
    import psutil

    out = {}
    for p in [psutil.Process()] + psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return out


def other_load_tree(run, interval=0.2):
    """Run ``run()``; return ``(result, wall, load from processes outside our tree, in cores)``.

    Our tree is sampled every ``interval`` seconds while ``run()`` goes on, keeping the last
    figure of every pid: Dask workers that start and exit within the run are counted as ours
    (read only at the end, their CPU time was charged to "others").
    """
    from _util import _busy_seconds

    first = tree_cpu_times()
    last = dict(first)
    stop = threading.Event()

    def sample():
        while not stop.wait(interval):
            last.update(tree_cpu_times())

    sampler = threading.Thread(target=sample, daemon=True)
    t0, busy0 = time.perf_counter(), _busy_seconds()
    sampler.start()
    try:
        out = run()
    finally:
        stop.set()
        sampler.join()
    last.update(tree_cpu_times())
    wall = time.perf_counter() - t0
    ours = sum(v - first.get(pid, 0.0) for pid, v in last.items())
    other = (_busy_seconds() - busy0 - ours) / wall
    return out, wall, max(0.0, other)


def write_problem(path, n, d, seed):
    """Write Gaussian ``X`` (``n x d``) to ``path`` block by block; return ``(y, theta)``.

    Labels follow phase retrieval, ``y = (theta^T x)^2``; nothing of size ``n x d`` is held.
    The labels are also saved next to ``X`` (``path + ".y.npy"``), and an existing pair of
    files of the right shape is reused.
    """
    ypath = path + ".y.npy"
    exists = os.path.exists(path) and os.path.exists(ypath)
    if exists and np.load(path, mmap_mode="r").shape == (n, d):
        return np.load(ypath), None
    block_rows = max(1, 2**28 // (8 * d))
    rng = np.random.default_rng(seed)
    theta = rmt.problem.models.random_orthonormal(d, 1, rng)
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
    y = np.empty(n)
    model = rmt.MultiIndexModel("phase_retrieval")
    for lo in range(0, n, block_rows):
        hi = min(n, lo + block_rows)
        blk = rng.standard_normal((hi - lo, d))
        X[lo:hi] = blk
        y[lo:hi] = model.link(blk @ theta)
    X.flush()
    del X
    np.save(ypath, y)
    return y, theta


def remove_problem(path):
    for p in (path, path + ".y.npy"):
        if os.path.exists(p):
            os.remove(p)


def save(part, record):
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"bench_scale_{part}.json"
    path.write_text(json.dumps(record, indent=2, default=float))
    print(f"-> {path}")


# -- throughput: streaming against in-memory -----------------------------------------------


def bench_throughput(args):
    """Streaming product over a warm memmap against the in-memory product, side by side."""
    threads = set_threads(args.threads)
    d, m = args.d, 4
    n = int(args.gb * GB / (8 * d))
    path = os.path.join(args.dir, f"X_{n}x{d}.npy")
    t0 = time.perf_counter()
    y, _ = write_problem(path, n, d, seed=1)
    print(f"wrote X {n} x {d} ({n * d * 8 / GB:.2f} GB) in {time.perf_counter() - t0:.1f} s")
    net = rmt.TwoLayerNet(m, "tanh", "square")
    W = np.random.default_rng(2).standard_normal((d, m)) / np.sqrt(d)
    try:
        mm = np.load(path, mmap_mode="c")
        for _ in range(2):  # warm the page cache (and map the pages)
            stream_pass(mm)
        Hs = rmt.StreamingHessian(net, rmt.RowData(path, y), W)
        Hm = rmt.Hessian(net, rmt.Dataset(np.load(path), y), W)
        rng = np.random.default_rng(3)
        rows = {}
        for b in args.blocks:
            V = rng.standard_normal((m * d, b))
            err = np.linalg.norm(Hs.matmat(V) - Hm.matmat(V)) / np.linalg.norm(Hm.matmat(V))
            timings, load, tries = measure(
                {"in-memory": lambda V=V: Hm.matmat(V), "streaming": lambda V=V: Hs.matmat(V)},
                repeats=args.repeats,
            )
            tm, ts = timings["in-memory"]["median"], timings["streaming"]["median"]
            rows[b] = {
                "in_memory_s": tm,
                "streaming_s": ts,
                "ratio": tm / ts,
                "rel_err": err,
                "other_load": load,
                "tries": tries,
                "gbps_in_memory": n * d * 8 / GB / tm,
                "gbps_streaming": n * d * 8 / GB / ts,
            }
            print(
                f"b={b}: in-memory {fmt_ms(tm)}  streaming {fmt_ms(ts)}  throughput ratio "
                f"streaming/in-memory {tm / ts:.2f}  (rel. diff {err:.1e}, others' load "
                f"{load:.2f} cores)"
            )
        Hm = None  # free the in-memory copy before the memory measurement
        memory = _streaming_memory_child(path, args)
        print(
            f"streaming-only process: peak private {memory['peak_anon'] / GB:.3f} GB "
            f"(+{(memory['peak_anon'] - memory['base_anon']) / GB:.3f} GB over the process after "
            f"imports), peak mapped file {memory['peak_file'] / GB:.2f} GB (+"
            f"{(memory['peak_file'] - memory['base_file']) / GB:.2f} GB), peak RSS (VmHWM) "
            f"{memory['maxrss'] / GB:.2f} GB "
            f"(block {Hs.block_rows} rows = {Hs.block_rows * d * 8 / 2**20:.0f} MiB, D "
            f"{Hs.D.nbytes / 2**20:.0f} MiB)"
        )
        save(
            "throughput",
            {
                "n": n,
                "d": d,
                "m": m,
                "gb": n * d * 8 / GB,
                "threads": threads["numba"],
                "block_rows": Hs.block_rows,
                "by_block": rows,
                "memory": memory,
            },
        )
    finally:
        if not args.keep:
            remove_problem(path)


def _streaming_memory_child(path, args):
    """Peak memory of a fresh process that builds a StreamingHessian and runs 3 products."""
    code = (
        "import sys, json, numpy as np; sys.path[:0] = [%r, %r]\n"
        "import bench_scale as B, rmt\n"
        "B.set_threads(%d); y = np.load(%r)\n"
        "with B.MemorySampler() as s:\n"
        "    d = np.load(%r, mmap_mode='r').shape[1]\n"
        "    W = np.random.default_rng(2).standard_normal((d, 4)) / np.sqrt(d)\n"
        "    net = rmt.TwoLayerNet(4, 'tanh', 'square')\n"
        "    H = rmt.StreamingHessian(net, rmt.RowData(%r, y), W)\n"
        "    for b in (1, 8, 1): H.matmat(np.ones((4 * d, b)))\n"
        "print(json.dumps(dict(peak_anon=s.peak_anon, peak_file=s.peak_file, base_anon=s.base_anon, "
        "base_file=s.base_file, "
        "maxrss=B.maxrss_bytes())))\n"
    )
    here = str(Path(__file__).resolve().parent)
    root = str(Path(__file__).resolve().parents[1])
    ypath = path + ".y.npy"  # the labels written by write_problem
    out = subprocess.run(
        [sys.executable, "-c", code % (here, root, args.threads, ypath, path, path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


# -- distributed: round trips of the sharded product ---------------------------------------


def _noop(shard, vt):
    return None


def bench_distributed(args):
    """DistributedHessian on 2 worker processes against the in-memory product."""
    import distributed

    threads = set_threads(args.threads)
    n, d, m = 16_000, 4_000, 4
    data = rmt.MultiIndexModel("phase_retrieval").sample(n, d, np.random.default_rng(5))
    net = rmt.TwoLayerNet(m, "tanh", "square")
    W = np.random.default_rng(6).standard_normal((d, m)) / np.sqrt(d)
    Hm = rmt.Hessian(net, data, W)
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            env={"NUMBA_NUM_THREADS": "1"},
        ) as cl,
        distributed.Client(cl) as client,
    ):
        t0 = time.perf_counter()
        Hd = rmt.DistributedHessian(net, data, W, client=client)
        t_build = time.perf_counter() - t0
        rows = {}
        for b in args.blocks:
            V = np.random.default_rng(b).standard_normal((m * d, b))
            err = np.linalg.norm(Hd.matmat(V) - Hm.matmat(V)) / np.linalg.norm(Hm.matmat(V))

            def empty_round_trip(b=b):
                vt = client.scatter(np.zeros((b * m, d)), broadcast=True, hash=False)
                client.gather([client.submit(_noop, s, vt, pure=False) for s in Hd.shards])

            res, _, load = other_load_tree(
                lambda V=V: measure(
                    {
                        "in-memory": lambda: Hm.matmat(V),
                        "distributed": lambda: Hd.matmat(V),
                        "round trip": empty_round_trip,
                    },
                    repeats=args.repeats,
                    high_load=1e9,
                )
            )
            t = {k: v["median"] for k, v in res[0].items()}
            moved = (len(Hd.workers) + len(Hd.shards)) * b * m * d * 8
            rows[b] = {"times": t, "rel_err": err, "other_load": load, "bytes_moved": moved}
            print(
                f"b={b}: in-memory {fmt_ms(t['in-memory'])}  distributed "
                f"{fmt_ms(t['distributed'])}  (of which empty round trip "
                f"{fmt_ms(t['round trip'])}), ratio {t['distributed'] / t['in-memory']:.2f}, "
                f"{moved / 2**20:.1f} MiB moved, rel. diff {err:.1e}, others' load {load:.2f}"
            )
    save(
        "distributed",
        {
            "n": n,
            "d": d,
            "m": m,
            "workers": 2,
            "build_s": t_build,
            "by_block": rows,
            "threads": threads["numba"],
        },
    )


# -- eigs: out-of-core smallest eigenvalues ------------------------------------------------


def _disk_read_bytes() -> int:
    """Bytes this process caused to be read from storage (``/proc/self/io``)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("read_bytes")).split()[1])


def bench_eigs(args):
    """5 smallest eigenvalues of a Hessian whose X (``--eig-gb``) exceeds RAM, from disk."""
    threads = set_threads(args.threads)
    d, m = args.eig_d, 2
    n = int(args.eig_gb * GB / (8 * d))
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    path = os.path.join(args.dir, f"Xeig_{n}x{d}.npy")
    print(
        f"X: {n} x {d} = {n * d * 8 / GB:.1f} GB on disk, RAM {ram / GB:.1f} GB, "
        f"delta = {n / d:.1f}, m = {m}, N = m d = {m * d}"
    )
    t0 = time.perf_counter()
    y, _ = write_problem(path, n, d, seed=11)
    t_write = time.perf_counter() - t0
    print(f"wrote X in {t_write:.0f} s")
    net = rmt.TwoLayerNet(m, "tanh", "square")
    W = np.random.default_rng(12).standard_normal((d, m)) / np.sqrt(d)
    try:
        with MemorySampler(0.05) as mem, LoadMeter() as load:
            io0, t0 = _disk_read_bytes(), time.perf_counter()
            H = rmt.StreamingHessian(net, rmt.RowData(path, y), W)
            t_build = time.perf_counter() - t0
            res = rmt.extreme_eigs(
                H,
                k=5,
                which="smallest",
                method="block_lanczos",
                tol=args.tol,
                rng=13,
                block=args.eig_block,
            )
            t_eigs = time.perf_counter() - t0 - t_build
            disk = _disk_read_bytes() - io0
        rec = {
            "n": n,
            "d": d,
            "m": m,
            "gb": n * d * 8 / GB,
            "ram_gb": ram / GB,
            "tol": args.tol,
            "values": res.values.tolist(),
            "residuals": res.residuals.tolist(),
            "converged": bool(np.all(res.converged)),
            "n_passes": res.n_passes,
            "n_matvec": res.n_matvec,
            "build_s": t_build,
            "eigs_s": t_eigs,
            "write_s": t_write,
            "disk_read_gb": disk / GB,
            "peak_private_gb": mem.peak_anon / GB,
            "peak_mapped_file_gb": mem.peak_file / GB,
            "maxrss_gb": maxrss_bytes() / GB,
            "other_load": load.other_load,
            "threads": threads["numba"],
            "block_rows": H.block_rows,
        }
        print(
            f"5 smallest: {np.array2string(res.values, precision=6)}  converged "
            f"{rec['converged']}, {res.n_passes} passes ({res.n_matvec} vectors)"
        )
        print(
            f"D in {t_build:.0f} s, eigensolve {t_eigs:.0f} s ({t_eigs / res.n_passes:.1f} s "
            f"per pass), {disk / GB:.0f} GB read from disk"
        )
        print(
            f"peak private memory {mem.peak_anon / GB:.2f} GB, peak mapped page cache "
            f"{mem.peak_file / GB:.1f} GB, peak RSS (VmHWM) {maxrss_bytes() / GB:.1f} GB; "
            f"others' load {load.other_load:.2f} cores"
        )
        save("eigs", rec)
    finally:
        if not args.keep:
            remove_problem(path)


def bench_passes(args):
    """Time ``--passes`` block products (``b = 8``) over the ``eigs`` file, from disk.

    For an ``X`` larger than RAM the full eigen-solve can outlast the time budget; the time
    per pass, times the passes a solve needs, gives its duration.
    """
    threads = set_threads(args.threads)
    d, m = args.eig_d, 2
    n = int(args.eig_gb * GB / (8 * d))
    path = os.path.join(args.dir, f"Xeig_{n}x{d}.npy")
    y, _ = write_problem(path, n, d, seed=11)
    W = np.random.default_rng(12).standard_normal((d, m)) / np.sqrt(d)
    V = np.random.default_rng(14).standard_normal((m * d, 8))
    try:
        with MemorySampler(0.05) as mem, LoadMeter() as load:
            io0, t0 = _disk_read_bytes(), time.perf_counter()
            net = rmt.TwoLayerNet(m, "tanh", "square")
            H = rmt.StreamingHessian(net, rmt.RowData(path, y), W)
            t_build, times = time.perf_counter() - t0, []
            for _ in range(args.passes):
                t1 = time.perf_counter()
                H.matmat(V)
                times.append(time.perf_counter() - t1)
            disk = _disk_read_bytes() - io0
        rec = {
            "n": n,
            "d": d,
            "m": m,
            "gb": n * d * 8 / GB,
            "build_s": t_build,
            "pass_s": times,
            "disk_read_gb": disk / GB,
            "peak_private_gb": mem.peak_anon / GB,
            "peak_mapped_file_gb": mem.peak_file / GB,
            "other_load": load.other_load,
            "threads": threads["numba"],
        }
        print(
            f"X {n * d * 8 / GB:.0f} GB: D in {t_build:.0f} s, passes (b=8) "
            f"{', '.join(f'{t:.0f}' for t in times)} s; {disk / GB:.0f} GB read from disk "
            f"({disk / GB / (t_build + sum(times)):.2f} GB/s); peak private "
            f"{mem.peak_anon / GB:.2f} GB; others' load {load.other_load:.2f} cores"
        )
        save("passes", rec)
    finally:
        if not args.keep:
            remove_problem(path)


# -- sweep: 32 points serial against LocalCluster ------------------------------------------


def bench_sweep_32(args):
    """32 sweep points with ``rmt.run_sweep``: serial against ``scheduler="local"``.

    Three runs of the same sweep: serial with Numba on ``--threads`` threads (the default
    serial run), serial on 1 thread, and a ``LocalCluster`` of 2 single-threaded workers.
    The 1-thread run measures the work ``W1`` that the two workers share, so
    ``W1 / (2 * serial)`` is the best ratio two workers can reach (perfect balance, no
    start-up, no contention between them); the sums of the rows' timing columns show where the
    time goes.  Skips with a message while ``rmt.run_sweep`` does not exist.
    """
    import numba

    run_sweep = getattr(rmt, "run_sweep", None)
    if run_sweep is None:
        print("SKIP sweep: rmt.run_sweep does not exist yet")
        return
    config = rmt.RunConfig(
        point="zero", d=args.sweep_d, deltas="1:4:8", seeds=(0, 1, 2, 3), n_eigs=3, method="lanczos"
    )
    threads = set_threads(args.threads)["numba"]
    results = {}
    runs = (("serial", None, threads), ("serial_1thread", None, 1), ("local", "local", threads))
    for label, scheduler, nt in runs:
        numba.set_num_threads(nt)
        rmt.set_num_threads(nt)  # the library's calls too (no choice from the load)
        rows, wall, load = other_load_tree(
            lambda s=scheduler: run_sweep(config, scheduler=s, progress=False)
        )
        parts = _time_parts(rows)
        results[label] = {"wall_s": wall, "other_load": load, "numba_threads": nt, **parts}
        results[label]["rows"] = rows
        print(
            f"{label}: {len(rows)} rows in {wall:.1f} s (others' load {load:.2f} cores); "
            "per-point sums: " + ", ".join(f"{k[5:-2]} {v:.1f} s" for k, v in parts.items())
        )
    numba.set_num_threads(threads)
    rmt.set_num_threads(threads)
    same = _same_rows(results["serial"]["rows"], results["local"]["rows"])
    same_1 = _same_rows(results["serial"]["rows"], results["serial_1thread"]["rows"])
    ratio = results["local"]["wall_s"] / results["serial"]["wall_s"]
    bound = results["serial_1thread"]["wall_s"] / (2 * results["serial"]["wall_s"])
    print(
        f"local/serial time {ratio:.2f} (target <= 0.6); rows identical: {same} (1 thread: {same_1})"
    )
    print(
        f"best possible with 2 single-threaded workers, W1 / (2 serial): {bound:.2f} "
        f"(serial on 1 thread / on {threads}: "
        f"{results['serial_1thread']['wall_s'] / results['serial']['wall_s']:.2f})"
    )
    save(
        "sweep",
        dict(
            points=32,
            d=args.sweep_d,
            ratio=ratio,
            bound_two_workers=bound,
            identical=same,
            identical_1thread=same_1,
            **{k: {kk: vv for kk, vv in v.items() if kk != "rows"} for k, v in results.items()},
        ),
    )


def _time_parts(rows):
    """Sums over the points of their timing columns (each point's rows repeat them)."""
    first = {(r["delta"], r["seed"]): r for r in rows}
    cols = ("time_point_s", "time_eigs_s", "time_theory_s")
    return {c: float(sum(r[c] for r in first.values())) for c in cols}


def _same_rows(a, b):
    """Rows equal as sets, ignoring timing columns."""

    def key(rows):
        return sorted(
            json.dumps({k: v for k, v in r.items() if "time" not in k}, sort_keys=True, default=str)
            for r in rows
        )

    return key(a) == key(b)


# -- command line --------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=["throughput", "distributed", "eigs", "passes", "sweep", "all"])
    p.add_argument("--dir", default="/work/scratch/rmt_scale", help="where big .npy files go")
    p.add_argument("--gb", type=float, default=4.0, help="size of X for throughput")
    p.add_argument("--d", type=int, default=4000, help="d for throughput")
    p.add_argument("--eig-gb", type=float, default=30.0, help="size of X for eigs")
    p.add_argument("--eig-d", type=int, default=10_000, help="d for eigs")
    p.add_argument("--eig-block", type=int, default=8, help="block size of block Lanczos")
    p.add_argument("--tol", type=float, default=1e-6, help="eigen-solver tolerance")
    p.add_argument("--sweep-d", type=int, default=400, help="d of the sweep points")
    p.add_argument("--blocks", type=int, nargs="+", default=[1, 8], help="vectors per product")
    p.add_argument("--passes", type=int, default=3, help="products timed by 'passes'")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--keep", action="store_true", help="keep the big .npy files")
    args = p.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    parts = ["throughput", "distributed", "eigs"] if args.part == "all" else [args.part]
    for part in parts:
        print(f"== {part} ==")
        globals()[f"bench_{part}" if part != "sweep" else "bench_sweep_32"](args)


if __name__ == "__main__":
    main()
