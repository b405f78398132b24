"""The result store: tidy CSV tables (append-only, resumable), JSON files and manifests.

Rows are flat dicts of scalars.  Every row is written and flushed as soon as it is finished,
so an interrupted run loses nothing that was done; a resumed run reads the keys back and skips
them.  Files are first written under a temporary name and moved into place, so a failure
before the first row leaves nothing half-written; complete tables and JSON files go the same
way (temporary name, then rename).
"""

from __future__ import annotations

import csv
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import time

import numpy as np
import scipy


def _format(value):
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def _parse(text: str):
    if text == "":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def read_table(path) -> list[dict]:
    """All rows of a CSV written by :class:`ResumableCSV`, with numbers parsed back."""
    path = pathlib.Path(path)
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return [{k: _parse(v) for k, v in row.items()} for row in csv.DictReader(fh)]


class ResumableCSV:
    """Append rows to ``path`` with a fixed header; ``done`` holds the keys already there."""

    def __init__(self, path, columns: list[str], key: tuple[str, ...]):
        self.path = pathlib.Path(path)
        self.columns = list(columns)
        self.key = tuple(key)
        missing = [k for k in self.key if k not in self.columns]
        if missing:
            raise ValueError(f"key columns {missing} are not among the columns")
        self.rows = read_table(self.path)
        if self.rows and list(self.rows[0]) != self.columns:
            raise ValueError(
                f"{self.path} has columns {list(self.rows[0])}; this run writes {self.columns}. "
                "Use another output folder or remove the file."
            )
        self.done = {self.key_of(r) for r in self.rows}

    def key_of(self, row: dict) -> tuple:
        return tuple(_parse(_format(row[k])) for k in self.key)

    def append(self, rows: list[dict]) -> None:
        """Write ``rows`` (one finished unit of work) and flush them to disk."""
        if not rows:
            return
        for row in rows:
            unknown = set(row) - set(self.columns)
            if unknown:
                raise ValueError(f"row has columns {sorted(unknown)} that {self.path} does not")
        new_file = not self.path.exists()
        target = self.path.with_suffix(self.path.suffix + ".tmp") if new_file else self.path
        with target.open("a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns)
            if new_file:
                writer.writeheader()
            for row in rows:
                writer.writerow({c: _format(row.get(c)) for c in self.columns})
            fh.flush()
            os.fsync(fh.fileno())
        if new_file:
            os.replace(target, self.path)
        self.rows.extend(rows)
        self.done.update(self.key_of(r) for r in rows)

    def sort(self) -> None:
        """Rewrite the file with its rows sorted by the key, atomically (a finished run)."""
        if not self.rows:
            return
        self.rows.sort(key=self.key_of)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with tmp.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns)
            writer.writeheader()
            for row in self.rows:
                writer.writerow({c: _format(row.get(c)) for c in self.columns})
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


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

    return {
        "rmt": importlib.metadata.version("rmt"),
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


def check_resumable(out, config, command, what, growing=GROWING_FIELDS) -> None:
    """Refuse to resume into ``out`` when its manifest holds another configuration.

    Only the fields that can change ``command``'s results count (``config.to_dict(command)``),
    and the fields of ``growing`` (default :data:`GROWING_FIELDS`) may differ: more deltas or
    seeds add points.  The message names the fields that differ.  Nothing to check without a
    manifest.
    """
    manifest = pathlib.Path(out) / "manifest.json"
    if not manifest.exists():
        return
    old = json.loads(manifest.read_text()).get("config") or {}
    new = to_jsonable(config.to_dict(command))
    differ = sorted(k for k in new if k not in growing and old.get(k) != new[k])
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
