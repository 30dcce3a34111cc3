"""The ``/preview`` HTML page: one tile per stream, an MJPEG ``<img>`` and the stream's numbers,
refreshed from ``/status`` every second by a few lines of inline JavaScript. No external assets.

A browser opens at most six HTTP/1.1 connections to one server, and each MJPEG response keeps
one: with more streams the page would stall (its ``/status`` poll included). So the first
:data:`MJPEG_TILES` tiles are MJPEG, and the others show a snapshot (``/preview/<id>.jpg``)
renewed every second.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MJPEG_TILES", "preview_page", "stream_label", "stream_text"]

#: tiles shown as MJPEG; the others renew a snapshot every second (see the module docstring)
MJPEG_TILES = 4

_STYLE = """
body{margin:0;background:#1b1d21;color:#e6e6e6;font:14px/1.35 system-ui,sans-serif}
header{padding:8px 12px;background:#2a2d33}
header b{font-weight:600} #err{color:#ff8080;margin-left:1em}
#tiles{display:flex;flex-wrap:wrap;gap:10px;padding:10px}
.tile{width:400px;background:#26282d;border-radius:4px;overflow:hidden}
.tile h2{font-size:14px;margin:0;padding:6px 8px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.tile img{display:block;width:400px;height:225px;object-fit:contain;background:#000}
.tile .info{padding:6px 8px;font-family:ui-monospace,monospace;font-size:12px;white-space:pre-line}
"""

# Tiles are created for streams that appear in /status, and their text updated every second.
_SCRIPT = """
const tiles = document.getElementById("tiles"), MJPEG_TILES = __MJPEG_TILES__;
function n(v, d) { return (v === null || v === undefined) ? "-" : Number(v).toFixed(d); }
function label(s) { return s.camera ? s.camera + " (" + s.source + ")" : s.source; }
function text(s) {
  const lat = s.latency_ms || {};
  return "state " + (s.state || s.status) + "  status " + s.status + "\\n" +
    "fps " + n(s.fps, 1) + "  latency p50 " + n(lat.p50, 1) + " ms  p99 " + n(lat.p99, 1) + " ms\\n" +
    "frames " + s.frames + "  detections " + s.detections + "  drops " + s.drops +
    "  reconnects " + s.reconnects;
}
function tile(s) {
  let t = document.getElementById("tile-" + s.stream_id);
  if (t) return t;
  t = document.createElement("div");
  t.className = "tile"; t.id = "tile-" + s.stream_id; t.dataset.stream = s.stream_id;
  const h = document.createElement("h2"), img = document.createElement("img"), info = document.createElement("div");
  if (tiles.children.length < MJPEG_TILES) img.src = "/preview/" + s.stream_id + ".mjpg";
  else img.className = "snap";
  img.dataset.stream = s.stream_id; img.alt = "stream " + s.stream_id;
  info.className = "info";
  t.append(h, img, info); tiles.append(t);
  return t;
}
function snapshots() {  // the tiles past MJPEG_TILES: a new snapshot once the last one is in
  for (const img of document.querySelectorAll("img.snap")) {
    if (img.dataset.busy === "1") continue;
    img.dataset.busy = "1";
    img.onload = img.onerror = () => { img.dataset.busy = "0"; };
    img.src = "/preview/" + img.dataset.stream + ".jpg?t=" + Date.now();
  }
}
async function poll() {
  try {
    const r = await fetch("/status", {cache: "no-store"});
    const st = await r.json();
    for (const s of st.streams || []) {
      const t = tile(s);
      t.querySelector("h2").textContent = "#" + s.stream_id + " " + label(s);
      t.querySelector(".info").textContent = text(s);
    }
    snapshots();
    document.getElementById("err").textContent = "";
    document.getElementById("updated").textContent = new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("err").textContent = "status unavailable (" + e + ")";
  }
  setTimeout(poll, 1000);
}
poll();
"""


def stream_label(s: Mapping[str, Any]) -> str:
    """``"door (rtsp://cam/...)"`` for a camera, else the stream's (masked) source."""
    source = str(s.get("source", ""))
    return f"{s['camera']} ({source})" if s.get("camera") else source


def stream_text(s: Mapping[str, Any]) -> str:
    """The tile's numbers, as the page's script writes them."""

    def n(v: Any, d: int) -> str:
        return "-" if v is None else f"{float(v):.{d}f}"

    lat = s.get("latency_ms") or {}
    return (
        f"state {s.get('state') or s.get('status')}  status {s.get('status')}\n"
        f"fps {n(s.get('fps'), 1)}  latency p50 {n(lat.get('p50'), 1)} ms  p99 {n(lat.get('p99'), 1)} ms\n"
        f"frames {s.get('frames')}  detections {s.get('detections')}  drops {s.get('drops')}"
        f"  reconnects {s.get('reconnects')}"
    )


def preview_page(streams: Sequence[Mapping[str, Any]]) -> bytes:
    """The page, with a tile for each of ``streams`` (entries of ``/status``'s ``streams``:
    ``stream_id``, ``source``, ``camera``, ``state``, ``status``, ``fps``, ``latency_ms``, ...)."""
    esc = html.escape
    tiles = []
    for i, s in enumerate(streams):
        sid = int(s["stream_id"])
        img = (f'src="/preview/{sid}.mjpg"' if i < MJPEG_TILES else 'class="snap"')  # the script loads it
        tiles.append(
            f'<div class="tile" id="tile-{sid}" data-stream="{sid}"><h2>#{sid} {esc(stream_label(s))}</h2>'
            f'<img {img} data-stream="{sid}" alt="stream {sid}"><div class="info">{esc(stream_text(s))}</div></div>'
        )
    body = "\n".join(tiles)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vidpipe preview</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<header><b>vidpipe preview</b> &middot; <a href=\"/status\" style=\"color:#9cf\">status</a>"
        " &middot; <a href=\"/metrics\" style=\"color:#9cf\">metrics</a> &middot; updated <span id=\"updated\">-</span>"
        "<span id=\"err\"></span></header>"
        f"<div id=\"tiles\">{body}</div><script>{_SCRIPT.replace('__MJPEG_TILES__', str(MJPEG_TILES))}</script>"
        "</body></html>\n"
    ).encode()
