"""The two drawings of a fact's page, as inline SVG made on the server (no script).

Owns: :func:`timeline` — a supersession chain on both time axes: when each version
holds (valid time: from ``validFrom``, else ``eventTime``, else its ingest time, to
``validTo`` or the next version's start) and since when it is known (its ingest time),
with the page's "as of" and "known at" marked; and :func:`graph` — the nodes and edges
``why`` gives around a fact, on a circle. Every label is escaped. Imports the HTML helpers.
"""

from __future__ import annotations

import math
import time
from typing import Any

from holomem.api.doors.ui.html import Here, esc, first_time, when

WIDTH = 760
ROW = 22
LEFT = 70
#: The most nodes the graph draws (``why`` is bounded too; this keeps the drawing legible).
MAX_NODES = 24


def start(r: dict[str, Any]) -> int:
    """When a version starts to hold: its validity start, else its event time, else its
    ingest time (a time of 0, 1970-01-01, is a time like any other)."""
    begins = first_time(r, "validFrom", "eventTime")
    return int(r["ingestTime"]) if begins is None else begins


def _end(history: list[dict[str, Any]], starts: list[int], i: int) -> int | None:
    """When version ``i`` stops holding: its ``validTo``, else the next one's start."""
    end = history[i].get("validTo")
    if end is not None:
        return int(end)
    return starts[i + 1] if i + 1 < len(history) else None


def _open_end(r: dict[str, Any], shown: set[str]) -> str:
    """What ends a version with no end of its own among the versions drawn: a later
    version beyond them (a window of a longer chain), or nothing yet."""
    later = any(s not in shown for s in r.get("supersededBy") or ())
    return "a later version not shown" if later else "open"


def timeline(history: list[dict[str, Any]], fid: str, moment: Any) -> str:
    """The chain's versions on the valid-time axis and the known axis (see module doc)."""
    if not history:
        return ""
    now = int(time.time() * 1000)
    starts = [start(r) for r in history]
    ends = [_end(history, starts, i) for i in range(len(history))]
    marks = [t for t in (moment.as_of, moment.known_at) if t is not None]
    lo = min([*starts, *(int(r["ingestTime"]) for r in history), *marks])
    hi = max([now, *(e for e in ends if e is not None), *marks])
    span = max(hi - lo, 1)
    lo -= span // 20
    hi += span // 20
    span = hi - lo
    inner = WIDTH - LEFT - 10

    def x(t: int) -> float:
        return float(LEFT + inner * (t - lo) / span)

    n = len(history)
    shown = {r["id"] for r in history}
    height = ROW * (2 * n + 3) + 30
    out = [f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
           f'height="{height}" role="img" aria-label="the history on both time axes">']
    y = 14
    out.append(f'<text x="4" y="{y}" class="axis">valid time: when each version holds</text>')
    for i, r in enumerate(history):
        y = 20 + ROW * (i + 1)
        end = ends[i]
        x0, x1 = x(starts[i]), x(end if end is not None else hi)
        cls = "bar this" if r["id"] == fid else "bar"
        out.append(f'<text x="4" y="{y + 13}" class="label">v{i + 1}</text>'
                   f'<rect class="{cls} s-{esc(r["status"])}" x="{x0:.1f}" y="{y}" '
                   f'width="{max(x1 - x0, 2):.1f}" height="{ROW - 6}">'
                   f'<title>v{i + 1} {esc(r["id"])}: holds {esc(when(starts[i]))} to '
                   f'{esc(when(ends[i]) or _open_end(r, shown))}</title></rect>')
    base = 20 + ROW * (n + 1) + 12
    out.append(f'<text x="4" y="{base + 4}" class="axis">known: since each version was '
               "ingested</text>")
    for i, r in enumerate(history):
        y = base + 10 + ROW * i
        x0 = x(r["ingestTime"])
        cls = "bar known this" if r["id"] == fid else "bar known"
        out.append(f'<text x="4" y="{y + 13}" class="label">v{i + 1}</text>'
                   f'<rect class="{cls}" x="{x0:.1f}" y="{y}" width="{max(x(hi) - x0, 2):.1f}" '
                   f'height="{ROW - 6}"><title>v{i + 1} known since '
                   f'{esc(when(r["ingestTime"]))}</title></rect>')
    bottom = base + 10 + ROW * n + 4
    for t, name in ((moment.as_of, "as of"), (moment.known_at, "known at"), (now, "now")):
        if t is None:
            continue
        xt = x(t)
        right = xt > WIDTH - 140  # its label goes to the left of the line
        out.append(f'<line class="mark m-{name.replace(" ", "-")}" x1="{xt:.1f}" y1="18" '
                   f'x2="{xt:.1f}" y2="{bottom}"/><text x="{xt - 3 if right else xt + 3:.1f}" '
                   f'y="{bottom + 12}" class="mark-label"'
                   + (' text-anchor="end"' if right else "")
                   + f">{esc(name)} {esc(when(t)[:10])}</text>")
    out.append(f'<text x="{LEFT}" y="{height - 2}" class="tick">{esc(when(lo)[:10])}</text>'
               f'<text x="{WIDTH - 90}" y="{height - 2}" class="tick">{esc(when(hi)[:10])}'
               "</text></svg>")
    return "".join(out)


def graph(here: Here, why: dict[str, Any], fid: str) -> str:
    """``why``'s nodes on a circle around the fact, its edges as arrows; each node a
    link to its fact's page."""
    nodes = why.get("nodes", [])[:MAX_NODES]
    if len(nodes) <= 1 and not why.get("edges"):
        return '<p class="empty">No links or shared entities around this fact.</p>'
    size, mid, radius = 460, 230, 185
    place: dict[str, tuple[float, float]] = {}
    others = [n for n in nodes if n["id"] != fid]
    place[fid] = (mid, mid)
    for i, n in enumerate(others):
        # a quarter turn off the horizontal, so that two nodes' labels never meet
        angle = -math.pi / 3 + 2 * math.pi * i / max(len(others), 1)
        r = radius * (0.65 if n.get("hop", 1) <= 1 else 1.0)
        place[n["id"]] = (mid + r * math.cos(angle), mid + r * math.sin(angle))
    out = [f'<svg class="graph" viewBox="0 0 {size} {size}" width="{size}" height="{size}" '
           'role="img" aria-label="the links around this fact">'
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
           'markerWidth="6" markerHeight="6" orient="auto-start-reverse">'
           '<path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>']
    for e in why.get("edges", []):
        a, b = place.get(e["fromId"]), place.get(e["toId"])
        if a is None or b is None:
            continue
        # the arrow stops at the circle's edge, where its head shows
        length = max(math.hypot(b[0] - a[0], b[1] - a[1]), 1.0)
        ex, ey = b[0] - (b[0] - a[0]) * 11 / length, b[1] - (b[1] - a[1]) * 11 / length
        out.append(f'<line class="edge" x1="{a[0]:.1f}" y1="{a[1]:.1f}" x2="{ex:.1f}" '
                   f'y2="{ey:.1f}" marker-end="url(#arrow)"/>'
                   f'<text class="edge-label" x="{(a[0] + b[0]) / 2:.1f}" '
                   f'y="{(a[1] + b[1]) / 2 - 3:.1f}">{esc(e["relation"][:24])}</text>')
    for n in nodes:
        px, py = place[n["id"]]
        cls = "node this" if n["id"] == fid else f"node s-{esc(n.get('status', ''))}"
        text = n.get("text", "") or n["id"]
        label = text if len(text) <= 30 else text[:29] + "…"
        out.append(f'<a href="{esc(here.url("/fact", {"id": n["id"]}))}">'
                   f'<circle class="{cls}" cx="{px:.1f}" cy="{py:.1f}" r="9">'
                   f'<title>{esc(n.get("text", "")[:200])}</title></circle>'
                   f'<text class="node-label" x="{px:.1f}" y="{py + 22:.1f}" '
                   f'text-anchor="middle">{esc(label)}</text></a>')
    out.append("</svg>")
    note = ('<p class="hint">The graph stopped at its bound: '
            f'{esc(why.get("bound") or "")}.</p>' if why.get("truncated") else "")
    return "".join(out) + note
