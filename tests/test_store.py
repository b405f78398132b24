"""Resumable CSV and result files: rows survive, keys are skipped, mismatched headers refused."""

import json

import pytest

from rmt.experiments.store import ResumableCSV, read_table, write_json, write_table


def test_append_and_resume(tmp_path):
    path = tmp_path / "sweep.csv"
    cols = ["delta", "seed", "value", "note"]
    t = ResumableCSV(path, cols, key=("delta", "seed"))
    assert t.done == set()
    t.append([{"delta": 0.5, "seed": 0, "value": -1.25, "note": "a"}])
    t.append([{"delta": 2.0, "seed": 1, "value": float("inf"), "note": None}])
    again = ResumableCSV(path, cols, key=("delta", "seed"))
    assert again.done == {(0.5, 0), (2.0, 1)}
    rows = read_table(path)
    assert rows[0] == {"delta": 0.5, "seed": 0, "value": -1.25, "note": "a"}
    assert rows[1]["value"] == float("inf") and rows[1]["note"] is None


def test_float_round_trip_is_exact(tmp_path):
    x = 0.1 + 0.2
    t = ResumableCSV(tmp_path / "a.csv", ["x"], key=("x",))
    t.append([{"x": x}])
    assert read_table(tmp_path / "a.csv")[0]["x"] == x


def test_mismatched_header_is_refused(tmp_path):
    path = tmp_path / "sweep.csv"
    ResumableCSV(path, ["a", "b"], key=("a",)).append([{"a": 1, "b": 2}])
    with pytest.raises(ValueError, match="columns"):
        ResumableCSV(path, ["a", "c"], key=("a",))


def test_unknown_column_is_refused_and_nothing_written(tmp_path):
    path = tmp_path / "sweep.csv"
    t = ResumableCSV(path, ["a"], key=("a",))
    with pytest.raises(ValueError):
        t.append([{"a": 1, "zzz": 2}])
    assert not path.exists()


def test_write_json_is_atomic_and_readable(tmp_path):
    import numpy as np

    write_json(tmp_path / "m.json", {"x": np.float64(1.5), "v": np.arange(2), "s": (1, 2)})
    assert json.loads((tmp_path / "m.json").read_text()) == {"x": 1.5, "v": [0, 1], "s": [1, 2]}
    assert not (tmp_path / "m.json.tmp").exists()


def test_numpy_scalars_are_written_as_plain_numbers(tmp_path):
    import numpy as np

    t = ResumableCSV(tmp_path / "a.csv", ["x", "i", "b"], key=("i",))
    t.append([{"x": np.float64(-0.25), "i": np.int64(3), "b": np.bool_(True)}])
    assert (tmp_path / "a.csv").read_text().splitlines()[1] == "-0.25,3,True"
    assert read_table(tmp_path / "a.csv") == [{"x": -0.25, "i": 3, "b": True}]


def test_write_table_writes_the_complete_table_and_no_temporary(tmp_path):
    rows = [{"a": 1, "b": 0.5}, {"a": 2, "b": None}]
    write_table(tmp_path / "t.csv", rows, ["a", "b"])
    assert (tmp_path / "t.csv").read_text().splitlines() == ["a,b", "1,0.5", "2,"]
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]
