"""The text of each box's label, ``"person 0.87 #12"``, built as glyph codes on the device.

No string is formatted on the host per frame: class names come from a ``(classes, L)`` table of
codes made once per names tuple; the score (two decimals, rounded half up) and the track id
(up to 10 digits, ``#`` first; none for a negative id) are turned into digit codes with integer
ops. Parts that are switched off or absent are code 0 (no width), so nothing shifts on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vidpipe.draw.text import encode

if TYPE_CHECKING:
    import torch

__all__ = ["name_table", "label_codes", "NAME_CHARS", "TRACK_DIGITS"]

NAME_CHARS = 24  # longer class names are cut
TRACK_DIGITS = 10
_SPACE, _DOT, _HASH, _ZERO = (encode(c)[0] for c in " .#0")


def name_table(names: Sequence[str], device: "torch.device") -> "torch.Tensor":
    """``(len(names), L)`` int64 codes of the class names (``L <= NAME_CHARS``; at least 1 column)."""
    import torch

    length = max([1, *(min(len(n), NAME_CHARS) for n in names)])
    rows = [encode(str(n), length) for n in names]
    return torch.tensor(rows, dtype=torch.int64, device=device).reshape(len(rows), length)


def _digits(v: "torch.Tensor", count: int) -> "torch.Tensor":
    """``(N, count)`` codes of the decimal digits of ``v`` ``(N,)`` int64 >= 0, right-aligned,
    without leading zeros (code 0 there; ``0`` itself is one digit)."""
    import torch

    p = 10 ** torch.arange(count - 1, -1, -1, device=v.device)  # (count,)
    v = v.clamp(0, 10**count - 1)[:, None]
    digit = (v // p) % 10
    shown = (v >= p) | (p == 1)
    return torch.where(shown, _ZERO + digit, 0)


def label_codes(
    class_ids: "torch.Tensor",
    scores: "torch.Tensor",
    track_ids: "torch.Tensor | None",
    names: "torch.Tensor",
    *,
    show_names: bool,
    show_scores: bool,
    show_tracks: bool,
) -> "torch.Tensor":
    """``(N, L)`` int64 codes of each box's label (all 0 when every part is off).

    Args:
        class_ids: ``(N,)`` int64; an id outside ``names`` is written as its number.
        scores: ``(N,)`` float in [0, 1].
        track_ids: ``(N,)`` int64 or ``None`` (not tracked).
        names: the table of :func:`name_table` on the same device.
    """
    import torch

    n = class_ids.shape[0]
    dev = class_ids.device
    parts: list[torch.Tensor] = []

    def space() -> None:
        if parts:
            parts.append(torch.full((n, 1), _SPACE, dtype=torch.int64, device=dev))

    if show_names:
        known = (class_ids >= 0) & (class_ids < names.shape[0])
        if names.shape[0]:
            row = names[class_ids.clamp(0, names.shape[0] - 1)]
        else:
            row = torch.zeros((n, 1), dtype=torch.int64, device=dev)
        width = max(row.shape[1], 6)
        row = torch.nn.functional.pad(row, (0, width - row.shape[1]))
        num = torch.nn.functional.pad(_digits(class_ids.abs(), 6), (0, width - 6))
        parts.append(torch.where(known[:, None], row, num))
    if show_scores:
        space()
        v = torch.floor(scores.double().clamp(0, 1) * 100 + 0.5).long()
        parts.append(torch.stack((_ZERO + v // 100, torch.full_like(v, _DOT), _ZERO + (v // 10) % 10, _ZERO + v % 10), 1))
    if show_tracks and track_ids is not None:
        has = (track_ids >= 0)[:, None]
        if parts:
            parts.append(torch.where(has, _SPACE, 0).expand(n, 1))
        parts.append(torch.where(has, _HASH, 0).expand(n, 1))
        parts.append(torch.where(has, _digits(track_ids, TRACK_DIGITS), 0))
    if not parts:
        return torch.zeros((n, 0), dtype=torch.int64, device=dev)
    return torch.cat(parts, 1)
