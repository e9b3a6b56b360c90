"""The leaderboard plot, drawn on the server as inline SVG (no scripts, no CDN).

One row per collection: a dot at its mean change and a bar over its 95% interval, with a
zero line; rejected results follow as hollow, grey, unranked rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from posttrain_arena.service.schemas import Leaderboard

WIDTH, ROW, TOP, LEFT, RIGHT = 640, 26, 28, 190, 24


@dataclass(frozen=True)
class _Row:
    label: str
    value: float
    low: float | None
    high: float | None
    rejected: bool


def _ticks(lo: float, hi: float) -> list[float]:
    span = hi - lo
    raw = span / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def leaderboard_svg(board: Leaderboard) -> str:
    """An SVG forest plot of each collection's change (pp) and 95% interval."""
    rows = [_Row(f"#{e.rank} {e.collection_name}", e.mean_change_pp, e.ci_low, e.ci_high,
                 False) for e in board.ranked]
    rows += [_Row(f"rejected: {r.collection_name} (run {r.run_id})", r.change_pp, None, None,
                  True) for r in board.rejected[:10]]
    if not rows:
        return ""
    values = [0.0] + [v for r in rows for v in (r.value, r.low, r.high) if v is not None]
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.08, 1.0)
    lo, hi = lo - pad, hi + pad
    plot_w = WIDTH - LEFT - RIGHT
    height = TOP + ROW * len(rows) + 30

    def x(v: float) -> float:
        return LEFT + (v - lo) / (hi - lo) * plot_w

    out = [f'<svg class="plot" role="img" viewBox="0 0 {WIDTH} {height}" '
           f'width="{WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
           "<title>Change in held-out pass rate (pp) with 95% interval</title>"]
    axis_y = TOP + ROW * len(rows) + 4
    for t in _ticks(lo, hi):
        out.append(f'<line x1="{x(t):.1f}" y1="{TOP - 6}" x2="{x(t):.1f}" y2="{axis_y}" '
                   'class="grid"/>')
        out.append(f'<text x="{x(t):.1f}" y="{axis_y + 16}" class="tick" '
                   f'text-anchor="middle">{t:+g}</text>')
    out.append(f'<line x1="{x(0):.1f}" y1="{TOP - 10}" x2="{x(0):.1f}" y2="{axis_y}" '
               'class="zero"/>')
    out.append(f'<text x="{LEFT}" y="14" class="tick">change in pass rate, pp '
               '(dot: mean; bar: 95% interval)</text>')
    for i, r in enumerate(rows):
        cy = TOP + ROW * i + ROW / 2
        cls = "rejected" if r.rejected else "ranked"
        label = escape(r.label if len(r.label) <= 28 else r.label[:27] + "…")
        out.append(f'<text x="{LEFT - 8}" y="{cy + 4:.1f}" text-anchor="end" '
                   f'class="label {cls}">{label}</text>')
        if r.low is not None and r.high is not None:
            out.append(f'<line x1="{x(r.low):.1f}" y1="{cy:.1f}" x2="{x(r.high):.1f}" '
                       f'y2="{cy:.1f}" class="ci {cls}"/>')
        tip = escape(f"{r.label}: {r.value:+.1f} pp"
                     + (f" [{r.low:+.1f}, {r.high:+.1f}]" if r.low is not None
                        and r.high is not None else ""))
        out.append(f'<circle cx="{x(r.value):.1f}" cy="{cy:.1f}" r="5" class="dot {cls}">'
                   f"<title>{tip}</title></circle>")
    out.append("</svg>")
    return "\n".join(out)
