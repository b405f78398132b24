"""What the kernel generators (``_gen_*.py``) share: formatting and writing a generated module."""

from __future__ import annotations

import pathlib
import subprocess
import sys


def formatted(source: str, path: pathlib.Path) -> str:
    """``source`` formatted by ``ruff format`` with the settings that apply to ``path``."""
    cmd = [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(path), "-"]
    return subprocess.run(cmd, input=source, capture_output=True, text=True, check=True).stdout


def write_module(path: pathlib.Path, source: str) -> None:
    """Write ``source`` to ``path`` in the project's format (left as it is without ruff)."""
    try:
        source = formatted(source, path)
    except (OSError, subprocess.CalledProcessError):
        print("ruff is not available: the generated file is left unformatted")
    path.write_text(source)
    print(f"wrote {path}")
