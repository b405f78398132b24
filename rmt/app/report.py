"""Terminal tables of the commands: plain text from the rows an experiment returned."""

from __future__ import annotations

import numpy as np


def summarize_by_delta(rows, column, index=0):
    """Mean and standard deviation across seeds of ``column`` at eigen-index ``index``."""
    table = {}
    for r in rows:
        if r.get("index", 0) == index and r.get(column) is not None:
            table.setdefault(r["delta"], []).append(float(r[column]))
    deltas = np.array(sorted(table))
    mean = np.array([np.mean(table[x]) for x in deltas])
    std = np.array([np.std(table[x]) if len(table[x]) > 1 else 0.0 for x in deltas])
    return deltas, mean, std


def variant_label(row) -> str:
    """Short label of one configuration of a threshold table (target, noise, network)."""
    noise = f"+{row['noise']:g}N" if row["noise"] else ""
    return f"{row['target']}{noise}, {row['activation']}/{row['loss']}, m={row['width']}"


def _note(notes, text) -> int:
    """The number of the note ``text`` in ``notes``, appending it when it is new (a reason
    shared by several rows is printed once)."""
    if text not in notes:
        notes.append(text)
    return notes.index(text) + 1


def _with_notes(lines, notes) -> str:
    """``lines`` followed by the numbered notes ``[i] text`` their marks refer to, as one text."""
    return "\n".join([*lines, *(f"[{i}] {text}" for i, text in enumerate(notes, 1))])


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
            mark = f" [{_note(notes, r['reason'])}]"
        lines.append(
            f"{variant_label(r):<{width}} {pop:>9} {r['delta_bbp']:>9.4g} "
            f"{r['delta_alg']:>9.4g} {ratio:>7}{mark}"
        )
    return _with_notes(lines, notes)


def format_sweep_table(rows) -> str:
    """Bottom eigenvalue and overlap per ``delta`` (mean over seeds) next to the predictions."""
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


def format_phase_table(rows, grid, size="") -> str:
    """The cells of a phase diagram, one line each: its axes, ``delta_NN`` ± its standard
    error (or why there is none), ``delta_alg`` and ``delta_pop``; ``size`` (``"d = 4000"``)
    names the size of the DMFT's values in the header when they are not the limit's."""
    names = list(grid)
    labels = [", ".join(f"{a}={r[a]}" for a in names) for r in rows]
    width = max([len("cell"), *map(len, labels)])
    column = f"delta_NN (DMFT{', ' + size if size else ''})"
    head = f"{'cell':<{width}} {column:>17} {'delta_alg':>9} {'delta_pop':>9}"
    lines, notes = [head, "-" * len(head)], []
    for label, r in zip(labels, rows):
        if r["status"] == "found":
            value = f"{float(r['delta_nn']):.3f} ± {float(r['stderr']):.3f}"
        else:
            value = f"{r['status']} [{_note(notes, r['reason'])}]"
        no_pop = r["delta_pop"] is None or not np.isfinite(float(r["delta_pop"]))
        pop = "none" if no_pop else f"{float(r['delta_pop']):.4g}"
        lines.append(f"{label:<{width}} {value:>17} {float(r['delta_alg']):>9.4g} {pop:>9}")
    return _with_notes(lines, notes)


def _length(value, censored) -> str:
    """A plateau length for the terminal: steps, or beyond the step budget."""
    return "> budget" if censored or value is None else f"{float(value):.0f}"


def format_grokking_table(rows) -> str:
    """The grokking-like delay, one line per ``(d, delta)``: the simulated plateau length,
    median [q25, q75] in steps (a quantile on a censored run shows as ``> budget``), the
    predicted length of the law (or why there is none, as a footnote), their ratio and the
    censored runs (``grokking_summary.csv`` rows); where the rows carry it, the outlier's growth
    ``G`` and whether the escape comes before its merge (docs/theory.md 7.7), and the median
    and quartiles of the ``Theta*`` row (7.8)."""
    regimes = any(r.get("regime") for r in rows)
    row_law = any(r.get("row_median") is not None or r.get("row_reason") for r in rows)
    head = (
        f"{'d':>6} {'delta':>7} {'median [q25, q75]':>28} {'predicted':>10} {'ratio':>6} "
        f"{'censored':>9}"
        + (f" {'Theta* row: median [q25, q75]':>30}" if row_law else "")
        + (f" {'G':>5}  escape" if regimes else "")
    )
    lines, notes = [head, "-" * len(head)], []
    for r in rows:
        q = [_length(r[k], r[k + "_censored"]) for k in ("median", "q25", "q75")]
        simulated = f"{q[0]} [{q[1]}, {q[2]}]"
        if r["predicted_steps"] is None:
            predicted = f"none [{_note(notes, r['prediction_reason'] or 'no prediction')}]"
        else:
            predicted = f"{float(r['predicted_steps']):.0f}"
        ratio = "-" if r["ratio"] is None else f"{float(r['ratio']):.2f}"
        censored = f"{r['censored']}/{r['runs']}"
        line = (
            f"{r['d']:>6} {float(r['delta']):>7.4g} {simulated:>28} {predicted:>10} {ratio:>6} "
            f"{censored:>9}"
        )
        if row_law:
            q = [r.get(k) for k in ("row_median", "row_q25", "row_q75")]
            text = "[" + ", ".join("-" if v is None else f"{float(v):.0f}" for v in q[1:]) + "]"
            text = f"{'-' if q[0] is None else f'{float(q[0]):.0f}'} {text}"
            if r.get("row_reason"):
                text += f" [{_note(notes, r['row_reason'])}]"
            line += f" {text:>30}"
        if regimes:
            g = "-" if r.get("growth") is None else f"{float(r['growth']):.2f}"
            line += f" {g:>5}  {r.get('regime') or '-'}"
        lines.append(line)
    return _with_notes(lines, notes)
