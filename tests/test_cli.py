"""The command line: option grammar and one-line errors that leave no files behind."""

import subprocess
import sys

import pytest

from rmt.cli import build_parser, config_from_args, main


def _run(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "rmt.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_common_options_build_a_config():
    args = build_parser().parse_args(
        [
            "threshold",
            "--target",
            "norm2",
            "--k",
            "3",
            "--noise",
            "0.1",
            "--width",
            "3",
            "--activation",
            "erf",
            "--loss",
            "square",
            "--point",
            "zero",
            "--d",
            "50",
            "--delta",
            "1:2:3",
            "--seeds",
            "2",
            "--out",
            "x",
        ]
    )
    cfg = config_from_args(args)
    assert cfg.k == 3 and cfg.width == 3 and cfg.deltas == (1.0, 1.5, 2.0)
    assert cfg.seeds == (0, 1) and cfg.point == "zero"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["sweep", "--delta", "1:2"], "--delta must be"),
        (["sweep", "--target", "nope"], "unknown target 'nope'"),
        (["threshold", "--activation", "gelu"], "unknown activation"),
        (["train", "--seeds", "0"], "--seeds must be >= 1"),
        (["spectrum", "--width", "0"], "width must be >= 1"),
        (["sweep", "--d", "ten"], "invalid int value"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_options_one_line_error_no_files(argv, fragment, tmp_path):
    out = tmp_path / "out"
    proc = _run(*argv, "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_main_returns_error_code_in_process(capsys, tmp_path):
    assert main(["sweep", "--noise", "-1", "--out", str(tmp_path / "o")]) == 2
    assert "noise" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
