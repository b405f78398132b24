"""Whether long work shows a progress bar: the caller's choice, or a terminal that watches."""

from __future__ import annotations

import sys


def progress_enabled(progress=None) -> bool:
    """Whether to show progress bars.

    ``True`` and ``False`` are the caller's choice and are kept (``True`` forces the bars, into
    a file too); ``None``, the default of the commands and the library, shows them only where
    someone watches: when stderr is a terminal, or the stream of a Jupyter kernel (where
    ``tqdm.auto`` draws a widget).  Redirected to a file or a pipe, stderr gets no bar text.

    Parameters
    ----------
    progress : bool or None
        The caller's choice, or None to decide by stderr.

    Returns
    -------
    bool

    Examples
    --------
    >>> from rmt.progress import progress_enabled
    >>> progress_enabled(True), progress_enabled(False), progress_enabled(0)
    (True, False, False)
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
