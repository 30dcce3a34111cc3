"""Damaged video files on the CPU path: no unexpected exception, no hang, the good frames kept.

The reference is FFmpeg's own decoder through the ``ffmpeg`` tool (frames counted with ``-f
framemd5``): it skips what it cannot decode and goes on, concealing damage where it can. vidpipe's
PyAV decoder does the same, so on damaged files it delivers the frames ``ffmpeg`` counts, and
marks the source partial (``dec.error``) when packets had to be skipped.

Root cause of issue 9's ``unexpected IndexError: list index out of range`` on a corrupt MPEG-TS:
FFmpeg's MPEG-TS demuxer adds a stream when a packet arrives on a PID the programme table never
announced (corrupt bytes easily look like one). PyAV's ``container.demux()`` (18 and 19) then
crashes at the end of the file: its flush loop walks the grown stream count through a mask
allocated for the streams known at open time and indexes ``container.streams`` past its end.
vidpipe reads packets with :func:`vidpipe.decode.probe.read_packets`, which stops at the end of
the file before that loop.
"""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

import vidpipe
from ffmpeg_cli import count_frames
from vidpipe.decode.demux import Demuxer
from vidpipe.decode.parallel import PyAVParallelDecoder
from vidpipe.decode.pyav import PyAVDecoder
from vidpipe.errors import DecodeError, SourceError, VidpipeError

CLIP = dict(width=160, height=96, frames=60, fps=25, gop=10)
#: a TS long enough that its middle lies past what FFmpeg reads when opening it (5 s): streams
#: appearing there are new to PyAV's demux()
STRAY = dict(width=160, height=96, frames=120, fps=10, gop=10)


def _ts_packet(pid: int, payload: bytes) -> bytes:
    """One 188-byte MPEG-TS packet on ``pid`` starting a payload unit, padded with 0xff."""
    return (bytes([0x47, 0x40 | (pid >> 8), pid & 0xFF, 0x10]) + payload).ljust(188, b"\xff")


def stray_pid_ts(src: Path, dst: Path, *, pids: int = 16) -> Path:
    """``src`` (an MPEG-TS) with two packets on each of ``pids`` unannounced PIDs (a PES start of
    an MPEG audio stream) inserted in the middle: FFmpeg adds a stream for each. The video is
    untouched. (PyAV's crash reads one byte past its mask per added stream: with one added
    stream it does not always crash; with 16 it did every time here.)"""
    data = src.read_bytes()
    mid = len(data) // 2 // 188 * 188
    pes = b"\x00\x00\x01\xc1\x00\x00\x80\x00\x00" + bytes(50)
    stray = b"".join(_ts_packet(0x300 + k, pes) * 2 for k in range(pids))
    dst.write_bytes(data[:mid] + stray + data[mid:])
    return dst


def pyav_plain_demux_fails(path: Path) -> bool:
    """Whether PyAV's own ``container.demux(stream)`` loop raises IndexError on ``path``."""
    try:
        with av.open(str(path)) as container:
            for _ in container.demux(container.streams.video[0]):
                pass
    except IndexError:
        return True
    except av.error.FFmpegError:
        return False
    return False


def decode_all(path: Path, timeout: float = 120) -> tuple[PyAVDecoder, list]:
    """Decode ``path`` with :class:`PyAVDecoder` in a thread; a hang fails the test."""

    def run() -> tuple[PyAVDecoder, list]:
        dec = PyAVDecoder(path)
        return dec, [m for b in dec.batches(16) for m in b.frames]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result(timeout=timeout)


def test_stream_appearing_mid_ts_decodes_every_frame(make_clip, tmp_path):
    clip = make_clip(".ts", **STRAY)
    bad = stray_pid_ts(Path(clip.path), tmp_path / "stray.ts")
    if not pyav_plain_demux_fails(bad):  # the PyAV bug this guards against; a fixed PyAV is fine too
        print(f"PyAV {av.__version__} no longer crashes at the end of demux() here")
    dec, metas = decode_all(bad)
    assert dec.error is None
    assert [m.index for m in metas] == list(range(clip.frames))
    with Demuxer(bad, annexb=True) as dmx:  # the NVDEC path's packets and keyframe scan
        assert sum(1 for _ in dmx.packets()) == clip.frames
        assert len(dmx.keyframes()) == clip.frames // STRAY["gop"]
    par = PyAVParallelDecoder(bad, workers=2, threads=1, segment_frames=40)  # the segment machinery
    assert sum(len(b) for b in par.batches(16)) == clip.frames and par.error is None
    with vidpipe.open_video(bad, device="cpu") as video:  # frame access reads to the end too
        assert video[-1].shape[0] == 3 and len(video) == clip.frames


def _garbage(data: bytes, seed: int) -> bytes:
    """188 bytes copied from elsewhere in the file over a point in its middle, not aligned to a
    TS packet: garbage in which the demuxer resynchronises on stray sync bytes."""
    rng = np.random.default_rng(seed)
    at = int(len(data) * rng.uniform(0.2, 0.8))
    src = int(rng.integers(0, len(data) - 188))
    out = bytearray(data)
    out[at : at + 188] = data[src : src + 188]
    return bytes(out)


@pytest.fixture(scope="module")
def garbage_ts(make_clip, tmp_path_factory) -> tuple[object, Path]:
    """Issue 9's case: an H.264 MPEG-TS (with audio) with garbage in the middle that made PyAV's
    demux() (and so the CPU path) fail with an IndexError; skips if no such corruption is found."""
    clip = make_clip(".ts", width=320, height=192, frames=200, fps=25, gop=25, audio=True)
    data = Path(clip.path).read_bytes()
    bad = tmp_path_factory.mktemp("garbage") / "bad.ts"
    for seed in range(400):  # about 1 in 100 such corruptions adds a stream
        bad.write_bytes(_garbage(data, seed))
        if pyav_plain_demux_fails(bad):
            return clip, bad
    pytest.skip(f"no corruption tried makes PyAV {av.__version__}'s demux() fail on this clip")


def test_corrupt_bytes_in_ts_keep_frames(garbage_ts):
    clip, bad = garbage_ts
    dec, metas = decode_all(bad)
    assert len(metas) > clip.frames * 0.9
    indices = [m.index for m in metas]
    assert indices == sorted(set(indices))
    assert dec.error is None or (isinstance(dec.error, DecodeError) and str(bad) in str(dec.error))


def test_corrupt_bytes_in_ts_frame_count_matches_ffmpeg(garbage_ts):
    _, bad = garbage_ts
    _, metas = decode_all(bad)
    assert len(metas) == count_frames(bad)


# ------------------------------------------------------------------------- other damage


def _zero(data: bytes) -> bytes:
    out = bytearray(data)
    n = len(out) // 10
    out[len(out) // 2 - n : len(out) // 2 + n] = bytes(2 * n)
    return bytes(out)


def _random(seed: int):
    def damage(data: bytes) -> bytes:
        out = bytearray(data)
        n = len(out) // 20
        start = len(out) // 2 - n // 2
        out[start : start + n] = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()
        return bytes(out)

    return damage


def _in_moov(offset: int, size: int):
    def damage(data: bytes) -> bytes:
        at = data.find(b"moov") + offset
        out = bytearray(data)
        out[at : at + size] = np.random.default_rng(offset).integers(0, 256, size, dtype=np.uint8).tobytes()
        return bytes(out)

    return damage


def _in_box(name: bytes):
    def damage(data: bytes) -> bytes:
        at = data.find(name)
        out = bytearray(data)
        out[at + 4 : at + 36] = b"\xff" * 32
        return bytes(out)

    return damage


DAMAGE = {
    "truncated": lambda d: d[: len(d) * 6 // 10],
    "truncated-header": lambda d: d[:300],
    "zeroed-middle": _zero,
    "random-middle-0": _random(0),
    "random-middle-1": _random(1),
}
MOOV_DAMAGE = {  # MP4 with the index first (faststart): damage inside it
    "moov-size": _in_moov(0, 4),
    "moov-8": _in_moov(8, 64),
    "moov-100": _in_moov(100, 200),
    "moov-300": _in_moov(300, 400),  # damaged metadata: PyAV raised UnicodeDecodeError at open
    "moov-stsz": _in_box(b"stsz"),
    "moov-stco": _in_box(b"stco"),
    "moov-stss": _in_box(b"stss"),
    "moov-stts": _in_box(b"stts"),
    "moov-avcC": _in_box(b"avcC"),
}
CASES = [(s, n) for s in (".ts", ".mp4", ".mkv") for n in DAMAGE] + [(".mp4", n) for n in MOOV_DAMAGE]
#: (suffix, damage) where vidpipe delivers fewer frames than the ffmpeg tool: the damage is in the last
#: packets, whose errors come out while draining the decoder; PyAV has no way to receive the
#: frames after such an error (the ``ffmpeg`` tool goes on receiving), so up to the decoder's
#: frames in flight are lost.
DRAIN_LOSS = {(".mp4", "truncated"), (".mp4", "zeroed-middle")}


def _damaged(make_clip, tmp_path: Path, suffix: str, name: str) -> Path:
    clip = make_clip(suffix, faststart=True, **CLIP) if suffix == ".mp4" else make_clip(suffix, **CLIP)
    damage = {**DAMAGE, **MOOV_DAMAGE}[name]
    out = tmp_path / f"{name}{suffix}"
    out.write_bytes(damage(Path(clip.path).read_bytes()))
    return out


@pytest.mark.parametrize("suffix,name", CASES, ids=[f"{n}{s}" for s, n in CASES])
def test_damaged_file_clear_error_or_frames(make_clip, tmp_path, suffix, name):
    """Every damaged file either fails to open with a one-line SourceError naming it, or decodes
    (in bounded time) to frames numbered in order, a DecodeError naming it when frames were lost."""
    bad = _damaged(make_clip, tmp_path, suffix, name)
    try:
        dec, metas = decode_all(bad)
    except SourceError as exc:
        assert str(bad) in str(exc) and "\n" not in str(exc)
        return
    indices = [m.index for m in metas]
    assert indices == sorted(set(indices))
    if dec.error is not None:
        assert isinstance(dec.error, DecodeError) and str(bad) in str(dec.error)
    if not metas:
        assert dec.error is not None  # nothing decoded is never a clean result


@pytest.mark.parametrize("suffix,name", CASES, ids=[f"{n}{s}" for s, n in CASES])
def test_damaged_file_frame_count_matches_ffmpeg(make_clip, tmp_path, suffix, name):
    bad = _damaged(make_clip, tmp_path, suffix, name)
    reference = count_frames(bad)  # None: the ffmpeg tool cannot open it either
    try:
        _, metas = decode_all(bad)
    except SourceError:
        assert not reference, f"ffmpeg decodes {reference} frames of a file vidpipe cannot open"
        return
    if (suffix, name) in DRAIN_LOSS:
        assert reference - 8 <= len(metas) <= reference
    else:
        assert len(metas) == (reference or 0)


def test_stray_pid_ts_matches_ffmpeg(make_clip, tmp_path):
    clip = make_clip(".ts", **STRAY)
    bad = stray_pid_ts(Path(clip.path), tmp_path / "stray.ts")
    assert count_frames(bad) == clip.frames


def test_cli_on_corrupt_ts_no_traceback(make_clip, tmp_path):
    """Through the CLI: the TS with streams appearing mid-file is a clean, complete run (exit 0)
    without an unexpected exception or a traceback (before the fix: "unexpected IndexError")."""
    clip = make_clip(".ts", **STRAY)
    stray = stray_pid_ts(Path(clip.path), tmp_path / "stray.ts")
    out = tmp_path / "dets.jsonl"
    p = subprocess.run(  # every 10th frame to the model: the whole file is still demuxed
        [sys.executable, "-m", "vidpipe", "detect", str(stray), "--device", "cpu", "--frame-skip", "10",
         "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert "unexpected" not in p.stderr and "Traceback" not in p.stderr
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    (src,) = meta["summary"]["sources"]
    assert src["status"] == "ok" and src["frames"] == clip.frames // 10


@pytest.mark.gpu
@pytest.mark.nvdec
def test_nvdec_on_stream_appearing_mid_ts(make_clip, tmp_path):
    """The NVDEC path reads packets with the same Demuxer: every frame, nothing partial."""
    import torch

    from vidpipe.decode.nvdec import NvdecDecoder

    clip = make_clip(".ts", width=320, height=192, frames=120, fps=10, gop=10)
    bad = stray_pid_ts(Path(clip.path), tmp_path / "stray.ts")
    dec = NvdecDecoder(str(bad), device="cuda", workers=2, segment_frames=40)
    indices = []
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for b in dec.batches(8):
            indices.extend(m.index for m in b.frames)
    stream.synchronize()
    assert indices == list(range(clip.frames)) and dec.error is None


@pytest.mark.gpu
@pytest.mark.nvdec
def test_nvdec_on_corrupt_bytes_in_ts(garbage_ts):
    import torch

    from vidpipe.decode.nvdec import NvdecDecoder

    clip, bad = garbage_ts
    dec = NvdecDecoder(str(bad), device="cuda", workers=2, segment_frames=50)
    n = 0
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for b in dec.batches(16):
            n += len(b)
    stream.synchronize()
    assert n > clip.frames * 0.9
    assert dec.error is None or (isinstance(dec.error, DecodeError) and str(bad) in str(dec.error))
