"""The report's page: one HTML file with its style inside, nothing fetched. A Content-Security-Policy
says so to the browser too (no script, no style or image but the file's own and ``data:``), so
even a figure that slipped in with a URL would not be loaded. Readable at 1,280 px (two charts a
row), on a phone (one a row, wide tables scroll in their box) and printed (no page break inside a
chart or a table row, colours kept)."""
from __future__ import annotations

from html import escape
from typing import Iterable

POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STYLE = """
:root { --ink: #1b1f24; --muted: #5b6570; --line: #d0d7de; --bg: #ffffff; --band: #f4f6f8; --warn: #b35900; }
* { box-sizing: border-box; }
body { margin: 0 auto; padding: 16px 24px 40px; max-width: 1240px; color: var(--ink); background: var(--bg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; }
h1 { font-size: 22px; margin: 8px 0 4px; overflow-wrap: anywhere; }
h2 { font-size: 17px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 16px 0 6px; }
p.lead { color: var(--muted); margin: 0 0 12px; overflow-wrap: anywhere; }
p.note { color: var(--muted); margin: 4px 0; }
p.warn, li.warn { color: var(--warn); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 12px 24px; }
figure { margin: 0; break-inside: avoid; }
figcaption { font-weight: 600; margin-bottom: 2px; }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart .grid { stroke: #e6e9ec; stroke-width: 1; }
svg.chart .frame { fill: none; stroke: var(--line); }
svg.chart .tick, svg.chart .axis { font-size: 10px; fill: var(--muted); }
svg.chart .series { fill: none; stroke-linejoin: round; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 12px; font-size: 12px; color: var(--muted); }
.legend .swatch { display: inline-block; width: 12px; height: 3px; margin: 0 4px 3px 0; vertical-align: middle; }
.bars .bar { display: grid; grid-template-columns: minmax(90px, 220px) 1fr minmax(80px, max-content); gap: 8px;
             align-items: center; margin: 3px 0; }
.bars .bar svg { width: 100%; height: 14px; display: block; background: var(--band); }
.bars .bar .label { overflow-wrap: anywhere; }
.bars .bar.highlight .label { font-weight: 700; color: var(--warn); }
.bars rect.slowest { fill: none; stroke: var(--warn); stroke-width: 1.5; vector-effect: non-scaling-stroke; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
td.text { overflow-wrap: anywhere; }
tr { break-inside: avoid; }
table.confusion td { min-width: 2.4em; text-align: center; }
table.confusion th { text-align: center; }
.gallery { display: flex; flex-wrap: wrap; gap: 10px; }
.gallery figure { width: 96px; font-size: 11px; text-align: center; }
.gallery img { width: 84px; height: 84px; image-rendering: pixelated; border: 1px solid var(--line);
               object-fit: contain; background: var(--band); }
pre { background: var(--band); padding: 8px; overflow-x: auto; font-size: 12px; white-space: pre-wrap;
      overflow-wrap: anywhere; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
@media (max-width: 760px) {
  body { padding: 10px 12px 32px; font-size: 15px; }
  .charts { grid-template-columns: 1fr; }
  dl.facts { grid-template-columns: 1fr; gap: 0; }
  dl.facts dd { margin-bottom: 6px; }
  .bars .bar { grid-template-columns: 1fr; gap: 2px; }
}
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  h2 { break-after: avoid; }
  .charts { grid-template-columns: repeat(2, minmax(0, 1fr)); }
  .scroll { overflow: visible; }
  pre { white-space: pre-wrap; }
}
"""


def page(title: str, subtitle: str, sections: Iterable[str], footer: str) -> str:
    """The whole document; ``title`` and ``subtitle`` are escaped here, sections are HTML already."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>'
            f'<h1>{escape(title)}</h1><p class="lead">{escape(subtitle)}</p>\n'
            + "\n".join(s for s in sections if s)
            + f'\n<footer>{escape(footer)}</footer></body></html>\n')


def section(heading: str, body: str, anchor: str = "") -> str:
    """A titled part; "" when it has nothing to show."""
    if not body:
        return ""
    ident = f' id="{escape(anchor)}"' if anchor else ""
    return f"<section{ident}><h2>{escape(heading)}</h2>{body}</section>"


def facts(pairs: Iterable[tuple[str, str]]) -> str:
    """A list of (name, value) lines, values escaped; pairs with an empty value left out."""
    rows = "".join(f"<dt>{escape(name)}</dt><dd>{escape(value)}</dd>" for name, value in pairs if value)
    return f'<dl class="facts">{rows}</dl>' if rows else ""


def table(header: list[str], rows: list[list[str]], *, text_columns: Iterable[int] = (0,), cls: str = "") -> str:
    """A table of escaped cells in a box that scrolls sideways on a narrow screen."""
    if not rows:
        return ""
    texts = set(text_columns)
    head = "".join(f'<th{" class=text" if i in texts else ""}>{escape(h)}</th>' for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td{" class=text" if i in texts else ""}>{escape(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    klass = f' class="{cls}"' if cls else ""
    return f'<div class="scroll"><table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def note(text: str, warn: bool = False) -> str:
    return f'<p class="{"warn" if warn else "note"}">{escape(text)}</p>' if text else ""
