"""Kept frames (``keep_frames``, ``FrameResult.image``): the frame the model saw, at the source's
size, checked against PyAV's own RGB of the same file (an independent conversion: swscale)."""

from __future__ import annotations

import av
import numpy as np
import pytest
import torch

import vidpipe
from vidpipe.ops.preprocess import concat_inputs, preprocess
from vidpipe.types import ColorSpec, FrameBatch, FrameMeta, ModelInput

SPACES = {"bt601": 5, "bt709": 1}  # PyAV's colorspace codes


def pyav_rgb(clip) -> list[np.ndarray]:
    """PyAV's rgb24 of every frame (HWC), with the clip's colour matrix and range."""
    with av.open(str(clip.path)) as c:
        return [
            f.reformat(
                format="rgb24",
                src_colorspace=SPACES[clip.colorspace],
                src_color_range=1 if clip.color_range == "limited" else 2,
            ).to_ndarray()
            for f in c.decode(video=0)
        ]


class _Looker:
    """A stage that reads frames (needs_frames) and records what it saw."""

    name = "looker"

    def __init__(self, needs_frames: bool) -> None:
        self.needs_frames = needs_frames
        self.seen: list = []

    def process(self, results):
        self.seen += [(r.index, r.image is not None) for r in results]
        return results

    def reset(self, stream_id):
        pass

    def report(self):
        return {}

    def close(self):
        pass


def test_kept_frames_equal_pyav_rgb_and_are_in_box_coordinates(make_clip):
    clip = make_clip(".mp4", frames=20, gop=10, width=320, height=192)
    want = pyav_rgb(clip)
    run = vidpipe.detect(clip.path, device="cpu", keep_frames=True, batch_size=8)
    results = list(run)
    assert run.config.keep_frames
    assert [r.index for r in results] == list(range(20))
    for r in results:
        img = r.image
        assert img is not None and img.dtype == torch.uint8 and img.device.type == "cpu"
        assert tuple(img.shape) == (3, r.meta.height, r.meta.width) == (3, 192, 320)
        # bit for bit: the CPU decoder converts with swscale's arithmetic (see vidpipe.ops.color);
        # batches of 8 from a recycled ring of buffers: every frame is still its own
        assert np.array_equal(img.permute(1, 2, 0).numpy(), want[r.index]), r.index
        # the clip's boxes are where its ground truth says, in the image's pixels
        x1, y1, x2, y2 = clip.boxes[r.index]["red"]
        inner = img[:, y1 + 3 : y2 - 3, x1 + 3 : x2 - 3].float().mean((1, 2))
        assert inner[0] > 230 and inner[1] < 25 and inner[2] < 25, (r.index, inner)


def test_frames_not_kept_unless_asked(make_clip):
    clip = make_clip(".mp4", frames=6, gop=6, width=160, height=96)
    looker = _Looker(needs_frames=False)
    run = vidpipe.detect(clip.path, device="cpu", batch_size=4, stages=[looker])
    results = list(run)
    assert not run.config.keep_frames
    assert all(r.image is None for r in results)
    assert looker.seen == [(i, False) for i in range(6)]


def test_a_stage_that_needs_frames_turns_keeping_on(make_clip):
    clip = make_clip(".mp4", frames=6, gop=6, width=160, height=96)
    looker = _Looker(needs_frames=True)
    run = vidpipe.detect(clip.path, device="cpu", batch_size=4, stages=[looker])
    results = list(run)
    assert run.config.keep_frames
    assert looker.seen == [(i, True) for i in range(6)]
    assert all(r.image is not None for r in results)


def test_frame_skip_and_two_sources_of_different_sizes(make_clip):
    """Chunks of two sources share a model batch (same letterbox size): each result keeps its own
    frame, at its own size (a tuple of per-frame views in the joined ModelInput)."""
    a = make_clip(".mp4", frames=12, gop=6, width=320, height=192)
    b = make_clip(".mp4", frames=12, gop=6, width=160, height=96, colorspace="bt709")
    want = {str(a.path): pyav_rgb(a), str(b.path): pyav_rgb(b)}
    results = list(vidpipe.detect([a.path, b.path], device="cpu", keep_frames=True, batch_size=6, frame_skip=3))
    assert sorted((r.stream_id, r.index) for r in results) == [(s, i) for s in (0, 1) for i in range(0, 12, 3)]
    for r in results:
        assert np.array_equal(r.image.permute(1, 2, 0).numpy(), want[r.source][r.index]), (r.source, r.index)


def test_realtime_file_keeps_frames(make_clip):
    """A file played as a live stream (the live source's own decode and preprocessing)."""
    from vidpipe.sources.options import LiveOptions

    clip = make_clip(".mp4", frames=8, gop=4, width=160, height=96, fps=25)
    want = pyav_rgb(clip)
    run = vidpipe.detect(clip.path, device="cpu", keep_frames=True, batch_size=4, live=LiveOptions(realtime=True))
    got = []
    for r in run:
        got.append(r)
        if r.index >= 7:
            break
    run.close()
    assert got, "no frame came"
    for r in got:
        assert np.array_equal(r.image.permute(1, 2, 0).numpy(), want[r.index]), r.index


def test_nv12_batches_keep_the_conversion_pyav_makes(make_clip):
    """What NVDEC batches go through (NV12 -> full-size RGB, the same kernel code path on the CPU
    in PyTorch): equal to PyAV's rgb24 of the same frames."""
    clip = make_clip(".mp4", frames=4, gop=4, width=160, height=96, colorspace="bt709")
    want = pyav_rgb(clip)
    with av.open(str(clip.path)) as c:
        nv12 = [f.reformat(format="nv12").to_ndarray() for f in c.decode(video=0)]
    metas = tuple(FrameMeta("x", 0, i, None, 96, 160) for i in range(4))
    batch = FrameBatch(torch.from_numpy(np.stack(nv12)), metas, "nv12", ColorSpec("bt709", "limited"))
    inp = preprocess(batch, size=(256, 416), dtype=torch.float32, device=torch.device("cpu"), keep_frames=True)
    assert inp.images.shape == (4, 3, 96, 160) and inp.images.dtype == torch.uint8
    for i in range(4):
        diff = np.abs(inp.images[i].permute(1, 2, 0).numpy().astype(int) - want[i].astype(int))
        assert diff.max() <= 1 and diff.mean() < 0.05, (i, diff.max(), diff.mean())
    off = preprocess(batch, size=(256, 416), dtype=torch.float32, device=torch.device("cpu"))
    assert off.images is None
    torch.testing.assert_close(off.tensor, inp.tensor, rtol=0, atol=0)  # keeping changes nothing else


def test_rgb_batch_on_its_device_is_copied_once():
    """A decoder's buffer is recycled: the kept frames must not be a view of it."""
    data = torch.randint(0, 255, (2, 3, 8, 12), dtype=torch.uint8)
    metas = tuple(FrameMeta("x", 0, i, None, 8, 12) for i in range(2))
    inp = preprocess(FrameBatch(data, metas), size=(32, 32), dtype=torch.float32, device=torch.device("cpu"),
                     keep_frames=True)  # fmt: skip
    assert torch.equal(inp.images, data) and inp.images.data_ptr() != data.data_ptr()
    data.zero_()
    assert inp.images.sum() > 0


def test_model_input_checks_kept_images_and_concat_keeps_views():
    metas = (FrameMeta("a", 0, 0, None, 8, 12), FrameMeta("b", 1, 0, None, 6, 10))
    t = torch.zeros((1, 3, 32, 32))
    sc = torch.ones((1, 2))
    a = ModelInput(t, metas[:1], sc, sc, images=torch.zeros((1, 3, 8, 12), dtype=torch.uint8))
    b = ModelInput(t, metas[1:], sc, sc, images=(torch.zeros((3, 6, 10), dtype=torch.uint8),))
    both = concat_inputs([a, b])
    assert isinstance(both.images, tuple) and [tuple(i.shape) for i in both.images] == [(3, 8, 12), (3, 6, 10)]
    assert both.images[0].data_ptr() == a.images.data_ptr()  # a view, no copy
    assert concat_inputs([a, ModelInput(t, metas[1:], sc, sc)]).images is None
    with pytest.raises(ValueError, match="8x12"):
        ModelInput(t, metas[:1], sc, sc, images=torch.zeros((1, 3, 8, 13), dtype=torch.uint8))
    with pytest.raises(ValueError, match="uint8"):
        ModelInput(t, metas[:1], sc, sc, images=torch.zeros((1, 3, 8, 12)))
    with pytest.raises(ValueError, match="2 frames"):
        ModelInput(t, metas[:1], sc, sc, images=(torch.zeros((3, 8, 12), dtype=torch.uint8),) * 2)


def test_keep_frames_must_be_a_bool():
    from vidpipe.errors import ConfigError
    from vidpipe.pipeline_config import PipelineConfig

    with pytest.raises(ConfigError, match="keep_frames"):
        PipelineConfig(keep_frames="yes")  # type: ignore[arg-type]
