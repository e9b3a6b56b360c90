"""The protocol's intervals plot is written as PNG and SVG, one row per control."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from posttrain_arena.challenges.micro import CONTROLS
from posttrain_arena.challenges.micro.plot import plot_intervals


def test_plot_has_a_row_per_control(tmp_path: Path) -> None:
    scores = {name: SimpleNamespace(delta_pp=10.0 - 5 * i, ci95_low_pp=2.0 - 5 * i,
                                    ci95_high_pp=18.0 - 5 * i)
              for i, name in enumerate(CONTROLS)}
    png, svg = plot_intervals(scores, tmp_path, "test")
    assert png.read_bytes().startswith(b"\x89PNG")
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert all(f">{name}<" in text for name in CONTROLS)
    assert text.count("<path") >= len(CONTROLS)
