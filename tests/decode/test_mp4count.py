"""``mp4_video_frames``: an MP4/MOV file's video frame count from its index, held against PyAV's
(the stream's ``frames``, which FFmpeg reads from the same table) and FFmpeg's decoded count; and
``None`` for everything it must leave to PyAV."""

from __future__ import annotations

import struct

import av
import numpy as np
import pytest

from vidpipe.decode.mp4count import mp4_video_frames


def _ffmpeg_counts(path) -> tuple[int, int]:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        return s.frames, sum(1 for _ in c.decode(s))


@pytest.mark.parametrize(
    "suffix, kwargs",
    [
        (".mp4", {}),  # the index at the end, B-frames
        (".mp4", {"faststart": True}),
        (".mp4", {"audio": True}),  # two tracks
        (".mov", {"bframes": 0}),
        (".mp4", {"codec": "hevc"}),
        (".mp4", {"rotation": 90}),
    ],
    ids=["mp4", "faststart", "audio", "mov", "hevc", "rotated"],
)
def test_counts_what_ffmpeg_counts(make_clip, suffix, kwargs):
    clip = make_clip(suffix, frames=57, gop=10, **kwargs)
    nb, decoded = _ffmpeg_counts(clip.path)
    assert mp4_video_frames(clip.path) == nb == decoded == 57


def test_a_64_bit_box_size_before_the_index(make_clip, tmp_path):
    data = make_clip(".mp4", frames=33, gop=10, faststart=True).path.read_bytes()
    ftyp = struct.unpack(">I", data[:4])[0]
    big = struct.pack(">I4sQ", 1, b"free", 16 + 40) + bytes(40)  # size 1: a 64-bit size follows
    path = tmp_path / "big.mp4"
    path.write_bytes(data[:ftyp] + big + data[ftyp:])
    assert mp4_video_frames(path) == 33


def test_fragmented_mp4_is_left_to_pyav(make_clip, tmp_path):
    src = make_clip(".mp4", frames=40, gop=10).path
    dst = tmp_path / "frag.mp4"
    with av.open(str(src)) as i, av.open(str(dst), "w", options={"movflags": "frag_keyframe+empty_moov"}) as o:
        s = o.add_stream_from_template(i.streams.video[0])
        for pkt in i.demux(i.streams.video[0]):
            if pkt.dts is not None:
                pkt.stream = s
                o.mux(pkt)
    assert _ffmpeg_counts(dst)[1] == 40 and b"mvex" in dst.read_bytes()  # a real fragmented file
    assert mp4_video_frames(dst) is None  # its samples are in moof boxes: not counted here


@pytest.mark.parametrize("what", ["mkv", "truncated", "empty", "garbage", "missing", "jpeg", "folder"])
def test_anything_else_is_none(make_clip, tmp_path, what):
    if what == "mkv":
        path = make_clip(".mkv", frames=20, gop=10).path
    elif what == "truncated":  # the index is at the end: cut off
        data = make_clip(".mp4", frames=40, gop=10).path.read_bytes()
        path = tmp_path / "cut.mp4"
        path.write_bytes(data[: len(data) // 2])
    elif what == "empty":
        path = tmp_path / "empty.mp4"
        path.write_bytes(b"")
    elif what == "garbage":
        path = tmp_path / "garbage.mp4"
        path.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(range(256)) * 40)
    elif what == "missing":
        path = tmp_path / "nope.mp4"
    elif what == "jpeg":
        path = tmp_path / "a.jpg"
        path.write_bytes(b"\xff\xd8\xff\xe0" + bytes(200))
    else:
        path = tmp_path
    assert mp4_video_frames(path) is None


def test_an_audio_only_file_is_none(tmp_path):
    path = tmp_path / "tone.mp4"
    with av.open(str(path), "w") as o:
        s = o.add_stream("aac", rate=48000)
        for k in range(20):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), dtype="float32"), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 48000, k * 1024
            for pkt in s.encode(frame):
                o.mux(pkt)
        for pkt in s.encode(None):
            o.mux(pkt)
    assert mp4_video_frames(path) is None
