"""The PNG plot: one panel per (operation, head dim, mask), N on a log axis, one line per
implementation. series() and layout() shape the data (pure Python); draw() needs matplotlib,
imported only there."""

from ._result import OK
from ._spec import IMPL_LABELS, IMPLS, OP_TITLES, format_n, groups

METRICS = {"tflops": "TFLOP/s", "time": "median time (ms)"}


def series(results, config, metric):
    """{group: {impl: [(N, y), ...] sorted by N}} over the cells that ran; y is TFLOP/s or the
    median ms. Implementations with no point in a group are left out of it."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    out = {}
    for g in groups(config.head_dims, config.causal_modes, config.ops):
        lines = {}
        for impl in config.impls:
            pts = sorted((r.cell.n, r.tflops if metric == "tflops" else r.median_ms)
                         for r in results
                         if (r.cell.op, r.cell.d, r.cell.causal, r.cell.impl) == (g.op, g.d, g.causal, impl)
                         and r.status == OK)
            pts = [(n, y) for n, y in pts if y is not None]
            if pts:
                lines[impl] = pts
        out[g] = lines
    return out


def layout(config):
    """(rows, columns, {group: (row, column)}): a row per operation, a column per head dim and
    mask."""
    columns = [(d, c) for d in config.head_dims for c in config.causal_modes]
    where = {g: (config.ops.index(g.op), columns.index((g.d, g.causal)))
             for g in groups(config.head_dims, config.causal_modes, config.ops)}
    return len(config.ops), len(columns), where


def panel_title(g):
    short = OP_TITLES[g.op].split(":")[0].split(" (")[0]
    return f"{short}, d={g.d}{', causal' if g.causal else ''}"


def matplotlib_missing():
    """None when matplotlib can be imported, else the reason."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        return f"matplotlib is not installed ({e})"
    return None


def draw(path, results, config, metric, title):
    """Writes the PNG. Returns None, or why no plot was written (matplotlib missing)."""
    missing = matplotlib_missing()
    if missing:
        return missing
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(results, config, metric)
    rows, cols, where = layout(config)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    # One colour and marker per implementation in every panel (the legend is shared).
    style = {impl: (f"C{i}", "os^v<>"[i % 6]) for i, impl in enumerate(IMPLS)}
    for g, (row, col) in where.items():
        ax = axes[row][col]
        for impl, pts in data[g].items():
            xs, ys = zip(*pts)
            color, marker = style[impl]
            ax.plot(xs, ys, color=color, marker=marker, markersize=4,
                    linewidth=2.2 if impl == "flashbob" else 1.2, label=IMPL_LABELS[impl])
        ax.set_xscale("log", base=2)
        ax.set_xticks(config.ns)
        ax.set_xticklabels([format_n(n) for n in config.ns], fontsize=7)
        if metric == "time":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(panel_title(g), fontsize=9)
        ax.grid(True, alpha=0.3)
        if col == 0:
            ax.set_ylabel(METRICS[metric], fontsize=8)
        if row == rows - 1:
            ax.set_xlabel("N = M", fontsize=8)
    handles, labels = [], []
    for ax in axes.flat:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
