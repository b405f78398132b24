"""Result files and terminal tables: what the commands write, and nothing they compute.

Every file is written complete or not at all: under a temporary name first, then moved into
place (the resumable sweep table, :class:`rmt.tables.ResumableCSV`, appends row by row instead).
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import sys
import time

import numpy as np

from .tables import ResumableCSV


def progress_enabled(progress=None) -> bool:
    """Whether to show progress bars.

    ``True`` and ``False`` are the caller's choice and are kept (``True`` forces the bars, into
    a file too); ``None``, the default of the commands and the library, shows them only where
    someone watches: when stderr is a terminal, or the stream of a Jupyter kernel (where
    ``tqdm.auto`` draws a widget).  Redirected to a file or a pipe, stderr gets no bar text.
    """
    if progress is not None:
        return bool(progress)
    stream = sys.stderr
    if stream is None:
        return False
    if type(stream).__module__.split(".")[0] == "ipykernel":
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def write_table(path, rows, columns) -> None:
    """Write the complete table ``rows`` (dicts of scalars) with header ``columns``, atomically."""
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".part")
    if tmp.exists():
        tmp.unlink()
    ResumableCSV(tmp, columns, key=(columns[0],)).append(rows)
    os.replace(tmp, path)


def columns_table(columns: dict) -> list[dict]:
    """Rows of a table given as ``{name: sequence}`` columns of equal length."""
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def save_figure_atomic(fig, path) -> None:
    """Save ``fig`` as a PNG (:func:`rmt.plotting.save_figure`) under a temporary name, then
    move it to ``path``."""
    from .plotting import save_figure

    path = pathlib.Path(path)
    tmp = path.with_name(path.stem + ".tmp.png")
    save_figure(fig, tmp)
    os.replace(tmp, path)


def json_default(obj):
    """``default=`` for :func:`json.dumps`: numpy scalars and arrays, sets, tuples and paths."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, pathlib.Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def finite_or_none(obj):
    """``obj`` with every non-finite float (NaN, +-inf) replaced by ``None``, recursively: strict
    JSON has no NaN or Infinity, and a missing number is a ``null`` next to its reason."""
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [finite_or_none(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [finite_or_none(v) for v in obj.tolist()]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def strict_json(payload, **kwargs) -> str:
    """``payload`` as strict JSON (no NaN or Infinity: they become ``null``)."""
    return json.dumps(finite_or_none(payload), default=json_default, allow_nan=False, **kwargs)


def to_jsonable(obj):
    """``obj`` as it reads back from JSON (tuples become lists, numpy values plain numbers)."""
    return json.loads(json.dumps(obj, default=json_default))


def write_json(path, payload: dict) -> None:
    """Write ``payload`` as indented JSON, atomically (temporary file, then rename)."""
    path = pathlib.Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(strict_json(payload, indent=2) + "\n")
    os.replace(tmp, path)


def environment_versions() -> dict:
    """Versions of Python and of the numerical stack, for manifests."""
    import matplotlib
    import numba
    import scipy

    from . import __version__

    return {
        "rmt": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "matplotlib": matplotlib.__version__,
        "machine": platform.machine(),
    }


def timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


#: the fields a resumable run may change between reruns into one folder: they add points
GROWING_FIELDS = ("deltas", "seeds")


def check_resumable(out, config, command, what) -> None:
    """Refuse to resume into ``out`` when its manifest holds another configuration.

    Only the fields that can change ``command``'s results count (``config.to_dict(command)``),
    and :data:`GROWING_FIELDS` may differ: more deltas or seeds add points.  The message names
    the fields that differ.  Nothing to check without a manifest.
    """
    manifest = pathlib.Path(out) / "manifest.json"
    if not manifest.exists():
        return
    old = json.loads(manifest.read_text()).get("config") or {}
    new = to_jsonable(config.to_dict(command))
    differ = sorted(k for k in new if k not in GROWING_FIELDS and old.get(k) != new[k])
    if differ:
        raise ValueError(
            f"{out} holds {what} of another configuration (differs in: {', '.join(differ)}); "
            "use another out"
        )


def write_manifest(out, command, config, seeds, timings, files, **extra) -> dict:
    """Write ``out/manifest.json``: command, configuration, versions, seeds, timings, files.

    ``config`` is a :class:`rmt.RunConfig`; ``extra`` entries are added as they are.  Returns
    the payload written.
    """
    payload = {
        "command": command,
        "config": to_jsonable(config.to_dict()),
        "versions": environment_versions(),
        "seeds": [int(s) for s in seeds],
        "timings": dict(timings),
        "files": sorted(str(f) for f in files),
        "written": timestamp(),
        **extra,
    }
    write_json(pathlib.Path(out) / "manifest.json", payload)
    return payload


def variant_label(row) -> str:
    """Short label of one configuration of a threshold table (target, noise, network)."""
    noise = f"+{row['noise']:g}N" if row["noise"] else ""
    return f"{row['target']}{noise}, {row['activation']}/{row['loss']}, m={row['width']}"


def format_threshold_table(rows) -> str:
    """A plain-text table for the terminal; the reasons for infinite values are footnotes, and
    a solver failure (``status == "failed"``) shows as ``FAILED``, never as a number."""
    width = max(len(variant_label(r)) for r in rows)
    head = (
        f"{'configuration':<{width}} {'delta_pop':>9} {'delta_BBP':>9} {'delta_alg':>9} "
        f"{'pop/alg':>7}"
    )
    lines, notes = [head, "-" * len(head)], []
    for r in rows:
        failed = r.get("status") == "failed"
        ratio = f"{r['ratio']:.3g}" if r["ratio"] is not None and not failed else "-"
        pop = "FAILED" if failed else f"{r['delta_pop']:.4g}"
        mark = ""
        if r["reason"]:
            notes.append(r["reason"])
            mark = f" [{len(notes)}]"
        lines.append(
            f"{variant_label(r):<{width}} {pop:>9} {r['delta_bbp']:>9.4g} "
            f"{r['delta_alg']:>9.4g} {ratio:>7}{mark}"
        )
    lines += [f"[{i}] {text}" for i, text in enumerate(notes, 1)]
    return "\n".join(lines)


def format_sweep_table(rows) -> str:
    """Bottom eigenvalue and overlap per ``delta`` (mean over seeds) next to the predictions."""
    from .plotting import summarize_by_delta

    dl, ev, ev_sd = summarize_by_delta(rows, "eigenvalue")
    _, ov, ov_sd = summarize_by_delta(rows, "overlap_theta")
    _, th, _ = summarize_by_delta(rows, "theory_bottom")
    _, edge, _ = summarize_by_delta(rows, "theory_edge_lo")
    pred_ov = {}
    for r in rows:
        if r["index"] == 0:
            v = r["theory_overlap_theta"]
            pred_ov[r["delta"]] = np.nan if v is None or r["theory_outlier"] is None else v
    head = (
        f"{'delta':>7} {'bottom (sim)':>17} {'predicted':>10} {'edge':>9} "
        f"{'overlap (sim)':>15} {'predicted':>9}"
    )
    lines = [head, "-" * len(head)]
    for i, x in enumerate(dl):
        sim_ev = _mean_sd(ev[i], ev_sd[i], 9, 4)
        sim_ov = _mean_sd(ov[i], ov_sd[i], 7, 3)
        lines.append(
            f"{x:>7.3g} {sim_ev} {_cell(th[i], 10, '.4f')} {_cell(edge[i], 9, '.4f')} "
            f"{sim_ov} {_cell(pred_ov.get(x, np.nan), 9, '.3f', 'no outlier')}"
        )
    return "\n".join(lines)


def _mean_sd(mean, sd, width, decimals) -> str:
    """``mean ± sd`` to ``decimals`` places; a spread that rounds to 0 is left out (no
    ``± 0.0000``), and a mean that rounds to 0 prints without a sign."""
    unit = 0.5 * 10.0**-decimals
    mean = 0.0 if abs(mean) < unit else mean
    text = f"{mean:>{width}.{decimals}f}"
    spread = f" ± {sd:.{decimals}f}" if sd >= unit else ""
    return f"{text}{spread:<{decimals + 5}}"


def _cell(value, width, fmt, missing="n/a") -> str:
    """A number of a terminal table, or ``missing`` (never ``nan``) when there is none."""
    if value is None or not np.isfinite(value):
        return f"{missing:>{width}}"
    return f"{value:>{width}{fmt}}"
