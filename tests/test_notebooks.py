"""Execute every notebook in notebooks/ (the executed examples of STYLE.md's curvlinops anchor).

Each notebook contains `assert` cells that compare theory with simulation, closed forms or dense
references, so a broken toolkit fails here.  The kernel is a "python3" kernelspec written to a
temporary directory whose command is this interpreter (``sys.executable``), so the notebooks
always run in the environment under test, whatever kernelspecs the user has installed.
"""

import json
import sys
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
    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")], ensure_native_kernel=False)
    assert ksm.get_kernel_spec("python3").argv[0] == sys.executable
    return KernelManager(kernel_name="python3", kernel_spec_manager=ksm)


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == [
        "01_hessian_spectra_vs_delta.ipynb",
        "02_validating_bbp.ipynb",
        "03_benchmarking_eigensolvers.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # notebooks are committed without outputs
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, path.name
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
    assert km.kernel_spec.argv[0] == sys.executable
