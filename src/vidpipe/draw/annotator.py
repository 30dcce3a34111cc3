"""``Annotator``: boxes, labels, lines, zones and privacy blur drawn onto a frame on its device.

::

    from vidpipe.draw import Annotator

    annotate = Annotator(zones=(zone,), blur=("person",))
    for frame in vidpipe.detect("street.mp4", keep_frames=True, track=True):
        image = annotate(frame)          # (3, H, W) uint8 RGB, a new tensor on the frame's device

What is drawn, bottom to top: the blur of the ``blur`` classes' boxes, zones (a light
translucent fill, an outline and the name), lines (with their name), box outlines (colour per
class, or per track id when the box has one; OpenCV's ``cv2.rectangle`` geometry), then one label
per box (``"person 0.87 #12"`` on a filled background of the box's colour, above the box, or
inside it at the top of the frame). Later boxes are drawn over earlier ones and every label over
every outline.

Everything runs as a fixed number of tensor ops on the image's device whatever the number of
boxes: no host sync per box or per frame (the detections are moved to the image's device in one
copy when they live elsewhere). Integer arithmetic only, so CUDA and CPU give the same bytes.
Lines and zones (static) are rasterised once per frame size and device and kept in the
annotator (not shared between annotators).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vidpipe.draw.blur import _check_image, pixelate
from vidpipe.draw.boxes import half_width, outline_template, outline_writes, rect_writes
from vidpipe.draw.labels import label_codes, name_table
from vidpipe.draw.paint import host_reads_free, pack, paint
from vidpipe.draw.palette import palette_tensor
from vidpipe.draw.static import StaticLayer, build_static
from vidpipe.draw.text import GlyphAtlas, build_atlas
from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from vidpipe.types import Detections, FrameResult
    from vidpipe.zones.geometry import Line, Zone

__all__ = ["Annotator", "default_thickness", "default_font_size"]


def default_thickness(height: int, width: int) -> int:
    """Line thickness for a frame: 1 up to 720 px on the short side... then ``short / 480``."""
    return max(1, round(min(height, width) / 480))


def default_font_size(height: int, width: int) -> int:
    """Label font size in pixels: ``short side / 60``, at least 10 (18 px at 1080p)."""
    return max(10, round(min(height, width) / 60))


def _columns(detections: "Detections", device: "torch.device"):
    """``boxes (N, 4) float, scores (N,) float, class_ids (N,) int64, track_ids (N,) int64 | None``
    on ``device``: as they are when already there, else packed and moved in ONE copy (float64
    holds float32 and ids below 2**53 exactly, so the values are the same either way)."""
    import torch

    d = detections
    if d.device == device:
        return d.boxes, d.scores, d.class_ids, d.track_ids
    cols = [d.boxes.double(), d.scores.double()[:, None], d.class_ids.double()[:, None]]
    if d.track_ids is not None:
        cols.append(d.track_ids.double()[:, None])
    p = torch.cat(cols, 1).to(device)
    return p[:, :4].float(), p[:, 4].float(), p[:, 5].long(), None if d.track_ids is None else p[:, 6].long()


@dataclass(frozen=True, kw_only=True)
class Annotator:
    """Draws a :class:`~vidpipe.types.FrameResult` onto its frame; see the module docstring.

    Attributes:
        lines: counting lines to draw (:class:`vidpipe.zones.Line`, or text ``"NAME=x1,y1,x2,y2"``).
        zones: zones to draw (:class:`vidpipe.zones.Zone`, or text ``"NAME=x1,y1,x2,y2,x3,y3,..."``).
        blur: class names or ids whose boxes are pixelated (before anything is drawn).
        labels: the class name in each box's label.
        scores: the score (two decimals) in each label.
        track_ids: the track id (``#12``) in each label, when the box is tracked.
            A box gets no label when all three parts are off.
        thickness: line thickness in pixels (OpenCV's meaning); ``None``: from the frame size
            (:func:`default_thickness`: 2 at 1080p).
    """

    lines: "tuple[Line, ...]" = ()
    zones: "tuple[Zone, ...]" = ()
    blur: tuple[str | int, ...] = ()
    labels: bool = True
    scores: bool = True
    track_ids: bool = True
    thickness: int | None = None
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        from vidpipe.zones.config import parse_line, parse_zone
        from vidpipe.zones.geometry import Line, Zone

        def shapes(what: str, value: Any, cls: type, parse: Any) -> tuple:
            items = (value,) if isinstance(value, (str, cls)) else value
            try:
                items = tuple(items)
            except TypeError:
                raise ConfigError(f"Annotator: {what} must be a tuple of {cls.__name__}, got {value!r}") from None
            out = []
            for item in items:
                if isinstance(item, str):
                    item = parse(item, what=what)
                if not isinstance(item, cls):
                    raise ConfigError(f"Annotator: {what} must hold {cls.__name__} objects or text, got {item!r}")
                out.append(item)
            return tuple(out)

        object.__setattr__(self, "lines", shapes("lines", self.lines, Line, parse_line))
        object.__setattr__(self, "zones", shapes("zones", self.zones, Zone, parse_zone))
        blur = (self.blur,) if isinstance(self.blur, (str, int)) else self.blur
        try:
            blur = tuple(blur)
        except TypeError:
            raise ConfigError(f"Annotator: blur must be class names or ids, got {self.blur!r}") from None
        if any(isinstance(c, bool) or not isinstance(c, (str, int)) or c == "" for c in blur):
            raise ConfigError(f"Annotator: blur must be class names or ids, got {self.blur!r}")
        object.__setattr__(self, "blur", blur)
        for name in ("labels", "scores", "track_ids"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"Annotator: {name} must be True or False, got {getattr(self, name)!r}")
        t = self.thickness
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= 64):
            raise ConfigError(f"Annotator: thickness must be an int in 1..64 or None, got {t!r}")

    # cached, per annotator ------------------------------------------------------------------

    def _cached(self, k: tuple, make: Any) -> Any:
        value = self._cache.get(k)
        if value is None:
            value = self._cache[k] = make()
        return value

    def _atlas(self, size: int, device: "torch.device") -> GlyphAtlas:
        return self._cached(("atlas", size, str(device)), lambda: build_atlas(size, device))

    def _static(self, height: int, width: int, device: "torch.device") -> StaticLayer | None:
        if not self.lines and not self.zones:
            return None
        import torch

        def make() -> StaticLayer:  # rasterised on the CPU (the same bytes for every device), then moved
            t = self.thickness or default_thickness(height, width)
            cpu = torch.device("cpu")
            layer = build_static(self.lines, self.zones, height, width, t, self._atlas(default_font_size(height, width), cpu))
            return layer.to(device)

        return self._cached(("static", height, width, str(device)), make)

    def _blur_ids(self, names: tuple[str, ...], device: "torch.device") -> "torch.Tensor":
        import torch

        def make() -> torch.Tensor:
            ids = []
            for c in self.blur:
                if isinstance(c, int):
                    ids.append(c)
                elif c in names:
                    ids.append(names.index(c))
                else:
                    known = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
                    raise ConfigError(f"Annotator: blur class {c!r} is not one of the model's classes ({known})")
            return torch.tensor(ids, dtype=torch.int64, device=device)

        return self._cached(("blur", names, str(device)), make)

    # drawing ----------------------------------------------------------------------------------

    def __call__(self, result: "FrameResult", image: "torch.Tensor | None" = None) -> "torch.Tensor":
        """A NEW ``(3, H, W)`` uint8 RGB tensor on ``image``'s device: ``image`` (default
        ``result.image``) with ``result``'s detections drawn; the input is not modified.

        Raises:
            ConfigError: no image (the run did not keep frames and none was passed), an image
                not ``(3, H, W)`` uint8, or of another size than the result's frame; a ``blur``
                class name the model does not have.
        """
        return self.many([result], None if image is None else [image])[0]

    def many(
        self, results: "Sequence[FrameResult]", images: "Sequence[torch.Tensor] | None" = None
    ) -> "list[torch.Tensor]":
        """:meth:`__call__` for several frames at once: one NEW ``(3, H, W)`` uint8 tensor per
        result, in order, the same bytes as one call each. Frames of one size and device are
        drawn as one batch (the same fixed number of tensor ops for 1 frame or 64: what bounds a
        fast GPU is the Python launching them, about 3 ms a call on an H100), so a stage drawing
        a whole batch of results pays that once. The tensors returned for one batch are views
        into one ``(B, 3, H, W)`` block.
        """
        imgs = []
        for i, result in enumerate(results):
            img = result.image if images is None else images[i]
            if img is None:
                raise ConfigError(
                    "Annotator: this result carries no image; run vidpipe.detect(..., keep_frames=True) or pass image="
                )
            _check_image(img, "Annotator: image")
            h, w = img.shape[1:]
            if (h, w) != (result.meta.height, result.meta.width):
                raise ConfigError(
                    f"Annotator: image is {h}x{w} but the result's frame is {result.meta.height}x{result.meta.width} "
                    "(boxes are in the frame's pixels)"
                )
            imgs.append(img)
        groups: dict[tuple, list[int]] = {}
        for i, img in enumerate(imgs):
            groups.setdefault((tuple(img.shape), str(img.device)), []).append(i)
        out: list[Any] = [None] * len(imgs)
        for rows in groups.values():
            for i, drawn in zip(rows, self._batch([results[i] for i in rows], [imgs[i] for i in rows])):
                out[i] = drawn
        return out

    def _batch(self, results: "Sequence[FrameResult]", imgs: "Sequence[torch.Tensor]") -> "list[torch.Tensor]":
        """Frames of one size and device: a copy of each, stacked, drawn in one pass."""
        import torch

        dev = imgs[0].device
        _, h, w = imgs[0].shape
        out = torch.stack(list(imgs))  # (B, 3, H, W), the copy drawn on
        cols = [_columns(r.detections, dev) for r in results]
        names = tuple(results[0].names)
        if self.blur:  # (isin would sync on CUDA: it sorts for more than a few elements)
            blur_ids = self._blur_ids(names, dev)
            for i, (b, _, c, _) in enumerate(cols):
                if b.shape[0]:
                    out[i] = pixelate(out[i], b, (c[:, None] == blur_ids[None, :]).any(1))
        static = self._static(h, w, dev)
        if static is not None:
            static.blend(out)
        counts = [c[0].shape[0] for c in cols]
        if sum(counts):
            boxes = torch.cat([c[0] for c in cols])
            scores = torch.cat([c[1] for c in cols])
            cls = torch.cat([c[2] for c in cols])
            if all(c[3] is None for c in cols):
                tid = None
            else:  # untracked frames among tracked ones: -1, "no track yet"
                tid = torch.cat([c[3] if c[3] is not None else torch.full_like(c[2], -1) for c in cols])
            frame = None
            if len(cols) > 1:
                frame = torch.cat([torch.full((n,), i, dtype=torch.int64, device=dev) for i, n in enumerate(counts) if n])
            self._draw_boxes(out, boxes, scores, cls, tid, names, frame=frame)
        return list(out.unbind(0))

    def _draw_boxes(self, out, boxes, scores, cls, tid, names: tuple[str, ...], *, frame=None) -> None:
        """Outlines and labels of every box onto ``out`` ``(B, 3, H, W)`` in place (one
        :func:`paint`); ``frame`` ``(N,)`` int64: each box's frame in the batch (``None``: all 0)."""
        import torch

        h, w = out.shape[-2:]
        dev = out.device
        t = self.thickness or default_thickness(h, w)
        hw = half_width(t)
        top = self._cached(("top", h, w, str(dev)), lambda: torch.tensor([w - 1, h - 1] * 2, device=dev))
        xyxy = boxes.long().clamp(min=0).minimum(top)  # truncated toward zero (supervision's astype(int)), clipped
        pal = self._cached(("palette", str(dev)), lambda: palette_tensor(dev))
        colour_id = (cls if tid is None else torch.where(tid >= 0, tid, cls)).abs() % pal.shape[0]
        colours = pal[colour_id]  # (N, 2, 3): box colour, text colour

        on_cpu = host_reads_free(dev)  # tighter shapes from the data, same pixels
        if on_cpu:
            ext = (xyxy[:, 2:] - xyxy[:, :2]).abs().amax(0) + 1
            template = outline_template(t, int(ext[0]), int(ext[1]))
        else:
            template = self._cached(("outline", t, w, h, str(dev)), lambda: outline_template(t, w, h, dev))
        o_idx, o_ok = outline_writes(xyxy, template, h, w)
        offset = None if frame is None else (frame * (h * w))[:, None]
        if offset is not None:
            o_idx = o_idx + offset
        o_key = torch.where(o_ok, pack(colours[:, None, 0]), -1)  # box-major: later boxes on top
        index, keys = [o_idx.reshape(-1)], [o_key.reshape(-1)]

        codes = label_codes(
            cls, scores, tid,
            self._cached(("names", names, str(dev)), lambda: name_table(names, dev)),
            show_names=self.labels, show_scores=self.scores, show_tracks=self.track_ids,
        )  # fmt: skip
        if on_cpu:
            codes = codes[:, (codes != 0).any(0)]  # columns of nothing in every label: no width, no ink
        if codes.shape[1]:
            atlas = self._atlas(default_font_size(h, w), dev)
            margin = atlas.pad + 1
            bound = int(atlas.advance[codes].sum(1).max()) if on_cpu else codes.shape[1] * atlas.max_advance
            alpha, text_w = _render(atlas, codes, margin, 2 * margin + bound + atlas.cell_width)
            lh, lw_max = alpha.shape[1], alpha.shape[2]
            lw = torch.where(text_w > 0, text_w + 2 * margin, 0)
            x1, y1 = torch.minimum(xyxy[:, 0], xyxy[:, 2]), torch.minimum(xyxy[:, 1], xyxy[:, 3])
            lx = torch.minimum(x1 - hw, w - lw).clamp(min=0)
            above = y1 - hw - lh
            ly = torch.where(above >= 0, above, y1 + hw + 1)
            r_idx, r_ok = rect_writes(lx, ly, lw, lh, lw_max, h, w)
            if offset is not None:
                r_idx = r_idx + offset[:, :, None]
            a = alpha.long()[..., None]  # (N, lh, lw_max, 1)
            bg, fg = colours[:, None, None, 0], colours[:, None, None, 1]
            rgb = (bg * (255 - a) + fg * a + 127) // 255
            r_key = torch.where(r_ok, pack(rgb), -1)  # after every outline: labels on top
            index.append(r_idx.reshape(-1))
            keys.append(r_key.reshape(-1))
        paint(out, torch.cat(index), torch.cat(keys))


def _render(atlas: GlyphAtlas, codes: "torch.Tensor", margin: int, width: int):
    """Label blocks: ``(N, lh, width)`` uint8 text alpha with ``margin`` pixels round the text
    (1 above and below), and ``(N,)`` text widths."""
    import torch

    from vidpipe.draw.text import render_codes

    alpha, text_w = render_codes(atlas, codes, x0=margin, y0=1, width=width)
    return torch.nn.functional.pad(alpha, (0, 0, 0, 1)), text_w
