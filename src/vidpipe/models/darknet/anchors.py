"""Which anchors the ``[yolo]`` layers of a Darknet cfg use: a cfg is user input, and a wrong
``mask=`` runs without an error but gives boxes of the wrong size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vidpipe.models.darknet.cfg import YoloSection

__all__ = ["anchor_use_warning"]


def anchor_use_warning(source: str, yolos: "Sequence[YoloSection]") -> str | None:
    """One line describing anchors that several ``[yolo]`` layers share or none uses, else None.

    Each ``[yolo]`` layer predicts with the anchors its ``mask`` picks; usually every anchor
    belongs to exactly one layer. A shared or unused anchor is most often a typo in ``mask=``,
    though the released yolov3-tiny weights were trained with exactly that (``mask = 3,4,5`` and
    ``1,2,3``: anchor 3 twice, anchor 0 never), and the cfg published later (``0,1,2``) gives them
    boxes of half their size.
    """
    if not yolos:
        return None
    num = max(len(y.anchors) for y in yolos)
    users: "dict[int, list[YoloSection]]" = {a: [] for a in range(num)}
    for y in yolos:
        for m in dict.fromkeys(y.mask):
            users[m].append(y)
    shared = {a: ys for a, ys in users.items() if len(ys) > 1}
    unused = [a for a, ys in users.items() if not ys]
    if not shared and not unused:
        return None

    def where(y: "YoloSection") -> str:
        return f"layer {y.index} (line {y.line}, mask={','.join(map(str, y.mask))})"

    parts = [f"anchor {a} is used by the [yolo] {' and '.join(where(y) for y in ys)}" for a, ys in shared.items()]
    if unused:
        names = ", ".join(str(a) for a in unused)
        parts.append(f"anchor{'s' if len(unused) > 1 else ''} {names} by no [yolo] layer")
    return (
        f"Darknet cfg {source}: {'; '.join(parts)}. Check the masks against the weights: usually each anchor "
        "belongs to one [yolo] layer (the released yolov3-tiny weights are the known exception: mask 3,4,5 and 1,2,3)"
    )
