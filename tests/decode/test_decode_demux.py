"""Demuxer: packets, keyframe scan (no decoding), Annex-B conversion, seeking."""

from __future__ import annotations

import re
from fractions import Fraction

import av
import pytest

from vidpipe.decode.demux import Demuxer, Keyframe
from vidpipe.errors import SourceError
from vidpipe.types import Packet


def decoded_keyframes(path):
    """Presentation timestamps of the frames the decoder flags as keyframes."""
    with av.open(str(path)) as c:
        return [f.pts for f in c.decode(video=0) if f.key_frame]


@pytest.mark.parametrize(
    "suffix,codec", [(".mp4", "h264"), (".mkv", "h264"), (".mkv", "hevc"), (".webm", "vp9"), (".avi", "mpeg4")]
)
def test_keyframes_match_decoded_key_frames(make_clip, suffix, codec):
    clip = make_clip(suffix, codec=codec, frames=40, gop=10)
    with Demuxer(clip.path) as dm:
        keys = dm.keyframes()
        assert all(isinstance(k, Keyframe) for k in keys)
        assert [k.pts for k in keys] == decoded_keyframes(clip.path)
        assert [k.time for k in keys] == pytest.approx([clip.pts[i] for i in clip.keyframes], abs=1.5e-3)
        assert [k.packet for k in keys] == sorted(k.packet for k in keys) and keys[0].packet == 0
        packets = list(dm.packets())  # keyframes() left the demuxer at the start
    assert len(packets) == 40
    assert [i for i, p in enumerate(packets) if p.is_key] == [k.packet for k in keys]


def test_packets(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    with Demuxer(clip.path, stream_id=3) as dm:
        assert dm.codec == "h264" and isinstance(dm.time_base, Fraction)
        assert dm.extradata and dm.extradata[0] == 1  # avcC, not Annex-B
        packets = list(dm)
    assert len(packets) == 30
    assert all(isinstance(p, Packet) and p.stream_id == 3 and p.data for p in packets)
    assert packets[0].is_key and packets[0].pts_seconds == 0.0
    assert sorted(p.pts_seconds for p in packets) == pytest.approx(list(clip.pts), abs=1e-6)
    assert any(p.dts != p.pts for p in packets)  # B-frames: decode order differs from display order
    assert not packets[0].data.startswith(b"\x00\x00\x00\x01")  # length-prefixed NAL units


def _nal_types(data: bytes, codec: str) -> list[int]:
    heads = [m.end() for m in re.finditer(b"\x00\x00\x01", data)]
    if codec == "h264":
        return [data[i] & 0x1F for i in heads]
    return [(data[i] >> 1) & 0x3F for i in heads]


@pytest.mark.parametrize("codec,suffix,params", [("h264", ".mp4", {7, 8}), ("hevc", ".mkv", {32, 33, 34})])
def test_annexb(make_clip, codec, suffix, params):
    clip = make_clip(suffix, codec=codec, frames=20, gop=10)
    with Demuxer(clip.path, annexb=True) as dm:
        assert dm.annexb
        packets = list(dm.packets())
    assert len(packets) == 20
    for p in packets:
        assert p.data.startswith((b"\x00\x00\x00\x01", b"\x00\x00\x01"))
    for p in (p for p in packets if p.is_key):
        assert params <= set(_nal_types(p.data, codec))  # parameter sets in-band before each keyframe
    # the Annex-B stream decodes on its own (no extradata), like NVDEC would see it
    ctx = av.CodecContext.create(codec, "r")
    frames = []
    for p in packets:
        frames.extend(ctx.decode(av.Packet(p.data)))
    frames.extend(ctx.decode(None))
    assert len(frames) == 20


def test_annexb_is_ignored_for_other_codecs(make_clip):
    clip = make_clip(".webm", codec="vp9", frames=10, gop=10)
    with Demuxer(clip.path, annexb=True) as dm:
        assert not dm.annexb
        assert len(list(dm.packets())) == 10


def test_seek_lands_on_keyframe_before(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    with Demuxer(clip.path) as dm:
        dm.seek(0.5)  # frame 12.5 -> keyframe at frame 10 (0.4 s)
        first = next(iter(dm.packets()))
        assert first.is_key and first.pts_seconds == pytest.approx(0.4)
        rest = list(dm.packets())
        assert len(rest) == 19
        dm.seek(0.0)
        assert len(list(dm.packets())) == 30


def test_bikes_keyframes(bikes_path):
    with Demuxer(bikes_path) as dm:
        keys = dm.keyframes()
    assert keys[0].packet == 0 and keys[0].time == 0.0
    assert all(k.pos is not None and k.pos > 0 for k in keys)
    assert [k.pts for k in keys] == decoded_keyframes(bikes_path)


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_audio_packets_are_left_out(make_clip, suffix):
    clip = make_clip(suffix, frames=20, gop=10, audio=True)
    with Demuxer(clip.path) as dm:
        assert len(dm.keyframes()) == 2
        packets = list(dm.packets())
    assert len(packets) == 20 and all(p.stream_id == 0 for p in packets)


def test_bad_input(tmp_path):
    with pytest.raises(SourceError, match="no such file"):
        Demuxer(tmp_path / "missing.mkv")
