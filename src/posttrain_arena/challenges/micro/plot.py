"""The protocol's picture: each control's change with its 95% interval (PNG and SVG)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def plot_intervals(scores: Mapping[str, Any], out_dir: Path, title: str) -> list[Path]:
    """Write `intervals.png` and `intervals.svg` into `out_dir`: one row per control
    (in the order given), its change in points and its interval; returns the paths.
    `scores` values need delta_pp, ci95_low_pp and ci95_high_pp."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    names = list(scores)
    plt.rcParams["svg.fonttype"] = "none"  # labels stay text in the SVG (searchable)
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(names) + 1.4))
    try:
        for row, name in enumerate(reversed(names)):
            s = scores[name]
            ax.plot([s.ci95_low_pp, s.ci95_high_pp], [row, row], color="tab:blue", lw=2)
            ax.plot([s.delta_pp], [row], "o", color="tab:blue")
        ax.axvline(0, color="grey", lw=1, ls="--")
        ax.set_yticks(range(len(names)), list(reversed(names)))
        ax.set_xlabel("change in held-out pass rate (percentage points), 95% interval")
        ax.set_title(title)
        fig.tight_layout()
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [out_dir / "intervals.png", out_dir / "intervals.svg"]
        for path in paths:
            fig.savefig(path)
    finally:
        plt.close(fig)
    return paths
