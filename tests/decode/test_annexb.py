"""Annex-B conversion in Python: byte-identical with FFmpeg's bitstream filters, damage, starts."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from vidpipe.decode.annexb import AnnexB
from vidpipe.decode.demux import Demuxer
from vidpipe.errors import DecodeError, UnsupportedError


def open_gop_clip(path: Path, frames: int = 60) -> Path:
    """H.264 with open GOPs: keyframes that are recovery-point I-frames, not IDR pictures."""
    import numpy as np

    with av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=25, options={"x264-params": "keyint=10:min-keyint=10:scenecut=0:bframes=2:open-gop=1"})
        s.width, s.height, s.pix_fmt = 160, 96, "yuv420p"
        for i in range(frames):
            img = np.full((96, 160, 3), (i * 7) % 256, dtype=np.uint8)
            img[(i * 3) % 80 : (i * 3) % 80 + 16, 10:40] = 255 - (i * 7) % 256
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts = i
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


@pytest.mark.parametrize(
    "suffix,codec,pix_fmt",
    [(".mp4", "h264", "yuv420p"), (".mkv", "h264", "yuv420p"), (".mkv", "hevc", "yuv420p"),
     (".mp4", "hevc", "yuv420p"), (".mkv", "hevc", "yuv420p10le")],
)  # fmt: skip
def test_identical_to_ffmpeg_filters(make_clip, suffix, codec, pix_fmt):
    clip = make_clip(suffix, codec=codec, pix_fmt=pix_fmt, frames=40, gop=10, bframes=2)
    with Demuxer(clip.path) as raw, Demuxer(clip.path, annexb=True) as ref:
        conv = AnnexB(codec, raw.extradata)
        assert not conv.passthrough
        stored = [bytes(p) for p in raw.raw_packets()]
        theirs = [p.data for p in ref.packets()]
    ours = [conv.convert(p) for p in stored]
    assert len(ours) == 40 and ours == theirs
    # after a reset (a seek), a keyframe gets the parameter sets again, as after the filter's flush
    conv.reset()
    assert conv.convert(stored[0]) == theirs[0]


def test_non_idr_keyframe_gets_parameter_sets_at_a_segment_start(tmp_path):
    path = open_gop_clip(tmp_path / "open.mp4")
    with Demuxer(path) as dmx:
        conv = AnnexB("h264", dmx.extradata)
        packets = [(bytes(p), p.is_keyframe) for p in dmx.raw_packets()]
    keys = [i for i, (_, k) in enumerate(packets) if k]
    assert len(keys) > 2
    later = packets[keys[1]][0]
    assert (later[4] & 0x1F) != 5  # an I slice (or SEI), not an IDR picture
    conv.reset()
    plain = conv.convert(later)
    conv.reset()
    started = conv.convert(later, start=True)
    assert started.endswith(plain) and started != plain
    assert started[4] & 0x1F == 7 and conv.sps and started.startswith(conv.sps + conv.pps)
    # a decoder that starts there decodes frames (it would have no SPS otherwise)
    cc = av.CodecContext.create("h264", "r")
    frames = []
    for data, _ in [(started, True)] + packets[keys[1] + 1 : keys[2]]:
        frames += cc.decode(av.Packet(data if data is started else conv.convert(data)))
    frames += cc.decode(None)
    assert frames


def test_annexb_input_passes_through(make_clip):
    clip = make_clip(".mkv", codec="h264", frames=10, gop=5)
    with Demuxer(clip.path, annexb=True) as dmx:
        packets = [p.data for p in dmx.packets()]
    conv = AnnexB("h264", b"\x00\x00\x00\x01\x67\x42")  # Annex-B header: nothing to convert
    assert conv.passthrough and [conv.convert(p) for p in packets] == packets
    assert AnnexB("hevc", None).passthrough


def test_damaged_packets_and_headers_are_refused(make_clip):
    clip = make_clip(".mp4", codec="h264", frames=10, gop=5)
    with Demuxer(clip.path) as dmx:
        conv = AnnexB("h264", dmx.extradata)
        data = bytes(next(dmx.raw_packets()))
    with pytest.raises(DecodeError, match="damaged"):
        conv.convert(data[:-10] + b"\xff" * 4)  # a NAL length past the end
    with pytest.raises(DecodeError, match="trailing"):
        conv.convert(data + b"\x00\x01")
    with pytest.raises(UnsupportedError):
        AnnexB("h264", b"\x01\x64\x00")
    with pytest.raises(UnsupportedError):
        AnnexB("hevc", b"\x01" + b"\x00" * 21 + b"\x01" + b"\x05\x00\x01\x00\x01\x00")  # NAL type 5 in hvcC
    with pytest.raises(UnsupportedError):
        AnnexB("vp9", b"")
