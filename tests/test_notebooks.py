"""Execute every notebook in notebooks/ (the executed examples of STYLE.md's curvlinops anchor).

Each notebook contains `assert` cells that compare theory with simulation, closed forms or dense
references, so a broken toolkit fails here.  The kernel is a "python3" kernelspec written to a
temporary directory whose command is this interpreter (``sys.executable``), so the notebooks
always run in the environment under test, whatever kernelspecs the user has installed.

The notebooks are committed with their outputs, so that readers see the figures without running
them; the test executes a copy and leaves the files alone.  To refresh the committed outputs::

    .venv/bin/python tests/test_notebooks.py notebooks/*.ipynb
"""

import json
import re
import sys
import tempfile
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 300  # seconds per cell


def _kernel_manager(tmp_path) -> KernelManager:
    """A KernelManager for a "python3" kernelspec that runs ``sys.executable``."""
    spec_dir = Path(tmp_path) / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    ksm = KernelSpecManager(
        kernel_dirs=[str(Path(tmp_path) / "kernels")], ensure_native_kernel=False
    )
    assert ksm.get_kernel_spec("python3").argv[0] == sys.executable
    return KernelManager(kernel_name="python3", kernel_spec_manager=ksm)


def execute(nb, tmp_path):
    """Run every cell of ``nb`` in place (outputs are stored in ``nb``); returns the manager."""
    km = _kernel_manager(tmp_path)
    client = nbclient.NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    try:
        client.execute(cleanup_kc=True)  # raises CellExecutionError on any failing cell
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return km


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "01_hessian_spectra_vs_delta.ipynb",
        "02_validating_bbp.ipynb",
        "03_benchmarking_eigensolvers.ipynb",
        "04_phase_diagram_and_grokking.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_with_its_outputs(path):
    """Every code cell ran, in order, without an error, and every figure is in the file."""
    nb = nbformat.read(path, as_version=4)
    cells = _code_cells(nb)
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), path.name
    outputs = [o for c in cells for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"], path.name
    assert any("image/png" in o.get("data", {}) for o in outputs), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_uses_the_toolkit_and_no_development_notes(path):
    """No private copy of ``rmt.overlaps``, no note about development versions."""
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in _code_cells(nb))
    assert not re.search(r"def \w*overlap", code), path.name
    text = "\n".join(c.source for c in nb.cells)
    assert "development version" not in text.lower(), path.name
    assert "grid steps" not in text, path.name  # jargon: say what the smoothing is for


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    km = execute(nb, tmp_path)  # a copy in memory: the committed file is left alone
    assert km.kernel_spec.argv[0] == sys.executable
    assert not [o for c in _code_cells(nb) for o in c.outputs if o.output_type == "error"]


def drop_environment_warnings(nb):
    """Remove the stderr warnings of the environment that ran the notebook (tqdm's note that
    ipywidgets is missing names a local path): readers of the committed file do not need them."""
    for cell in _code_cells(nb):
        cell.outputs = [
            o
            for o in cell.outputs
            if not (o.output_type == "stream" and o.name == "stderr" and "TqdmWarning" in o.text)
        ]
    return nb


def main(paths) -> None:
    """Execute each notebook of ``paths`` and save it with its outputs."""
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        with tempfile.TemporaryDirectory() as tmp:
            execute(nb, tmp)
        nbformat.write(drop_environment_warnings(nb), p)
        print(f"executed and saved {p}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:] or NOTEBOOKS)
