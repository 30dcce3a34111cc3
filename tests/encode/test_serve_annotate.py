"""``annotate:`` per camera in the serve config: checked with errors naming the file's line, and
written by a real serve run (a video file as the camera)."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

import vidpipe
from ffmpeg_cli import count_frames
from media import make_video
from vidpipe.errors import ConfigError
from vidpipe.serve import CameraConfig, OutputConfig, ServeConfig, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.mark.parametrize("value, words", [
    ("out.xyz", "cannot tell the container from extension '.xyz'"),
    ("ftp://h/x.mp4", "unsupported URL scheme 'ftp'"),
    ("42", "expected a non-empty text, got 42"),
])
def test_bad_annotate_names_the_line(tmp_path, value, words):
    path = write(tmp_path, f"cameras:\n  - name: a\n    url: x\n    annotate: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value).startswith(f"{path}:4: cameras[0].annotate: "), str(info.value)
    assert words in str(info.value)


def test_annotate_paths_and_urls(tmp_path):
    c = load_config(write(tmp_path, """
        cameras:
          - {name: a, url: x, annotate: videos/a.mp4}
          - {name: b, url: y, annotate: "rtmp://user:hunter2@relay:1935/live/b"}
          - {name: c, url: z}
        """), env={})
    assert c.cameras[0].annotate == str(tmp_path / "videos" / "a.mp4")  # relative to the config's folder
    assert c.cameras[1].annotate == "rtmp://user:hunter2@relay:1935/live/b"
    assert "hunter2" not in repr(c.cameras[1]) and "***@relay" in repr(c.cameras[1])
    assert c.cameras[2].annotate is None
    with pytest.raises(ConfigError, match="camera 'd' annotate"):
        CameraConfig("d", "x", annotate="d.avi2")


def test_serve_writes_the_camera_video(tmp_path):
    clip = make_video(tmp_path / "cam.mp4", width=160, height=96, frames=12, fps=12)
    out = tmp_path / "cam.annotated.mp4"
    config = ServeConfig(
        cameras=(CameraConfig("a", str(clip.path), annotate=str(out)),),
        device="cpu", imgsz=128, batch_size=4, output=OutputConfig(str(tmp_path / "tables") + "/"),
    )
    with vidpipe.serve(config) as server:
        deadline = time.monotonic() + 120
        while not all(s["status"] == "ok" and s["frames"] == 12 for s in server.status()["streams"]):
            assert time.monotonic() < deadline, server.status()
            time.sleep(0.05)
    summary = server.stop()
    assert summary.stages["annotate"]["streams"]["0"]["frames"] == 12
    assert count_frames(out) == 12
    # the one camera with annotate: its encoder may use every CPU
    from vidpipe.stages.annotate import usable_cpus

    assert summary.stages["annotate"]["streams"]["0"]["encoder_threads"] == str(usable_cpus())
