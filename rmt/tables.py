"""Tidy CSV tables: an append-only CSV that a sweep can resume, and its reader.

Rows are flat dicts of scalars.  Every row is written and flushed as soon as it is finished,
so an interrupted run loses nothing that was done; a resumed run reads the keys back and skips
them.  Files are first written under a temporary name and moved into place, so a failure
before the first row leaves nothing half-written.  Complete tables, JSON and figures are
written by :mod:`rmt.output`.
"""

from __future__ import annotations

import csv
import math
import os
import pathlib

import numpy as np


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
