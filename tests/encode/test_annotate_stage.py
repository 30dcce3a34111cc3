"""The annotate stage: in a real run (vidpipe.detect with the bundled model) and on its own
(results made here): frames, timestamps, naming, size changes, reconnects, failures."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import vidpipe
from _clips import decoded, psnr
from ffmpeg_cli import count_frames, require
from media import make_video
from vidpipe.cli._annotate_args import AnnotateTargets
from vidpipe.errors import ConfigError, SinkError
from vidpipe.stages.annotate import AnnotateStage
from vidpipe.types import Detections, FrameMeta, FrameResult


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_video(tmp_path_factory.mktemp("ann") / "clip.mp4", width=160, height=96, frames=12, fps=12,
                      bframes=0, crf=12, audio=True)


@pytest.mark.parametrize("encoder", ["thread", "process"])
def test_in_a_real_run_identity_render_reproduces_the_input(clip, tmp_path, encoder):
    out = tmp_path / "out.mp4"
    stage = AnnotateStage(lambda meta: str(out), render=lambda r: r.image, options={"crf": "16"}, encoder=encoder)
    results = list(vidpipe.detect(str(clip.path), device="cpu", stages=[stage], batch_size=4, imgsz=128))
    assert len(results) == clip.frames and all(r.image is not None for r in results)
    rep = stage.report()["streams"]["0"]
    assert rep["frames"] == clip.frames and rep["fps"] == pytest.approx(12) and rep["audio"] == "copy"
    assert rep["encode_ms_per_frame"] > 0 and rep["blocked_writes"] >= 0
    assert count_frames(out) == clip.frames
    src, got = decoded(clip.path), decoded(out)
    assert [p for _, p in got] == pytest.approx([p for _, p in src], abs=1e-3)
    assert min(psnr(a, b) for (a, _), (b, _) in zip(src, got)) >= 35


def meta(i: int, *, sid: int = 0, h: int = 64, w: int = 96, pts: float | None = None, source: str = "cam") -> FrameMeta:
    return FrameMeta(source=source, stream_id=sid, index=i, pts=i / 10 if pts is None else pts, height=h, width=w)


def result(m: FrameMeta, value: int = 100) -> FrameResult:
    return FrameResult(meta=m, detections=Detections.empty(),
                       image=torch.full((3, m.height, m.width), value, dtype=torch.uint8))


def frame_times(path) -> list[float]:
    out = subprocess.run([require("ffprobe"), "-v", "error", "-show_entries", "frame=pts_time", "-of", "json",
                          str(path)], capture_output=True, text=True, timeout=60, check=True)
    return [float(f["pts_time"]) for f in json.loads(out.stdout)["frames"]]


def test_reconnect_continues_time_and_size_changes_are_skipped(tmp_path):
    out = tmp_path / "live.mkv"
    stage = AnnotateStage(lambda m: str(out), render=lambda r: r.image, fps=lambda s: 10.0, release_frames=True)
    got = stage.process([result(meta(i)) for i in range(5)])
    assert all(r.image is None for r in got) and len(got) == 5
    stage.reset(0)  # a new connection: its pts start again at 0
    stage.process([result(meta(i)) for i in range(3)])
    stage.process([result(meta(9, h=32, w=32))])  # another size: not written
    stage.close()
    rep = stage.report()["streams"]["0"]
    assert (rep["frames"], rep["skipped_size"], rep["pts_nudged"], rep["error"]) == (8, 1, 0, None)
    assert frame_times(out) == pytest.approx([i / 10 for i in range(8)], abs=1.5e-3)


@pytest.mark.parametrize("encoder", ["thread", "process"])
def test_a_target_that_cannot_open_raises_or_is_logged(tmp_path, caplog, encoder):
    out = tmp_path / "gone" / "x.mp4"
    stage = AnnotateStage(lambda m: str(out), render=lambda r: r.image, fps=lambda s: 10.0, encoder=encoder)
    with pytest.raises(SinkError, match="does not exist"):
        stage.process([result(meta(0))])
    stage.close()
    logged = AnnotateStage(lambda m: str(out) if m.stream_id == 0 else str(tmp_path / "ok.mp4"),
                           render=lambda r: r.image, fps=lambda s: 10.0, on_error="log", encoder=encoder)
    assert len(logged.process([result(meta(i)) for i in range(3)])) == 3  # results pass on
    logged.process_batch([[result(meta(3))], [result(meta(i, sid=1)) for i in range(3)]])
    logged.close()
    rep = logged.report()["streams"]
    assert "does not exist" in rep["0"]["error"] and rep["0"]["frames"] == 0
    assert rep["1"]["frames"] == 3 and rep["1"]["error"] is None
    assert "stream 0 has no video" in caplog.text


def test_targets_per_input_never_overwrite():
    t = AnnotateTargets("/out", "folder", ["/v/a.mp4", "/w/a.mp4", "/out/b.annotated.mp4"])
    assert t(meta(0, sid=0, source="/v/a.mp4")) == "/out/a.annotated.mp4"
    assert t(meta(0, sid=1, source="/w/a.mp4")) == "/out/a-2.annotated.mp4"
    assert t(meta(5, sid=1, source="/w/a.mp4")) == "/out/a-2.annotated.mp4"  # stable per stream
    assert t(meta(0, sid=2, source="rtsp://u:pw@cam1:554/live")) == "/out/cam1_554_live.annotated.mp4"


def test_two_streams_two_files(tmp_path):
    stage = AnnotateStage(AnnotateTargets(str(tmp_path), "folder", []), render=lambda r: r.image,
                          fps=lambda s: 10.0)
    stage.process([result(meta(i, sid=0, source="a.mp4")) for i in range(4)])
    stage.process([result(meta(i, sid=1, source="b.mp4", h=48, w=64), 30) for i in range(6)])
    stage.close()
    assert count_frames(tmp_path / "a.annotated.mp4") == 4
    assert count_frames(tmp_path / "b.annotated.mp4") == 6
    frames = decoded(tmp_path / "b.annotated.mp4")
    assert frames[0][0].shape == (48, 64, 3) and np.abs(frames[0][0].astype(int) - 30).max() <= 2


def x264_threads(path) -> int:
    """The frame threads libx264 used, from the settings it writes into the stream (its SEI)."""
    import re

    found = re.findall(rb" threads=(\d+) ", Path(path).read_bytes())
    assert found, f"no x264 settings in {path}"
    return int(found[0])


@pytest.mark.parametrize("encoder", ["thread", "process"])
def test_libx264_encoders_share_the_cpus_among_the_streams(tmp_path, monkeypatch, encoder):
    """Each stream's libx264 gets ``cpus // streams`` threads (the streams told, or counted as they
    open, a batch's new streams together), as the encoder itself reports; the caller's ``threads``
    wins. (640x384: smaller frames make x264 lower the count itself.)"""
    import vidpipe.stages.annotate as annotate

    monkeypatch.setattr(annotate, "usable_cpus", lambda: 8)

    def run(folder: str, **kw) -> dict:
        (tmp_path / folder).mkdir()
        stage = AnnotateStage(lambda m: str(tmp_path / folder / f"{m.stream_id}.mp4"), render=lambda r: r.image,
                              fps=lambda s: 10.0, encoder=encoder, **kw)
        stage.process_batch([[result(meta(i, sid=s, h=384, w=640)) for i in range(3)] for s in (0, 1)])
        stage.close()
        return {sid: rep["encoder_threads"] for sid, rep in stage.report()["streams"].items()}

    assert run("counted") == {"0": "4", "1": "4"}  # two streams opened in one batch: 8 // 2
    assert [x264_threads(tmp_path / "counted" / f"{s}.mp4") for s in (0, 1)] == [4, 4]
    assert run("told", streams=4) == {"0": "2", "1": "2"}
    assert x264_threads(tmp_path / "told" / "0.mp4") == 2
    assert run("given", options={"threads": "3"}) == {"0": "3", "1": "3"}
    assert x264_threads(tmp_path / "given" / "1.mp4") == 3
    assert run("many", streams=64) == {"0": "1", "1": "1"}  # never fewer than one
    assert run("more", streams=1) == {"0": "4", "1": "4"}  # more streams opened than told: they count
    with pytest.raises(ConfigError, match="streams=0"):
        AnnotateStage(lambda m: "x.mp4", render=lambda r: r.image, streams=0)


@pytest.mark.gpu
@pytest.mark.parametrize("encoder", ["thread", "process"])
def test_cuda_frames_of_several_streams_are_converted_together_and_come_back_intact(clip, tmp_path, encoder):
    """A batch of CUDA frames from three streams (one conversion to YUV for all, one of another
    size alone): each stream's video, read back with PyAV, is its frames."""
    frames = [rgb for rgb, _ in decoded(clip.path)]  # 160x96
    small = [np.ascontiguousarray(rgb[:64, :96]) for rgb in frames]
    stage = AnnotateStage(lambda m: str(tmp_path / f"{m.stream_id}.mp4"), render=lambda r: r.image,
                          fps=lambda s: 12.0, options={"crf": "16"}, encoder=encoder)

    def res(sid: int, i: int, rgb: np.ndarray) -> FrameResult:
        m = FrameMeta(source="cam", stream_id=sid, index=i, pts=i / 12, height=rgb.shape[0], width=rgb.shape[1])
        return FrameResult(meta=m, detections=Detections.empty(),
                           image=torch.from_numpy(rgb).permute(2, 0, 1).contiguous().cuda())

    for start in range(0, len(frames), 4):
        idx = range(start, min(start + 4, len(frames)))
        stage.process_batch([[res(0, i, frames[i]) for i in idx], [res(1, i, frames[::-1][i]) for i in idx],
                             [res(2, i, small[i]) for i in idx]])
    stage.close()
    for sid, want in ((0, frames), (1, frames[::-1]), (2, small)):
        got = decoded(tmp_path / f"{sid}.mp4")
        assert len(got) == len(want) == stage.report()["streams"][str(sid)]["frames"]
        worst = min(psnr(a, b) for a, (b, _) in zip(want, got))
        assert worst >= 35, f"stream {sid}: PSNR {worst:.1f} dB"


def test_encoder_niceness_is_checked_when_the_stage_is_made():
    with pytest.raises(ConfigError, match="encoder_nice=20"):
        AnnotateStage(lambda m: "x.mp4", render=lambda r: r.image, encoder_nice=20)
    with pytest.raises(ConfigError, match="encoder_nice=True"):
        AnnotateStage(lambda m: "x.mp4", render=lambda r: r.image, encoder_nice=True)


def test_nvenc_encodes_on_a_thread_of_the_run():
    from vidpipe.stages.annotate import AnnotateStage

    with pytest.raises(ConfigError, match="encoder='process' with codec='h264_nvenc'.*use encoder='auto' or 'thread'"):
        AnnotateStage(lambda meta: "x.mp4", render=lambda r: r.image, codec="h264_nvenc", encoder="process")
