"""The auto-follow virtual camera: a smoothed crop window that follows a tracked target, holds
and then eases back to the wide shot when it is lost, rendered on the frames' device.

::

    from vidpipe.follow import FollowStage

    frames = []
    stage = FollowStage("sports ball", size=(1280, 720), sink=lambda meta, image: frames.append(image))
    for r in vidpipe.detect("match.mp4", classes="sports ball", track=True, stages=[stage]):
        ...
    stage.report()   # frames, target_in_frame, plan/render ms per frame

Parts: :class:`Planner` (where to look, host side; :class:`FollowConfig` its options),
:func:`render_window` (crop and resize on the device), :mod:`vidpipe.follow.metrics` (jerk,
target-in-frame share on :mod:`vidpipe.follow.scenes`' generated scenes, against
:mod:`vidpipe.follow.baselines`). Names load on first use (no torch import here).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_LAZY = {
    "FollowConfig": "vidpipe.follow.planner",
    "Planner": "vidpipe.follow.planner",
    "pick_target": "vidpipe.follow.planner",
    "Window": "vidpipe.follow.window",
    "wide_window": "vidpipe.follow.window",
    "render_window": "vidpipe.follow.render",
    "FollowStage": "vidpipe.follow.stage",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vidpipe.follow' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from vidpipe.follow.planner import FollowConfig, Planner, pick_target
    from vidpipe.follow.render import render_window
    from vidpipe.follow.stage import FollowStage
    from vidpipe.follow.window import Window, wide_window
