"""The test media generator itself: what it writes is what it says (read back with plain PyAV)."""

from __future__ import annotations

import av
import numpy as np
import pytest
from media import (
    BAR_COLORS,
    BOX_COLORS,
    available_codecs,
    corrupt_middle,
    make_audio,
    make_empty,
    make_size_change,
    make_text,
    make_video,
    read_stamp,
    read_tags,
    truncate,
)

_SWS = {"bt601": 5, "bt709": 1, "bt2020": 9}
_RANGE = {"limited": 1, "full": 2}

# codec, suffix, pix_fmt, colorspace, range, size, whether the container/codec carry the tags
CASES = [
    ("h264", ".mp4", "yuv420p", "bt601", "limited", (160, 96), True),
    ("h264", ".mkv", "yuv420p", "bt709", "limited", (160, 96), True),
    ("h264", ".mov", "yuv420p", "bt709", "full", (160, 96), True),
    ("h264", ".mp4", "yuv444p", "bt709", "limited", (321, 241), True),
    ("h264", ".mp4", "yuv420p10le", "bt2020", "limited", (128, 72), True),
    ("hevc", ".mp4", "yuv420p", "bt709", "limited", (160, 96), True),
    ("hevc", ".mkv", "yuv420p10le", "bt2020", "limited", (128, 72), True),
    ("vp9", ".webm", "yuv420p", "bt709", "limited", (321, 241), True),
    ("av1", ".mkv", "yuv420p", "bt709", "limited", (160, 96), True),
    ("mpeg4", ".avi", "yuv420p", "bt601", "limited", (321, 241), False),
    ("mjpeg", ".avi", "yuv420p", "bt601", "full", (160, 96), True),
    ("mjpeg", ".mkv", "yuv444p", "bt709", "full", (64, 48), True),
]


def _decode_all(path, colorspace, color_range):
    """Every frame as ``(pts seconds, key, RGB (H, W, 3))`` with an explicit, known conversion."""
    out = []
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        for f in c.decode(s):
            rgb = f.reformat(
                format="rgb24", src_colorspace=_SWS[colorspace], src_color_range=_RANGE[color_range], dst_color_range=2
            ).to_ndarray()
            out.append((float(f.pts * f.time_base), bool(f.key_frame), rgb))
    return out


def _box_median(rgb, box):
    x1, y1, x2, y2 = box
    inner = rgb[y1 + 2 : y2 - 2, x1 + 2 : x2 - 2].reshape(-1, 3).astype(np.int32)
    return np.median(inner, axis=0)


@pytest.mark.parametrize("codec,suffix,pix_fmt,space,rng,size,tagged", CASES, ids=lambda v: str(v))
def test_round_trip(tmp_path, codec, suffix, pix_fmt, space, rng, size, tagged):
    if codec not in available_codecs():
        pytest.skip(f"no {codec} encoder in this PyAV build")
    w, h = size
    clip = make_video(
        tmp_path / f"c{suffix}", codec=codec, width=w, height=h, frames=12, gop=5, pix_fmt=pix_fmt,
        colorspace=space, color_range=rng,
    )
    tags = read_tags(clip.path)
    assert (tags["width"], tags["height"]) == (w, h)
    assert tags["codec"] in (codec, "libdav1d")
    if tagged:
        assert tags["colorspace"] == space
        assert tags["color_range"] == rng
    frames = _decode_all(clip.path, space, rng)
    assert len(frames) == clip.frames == 12
    assert [f[0] for f in frames] == pytest.approx(list(clip.pts), abs=1.5e-3)
    assert [i for i, f in enumerate(frames) if f[1]] == list(clip.keyframes)
    tol = 12 if codec == "av1" else 6
    for i, (_, _, rgb) in enumerate(frames):
        assert read_stamp(rgb) == i
        for name, box in clip.boxes[i].items():
            got = _box_median(rgb, box)
            assert np.abs(got - BOX_COLORS[name]).max() <= tol, (i, name, got)


def test_wrong_matrix_is_detectable(tmp_path):
    """The colour check above is sensitive: decoding BT.601 as BT.709 moves green by > 6 levels."""
    clip = make_video(tmp_path / "c.mp4", frames=2, colorspace="bt601")
    _, _, rgb = _decode_all(clip.path, "bt709", "limited")[0]
    got = _box_median(rgb, clip.boxes[0]["green"])
    assert np.abs(got - BOX_COLORS["green"]).max() > 6


def test_bars_and_gradient(tmp_path):
    bars = make_video(tmp_path / "bars.mkv", pattern="bars", width=256, height=64, frames=3, colorspace="bt709")
    _, _, rgb = _decode_all(bars.path, "bt709", "limited")[0]
    edges = np.linspace(0, 256, len(BAR_COLORS) + 1).round().astype(int)
    for (name, colour), a, b in zip(BAR_COLORS, edges[:-1], edges[1:]):
        got = np.median(rgb[20:60, a + 4 : b - 4].reshape(-1, 3), axis=0)
        assert np.abs(got - colour).max() <= 6, name
    grad = make_video(tmp_path / "grad.mp4", pattern="gradient", frames=5, gop=5)
    frames = _decode_all(grad.path, "bt601", "limited")
    assert [read_stamp(f[2]) for f in frames] == list(range(5))
    assert frames[-1][2][40:, :, 2].mean() > frames[0][2][40:, :, 2].mean() + 100  # blue rises per frame


def test_untagged_clip_has_no_tags(tmp_path):
    clip = make_video(tmp_path / "u.mp4", frames=3, tag_color=False)
    tags = read_tags(clip.path)
    assert tags["colorspace"] is None and tags["color_range"] is None


def test_mpeg4_has_no_bframes_and_exact_gop(tmp_path):
    clip = make_video(tmp_path / "m.avi", codec="mpeg4", frames=12, gop=4)
    frames = _decode_all(clip.path, "bt601", "limited")
    assert [i for i, f in enumerate(frames) if f[1]] == [0, 4, 8]
    assert clip.bframes == 0


def test_size_change(tmp_path):
    clip = make_size_change(tmp_path / "s.mkv", sizes=((64, 48), (96, 64)), frames_each=3)
    with av.open(str(clip.path)) as c:
        sizes = [(f.width, f.height) for f in c.decode(video=0)]
    assert sizes == list(clip.sizes) == [(64, 48)] * 3 + [(96, 64)] * 3


def test_invalid_requests(tmp_path):
    with pytest.raises(ValueError, match="even"):
        make_video(tmp_path / "x.mp4", width=321, height=241)  # 4:2:0 H.264 needs even sizes
    with pytest.raises(ValueError, match="pix_fmt"):
        make_video(tmp_path / "x.avi", codec="mpeg4", pix_fmt="yuv444p")
    with pytest.raises(ValueError, match="pattern"):
        make_video(tmp_path / "x.mp4", pattern="stripes")


def test_broken_input_helpers(tmp_path):
    assert make_empty(tmp_path / "e.mp4").stat().st_size == 0
    assert (tmp_path / "e.mp4").exists()
    text = make_text(tmp_path / "notes.mp4")
    assert text.read_text().startswith("this is not a video")
    clip = make_video(tmp_path / "v.mkv", frames=20)
    size = clip.path.stat().st_size
    cut = truncate(clip.path, 0.5, dst=tmp_path / "cut.mkv")
    assert cut.stat().st_size == int(size * 0.5)
    assert clip.path.stat().st_size == size  # the original is untouched with dst
    bad = corrupt_middle(clip.path, dst=tmp_path / "bad.mkv")
    a, b = clip.path.read_bytes(), bad.read_bytes()
    assert len(a) == len(b) and a != b
    assert a[:100] == b[:100] and a[-100:] == b[-100:]


@pytest.mark.parametrize("suffix,codec", [(".m4a", "aac"), (".wav", "pcm_s16le"), (".mkv", "aac")])
def test_audio_only(tmp_path, suffix, codec):
    path = make_audio(tmp_path / f"a{suffix}")
    with av.open(str(path)) as c:
        assert not c.streams.video
        assert c.streams.audio[0].codec_context.name == codec
