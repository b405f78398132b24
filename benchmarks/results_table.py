"""Print the markdown tables of ``RESULTS.md`` that come from files in ``benchmarks/results/``.

    python benchmarks/results_table.py [freeprob|eigensolvers|streaming|distributed|sweep|eigs]

Without an argument, every table whose file exists.  Each table is what its benchmark wrote:
``bench_freeprob.py --json``, ``bench_eigensolvers.py`` (``eigensolvers.csv``) and the
``bench_scale.py`` subcommands (``bench_scale_*.json``).  Paste the output into RESULTS.md after
a new run (the goal lines beside the tables are written by hand).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _load(name: str):
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _seconds(x: float) -> str:
    """Seconds with three significant digits or one decimal, as the tables are written."""
    return f"{x:.3f} s" if x < 1 else f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def _ratio(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.0f}"


def freeprob() -> str | None:
    data = _load("bench_freeprob.json")
    if data is None:
        return None
    head = ["configuration", "nodes", "theory", "dense simulation", "ratio", "load"]
    rows = [
        [
            f"{r['config']}, delta = {r['delta']:g}",
            str(r["nodes"]),
            f"{1e3 * r['theory_s']:.1f} ms",
            f"{r['simulation_s']:.1f} s (d = {r['d']})",
            f"**{r['ratio']:.0f}x**",
            f"{r['other_load']:.2f}",
        ]
        for r in data
        if "ratio" in r
    ]
    rows += [
        [r["config"], "—", f"{1e3 * r['theory_s']:.1f} ms", "—", f"value {r['value']:.10f}", "—"]
        for r in data
        if "value" in r
    ]
    return _table(head, rows)


def eigensolvers() -> str | None:
    path = RESULTS / "eigensolvers.csv"
    if not path.exists():
        return None
    with path.open() as f:
        data = list(csv.DictReader(f))
    head = ["m*d", "method", "time", "products", "passes", "/ ARPACK", "dense time / this"]
    rows = []
    for r in data:
        speedup = float(r["speedup_vs_dense"])
        rows.append(
            [
                r["size"],
                r["method"],
                _seconds(float(r["time_s"])),
                r["n_matvec"] if r["method"] != "dense" else "—",
                r["n_passes"] if r["method"] != "dense" else "—",
                _ratio(float(r["ratio_to_arpack"])),
                "1"
                if r["method"] == "dense"
                else ("—" if speedup != speedup else f"{speedup:.1f}"),
            ]
        )
    return _table(head, rows)


def streaming() -> str | None:
    data = _load("bench_scale_throughput.json")
    if data is None:
        return None
    head = ["vectors b", "in-memory", "streaming", "streaming / in-memory throughput", "load"]
    rows = [
        [
            b,
            f"{1e3 * r['in_memory_s']:.0f} ms",
            f"{1e3 * r['streaming_s']:.0f} ms",
            f"**{r['ratio']:.2f}**",
            f"{r['other_load']:.2f}",
        ]
        for b, r in data["by_block"].items()
    ]
    return _table(head, rows)


def distributed() -> str | None:
    data = _load("bench_scale_distributed.json")
    if data is None:
        return None
    head = ["b", "in-memory", "DistributedHessian", "empty round trip", "bytes moved", "load"]
    rows = []
    for b, r in data["by_block"].items():
        t = r["times"]
        ratio = t["distributed"] / t["in-memory"]
        rows.append(
            [
                b,
                f"{1e3 * t['in-memory']:.0f} ms",
                f"{1e3 * t['distributed']:.0f} ms ({ratio:.2f}x)",
                f"{1e3 * t['round trip']:.0f} ms",
                f"{r['bytes_moved'] / 2**20:.1f} MiB",
                f"{r['other_load']:.2f}",
            ]
        )
    return _table(head, rows)


def sweep() -> str | None:
    data = _load("bench_scale_sweep.json")
    if data is None:
        return None
    head = ["run", "wall", "sums: sampling / eigs / theory", "load"]
    labels = {
        "serial": "serial, Numba 2 threads",
        "serial_1thread": "serial, Numba 1 thread",
        "local": 'scheduler="local", 2 workers x 1 thread',
    }
    rows = [
        [
            label,
            f"{data[key]['wall_s']:.1f} s",
            " / ".join(
                f"{data[key][k]:.1f}" for k in ("time_point_s", "time_eigs_s", "time_theory_s")
            )
            + " s",
            f"{data[key]['other_load']:.2f}",
        ]
        for key, label in labels.items()
    ]
    return _table(head, rows)


def eigs() -> str | None:
    runs = [_load("bench_scale_eigs_12gb.json"), _load("bench_scale_eigs.json")]
    runs = [r for r in runs if r is not None]
    if not runs:
        return None
    head = ["X", "n x d, m", "passes (vectors)", "solve", "per pass", "disk read", "peak private"]
    rows = [
        [
            f"{r['gb']:.0f} GB (RAM {r['ram_gb']:.1f} GB)",
            f"{r['n']} x {r['d']}, {r['m']}",
            f"{r['n_passes']} ({r['n_matvec']})",
            f"{r['eigs_s']:.0f} s",
            f"{r['eigs_s'] / r['n_passes']:.1f} s",
            f"{r['disk_read_gb']:.0f} GB",
            f"{r['peak_private_gb']:.2f} GB",
        ]
        for r in runs
    ]
    return _table(head, rows)


TABLES = {
    "freeprob": freeprob,
    "eigensolvers": eigensolvers,
    "streaming": streaming,
    "distributed": distributed,
    "sweep": sweep,
    "eigs": eigs,
}


def main(argv=None) -> None:
    names = list(sys.argv[1:] if argv is None else argv) or list(TABLES)
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        raise SystemExit(f"unknown table {unknown[0]!r}: expected one of {', '.join(TABLES)}")
    for name in names:
        text = TABLES[name]()
        print(f"<!-- {name} -->\n{text if text is not None else '(no results file)'}\n")


if __name__ == "__main__":
    main()
