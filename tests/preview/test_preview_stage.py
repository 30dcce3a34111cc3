"""PreviewStage in a real run (the bundled model on generated clips, on the CPU): nothing is
rendered while nobody watches; frames pushed are compact copies; the JPEG is the decoded frame."""

from __future__ import annotations

import numpy as np
import pytest

import vidpipe
from preview.mjpeg import decode
from vidpipe.errors import ConfigError
from vidpipe.preview import PreviewHub, PreviewStage, raw_frame

CLIP = dict(width=160, height=96, frames=24, fps=25, gop=6, pattern="bars")


class Counting:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, result):
        self.calls.append(result.meta.index)
        return raw_frame(result)


def _run(clip, stage) -> list:
    return list(vidpipe.detect(clip.path, device="cpu", batch_size=4, imgsz=160, stages=[stage]))


def test_nothing_rendered_while_nobody_watches(make_clip) -> None:
    clip = make_clip(**CLIP)
    render = Counting()
    with PreviewHub() as hub:
        results = _run(clip, PreviewStage(hub, render=render, idle_interval=None))
        assert len(results) == 24
        assert render.calls == [] and hub.streams() == ()


def test_idle_refresh_keeps_a_recent_frame_matching_the_video(make_clip) -> None:
    import cv2

    clip = make_clip(**CLIP)
    with PreviewHub() as hub:
        stage = PreviewStage(hub, idle_interval=1.0)
        _run(clip, stage)
        assert hub.streams() == (0,)
        kept = hub._slots[0].image
        assert kept.untyped_storage().nbytes() == kept.numel()  # a copy, not a view of the whole batch
        jpeg, meta = hub.snapshot(0, timeout=5)
        rgb = decode(jpeg)
        assert rgb.shape == (96, 160, 3)
        want = clip.rgb(meta.index)  # the generated frame (before H.264)
        assert np.abs(rgb.astype(int) - want.astype(int)).mean() < 6
        assert cv2.PSNR(rgb, want) > 25
        rep = stage.report()
        assert rep["frames_pushed"] >= 1 and rep["jpeg"] == ["cpu"]


def test_watched_stream_gets_frames_through_the_run(make_clip) -> None:
    clip = make_clip(**CLIP)
    render = Counting()
    with PreviewHub(max_fps=1000) as hub, hub.watch(0) as watcher:
        _run(clip, PreviewStage(hub, render=render, idle_interval=None))
        # the last frame of a batch each time (batches of at most 4; two processed within the
        # 1 ms rate limit push only the first)
        assert len(render.calls) >= 2 and render.calls == sorted(set(render.calls)), render.calls
        assert hub._slots[0].meta.index == render.calls[-1] >= 15
        assert watcher.next(timeout=5) is not None


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="hub="):
        PreviewStage(object())  # type: ignore[arg-type]
    with PreviewHub() as hub:
        with pytest.raises(ConfigError, match="render="):
            PreviewStage(hub, render=3)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="idle_interval="):
            PreviewStage(hub, idle_interval=0)
