"""Benchmark output from rows of dicts: a markdown table, JSON, and a PNG bar chart.

Generic: every benchmark (decode, e2e, images, streams) hands over ``rows`` (one dict per peer,
same keys) and picks the columns and the value to plot. The PNG is drawn with PIL (no matplotlib).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["VideoBenchResult", "bar_chart_png", "describe_row", "format_value", "line_chart_png", "markdown_table",
           "write_json", "write_markdown", "write_report"]  # fmt: skip


def format_value(value: Any, spec: str | None = None) -> str:
    """A table cell: ``None`` -> ``-``; floats with ``spec`` or a sensible default; ints with
    thousands separators."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if spec is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def describe_row(
    row: Mapping[str, Any], *, name: str, value: str = "fps", unit: str = "frames/s", count: str = "frames"
) -> str:
    """One log line for a bench row: ``"bikes.mp4 baseline: 412 frames/s (250 frames in 0.61 s,
    CPU 180%)"``, or why the peer did not run (``"... skipped: needs a CUDA device"``)."""
    v, note = row.get(value), str(row.get("note") or "")
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        if note.startswith("failed"):
            return f"{name}: {note}"
        return f"{name}: skipped: {note or 'no result'}"
    parts = []
    if row.get(count) is not None:
        seconds = row.get("wall_s")
        parts.append(f"{format_value(row[count])} {count}" + (f" in {seconds:.2f} s" if seconds else ""))
    if row.get("cpu_percent") is not None:
        parts.append(f"CPU {row['cpu_percent']:.0f}%")
    if note:
        parts.append(note)
    return f"{name}: {format_value(float(v))} {unit}" + (f" ({'; '.join(parts)})" if parts else "")


def markdown_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    formats: Mapping[str, str] | None = None,
) -> str:
    """A GitHub markdown table of ``rows``; ``columns`` picks and orders keys (default: the keys
    of the first row), ``headers`` renames them, ``formats`` gives format specs per column.
    Numeric columns are right-aligned."""
    if not rows:
        return "(no rows)\n"
    cols = list(columns) if columns is not None else list(rows[0].keys())
    headers = headers or {}
    formats = formats or {}
    cells = [[format_value(r.get(c), formats.get(c)) for c in cols] for r in rows]
    numeric = [
        all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) or r.get(c) is None for r in rows)
        for c in cols
    ]
    names = [headers.get(c, c) for c in cols]
    widths = [max(len(n), *(len(row[i]) for row in cells)) for i, n in enumerate(names)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in zip(widths, numeric)) + "|"
    return "\n".join([line(names), rule, *(line(r) for r in cells)]) + "\n"


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON (tuples, paths, dataclasses, NaN handled)."""
    from vidpipe.summary import jsonable

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(jsonable(obj), indent=2) + "\n")
    return path


def write_markdown(
    path: str | Path,
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str | None = None,
    columns: Sequence[str] | None = None,
    headers: Mapping[str, str] | None = None,
    formats: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
) -> Path:
    """A markdown file: optional ``# title``, the table, then ``notes`` as a bullet list."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (f"# {title}\n\n" if title else "") + markdown_table(rows, columns, headers=headers, formats=formats)
    if notes:
        text += "\n" + "".join(f"- {n}\n" for n in notes)
    path.write_text(text)
    return path


_PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
            (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]  # fmt: skip


def bar_chart_png(
    path: str | Path,
    rows: Sequence[Mapping[str, Any]],
    *,
    label: str,
    value: str,
    title: str = "",
    unit: str = "",
    highlight: Sequence[str] = (),
    width: int = 960,
) -> Path:
    """A horizontal bar chart of ``row[value]`` per ``row[label]`` (rows without a numeric value
    are drawn as "n/a"), written as PNG with PIL. Labels in ``highlight`` get a bold outline."""
    from PIL import Image, ImageDraw, ImageFont

    font = _font(ImageFont, 15)
    small = _font(ImageFont, 13)
    bar_h, gap, top, left_pad, right_pad = 26, 10, 56 if title else 20, 14, 110
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    label_w = max([probe.textlength(str(r.get(label, "")), font=font) for r in rows] + [40])
    x0 = int(left_pad + label_w + 12)
    plot_w = max(100, width - x0 - right_pad)
    height = top + len(rows) * (bar_h + gap) + 30
    img = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(img)
    if title:
        d.text((left_pad, 16), title, fill="black", font=_font(ImageFont, 19))
    vals = [r.get(value) for r in rows]
    nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    vmax = max(nums) if nums and max(nums) > 0 else 1.0
    for i, (r, v) in enumerate(zip(rows, vals)):
        y = top + i * (bar_h + gap)
        name = str(r.get(label, ""))
        d.text((left_pad, y + 5), name, fill="black", font=font)
        if v in nums:
            w = max(1, int(plot_w * v / vmax))
            colour = _PALETTE[i % len(_PALETTE)]
            strong = name in highlight
            d.rectangle(
                [x0, y, x0 + w, y + bar_h], fill=colour, outline="black" if strong else None, width=3 if strong else 1
            )
            d.text((x0 + w + 6, y + 6), f"{format_value(float(v))} {unit}".strip(), fill="black", font=small)
        else:
            d.text((x0 + 4, y + 6), "n/a", fill=(120, 120, 120), font=small)
    d.line([x0, top - 4, x0, height - 24], fill=(80, 80, 80))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format="PNG")
    return path


def line_chart_png(
    path: str | Path,
    rows: Sequence[Mapping[str, Any]],
    *,
    x: str,
    series: Sequence[str],
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    width: int = 960,
    height: int = 480,
) -> Path:
    """A line chart of ``row[s]`` against ``row[x]`` for each key ``s`` in ``series`` (one colour
    each, a legend on top), written as PNG with PIL. Non-numeric points are skipped."""
    from PIL import Image, ImageDraw, ImageFont

    font, small = _font(ImageFont, 15), _font(ImageFont, 12)
    left, right, top, bottom = 80, 24, 70 if title else 40, 50

    def num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    xs = [r.get(x) for r in rows if num(r.get(x))]
    ys = [r.get(k) for r in rows for k in series if num(r.get(k))]
    img = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(img)
    if title:
        d.text((left, 12), title, fill="black", font=_font(ImageFont, 19))
    x0, x1, y0, y1 = left, width - right, height - bottom, top
    d.line([x0, y1, x0, y0, x1, y0], fill=(80, 80, 80))
    if xs and ys:
        xmin, xmax = min(xs), max(xs)
        ymin, ymax = min(0.0, min(ys)), max(ys)
        xspan, yspan = (xmax - xmin) or 1.0, (ymax - ymin) or 1.0

        def at(xv: float, yv: float) -> tuple[float, float]:
            return x0 + (x1 - x0) * (xv - xmin) / xspan, y0 - (y0 - y1) * (yv - ymin) / yspan

        for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
            yv = ymin + frac * yspan
            _, py = at(xmin, yv)
            d.line([x0 - 4, py, x1, py], fill=(225, 225, 225))
            d.text((6, py - 7), format_value(float(yv)), fill="black", font=small)
        for xv in sorted(set(xs)) if len(set(xs)) <= 12 else (xmin, (xmin + xmax) / 2, xmax):
            px, _ = at(xv, ymin)
            d.text((px - 10, y0 + 6), format_value(float(xv)), fill="black", font=small)
        lx = left
        for i, key in enumerate(series):
            colour = _PALETTE[i % len(_PALETTE)]
            pts = [at(r[x], r[key]) for r in rows if num(r.get(x)) and num(r.get(key))]
            if len(pts) > 1:
                d.line(pts, fill=colour, width=3)
            for px, py in pts:
                d.ellipse([px - 3, py - 3, px + 3, py + 3], fill=colour)
            d.rectangle([lx, top - 22, lx + 14, top - 10], fill=colour)
            d.text((lx + 18, top - 25), key, fill="black", font=small)
            lx += int(d.textlength(key, font=small)) + 40
    if x_label:
        d.text(((x0 + x1) // 2 - 40, height - 24), x_label, fill="black", font=font)
    if y_label:
        d.text((6, top - 45 if title else 4), y_label, fill="black", font=small)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format="PNG")
    return path


def _font(image_font, size: int):
    for name in ("DejaVuSans.ttf", "Arial.ttf", "LiberationSans-Regular.ttf"):
        try:
            return image_font.truetype(name, size)
        except OSError:
            continue
    try:
        return image_font.load_default(size=size)  # Pillow >= 10.1
    except TypeError:
        return image_font.load_default()


def write_report(
    out_dir: str | Path,
    name: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str,
    label: str,
    value: str,
    unit: str = "",
    columns: Sequence[str] | None = None,
    headers: Mapping[str, str] | None = None,
    formats: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    meta: Mapping[str, Any] | None = None,
    highlight: Sequence[str] = (),
) -> dict[str, Path]:
    """``name.md``, ``name.json`` (``{"title", "meta", "rows", "notes"}``) and ``name.png`` in
    ``out_dir``; returns their paths by kind."""
    out = Path(out_dir)
    md = write_markdown(
        out / f"{name}.md", rows, title=title, columns=columns, headers=headers, formats=formats, notes=notes
    )
    js = write_json(
        out / f"{name}.json", {"title": title, "meta": dict(meta or {}), "rows": list(rows), "notes": list(notes)}
    )
    png = bar_chart_png(
        out / f"{name}.png", rows, label=label, value=value, title=title, unit=unit, highlight=highlight
    )
    return {"markdown": md, "json": js, "png": png}


@dataclass
class VideoBenchResult:
    """A video benchmark's outcome: one row per (input, peer) with ``fps`` and friends, the inputs
    (``name``, ``path``, ``describe``), the machine, and per input the issue's targets checked on
    these numbers. ``title``/``columns``/``headers``/``formats`` shape the report; the peers in
    ``highlight`` are outlined in the chart."""

    rows: list[dict]
    inputs: list[dict]
    machine: dict
    targets: dict = field(default_factory=dict)
    title: str = "Video"
    columns: Sequence[str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    formats: Mapping[str, str] = field(default_factory=dict)
    highlight: tuple[str, ...] = ()
    name: str = "bench"

    def markdown(self) -> str:
        return markdown_table(self.rows, self.columns, headers=self.headers, formats=self.formats)

    def write(self, out_dir: str | Path, name: str | None = None) -> dict[str, Path]:
        """``name.md``/``.json``/``.png`` (frames/s per input and peer) in ``out_dir``
        (``name`` defaults to the benchmark's, e.g. ``bench_decode``)."""
        name = name or self.name
        notes = [f"input {i['name']}: {i['describe']}" for i in self.inputs]
        notes += [f"{k}: {v}" for k, v in self.machine.items()]
        notes += [f"targets {k}: {v}" for k, v in self.targets.items()]
        rows = [{**r, "label": f"{r['input']} {r['peer']}"} for r in self.rows]
        return write_report(
            out_dir, name, rows, title=self.title, label="label", value="fps", unit="frames/s",
            columns=self.columns, headers=self.headers, formats=self.formats, notes=notes,
            meta={"inputs": self.inputs, "machine": self.machine, "targets": self.targets},
            highlight=[r["label"] for r in rows if r["peer"] in self.highlight],
        )  # fmt: skip
