"""vidpipe's frames against the ``ffmpeg`` command line, over a matrix of generated clips.

Each :class:`Cell` is a small clip made with :func:`media.make_video` (codec, bit depth, chroma,
constant or variable frame rate, rotation, odd size, matrix, range, optionally a time range and a
stride). :func:`run_cell` decodes it with a vidpipe decoder and with ``ffmpeg`` (``-fps_mode
passthrough``, raw RGB, the colour matrix and range given explicitly on the ``scale`` filter) and
compares frame count, order (the stamp drawn in each frame), size, timestamps (``showinfo``) and
pixels. Only the ``ffmpeg`` executable is needed: the one on ``PATH``, or ``$FFMPEG``.

References, per bit depth:

- 8-bit: ``ffmpeg ... -vf scale=in_color_matrix=M:in_range=R -pix_fmt rgb24`` (its defaults);
  vidpipe must be bit-exact (one stated exception: :data:`SITED_ODD_420_TOLERANCE`).
- more than 8 bits: ``... scale=...:flags=neighbor -pix_fmt gbrp``: the chroma rule of FFmpeg's
  own 8-bit path (each chroma sample over its 2x2 luma block), which vidpipe applies at every depth
  on the CPU (bit-exact) and NVDEC (float arithmetic, :data:`DEEP_TOLERANCE_GPU`); see
  :mod:`vidpipe.decode.rgb` and :mod:`vidpipe.ops.color`. FFmpeg's *default* 10-bit rgb24 (generic
  path, bicubic chroma, 8-bit tables: full white 253) is measured too (``vs_default``), and so is
  each one's distance to the picture the clip was rendered from (``src``): vidpipe's must not be
  the larger, which is why vidpipe does not copy FFmpeg's default there.

Run ``python tests/decode/ffmpeg_matrix.py`` to print the matrix (CPU decoders), or pytest
``tests/decode/test_ffmpeg_parity.py -s``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from media import make_video, read_stamp, vfr_times  # noqa: E402

#: 8-bit 4:2:0 of odd size: swscale's generic path in both, run with the command line's flags
#: (bit-exact), except where the stream tags a chroma siting that the command line hands to
#: swscale and PyAV cannot (MPEG-4 Part 2): measured 73 / 0.98 there (max, mean)
ODD_420_TOLERANCE = (0, 0.0)
SITED_ODD_420_TOLERANCE = (100, 2.0)
#: more than 8 bits, against ``flags=neighbor`` gbrp (max, mean): on the CPU vidpipe runs the same
#: swscale arithmetic (measured 0 / 0.000; one level allowed for other FFmpeg builds / CPUs) ...
DEEP_TOLERANCE = (1, 0.01)
#: ... NVDEC's P010 kernels compute in float, not swscale's fixed point: measured with the same
#: float converter (vidpipe.ops.color.yuv_to_rgb) on the CPU, max 1, mean <= 0.30 (full range)
DEEP_TOLERANCE_GPU = (2, 0.35)
#: why the rotation cells may fail on this branch


@dataclass(frozen=True)
class Cell:
    name: str
    codec: str
    pix_fmt: str = "yuv420p"
    suffix: str = ".mp4"
    width: int = 64
    height: int = 48
    colorspace: str = "bt601"
    color_range: str = "limited"
    vfr: bool = False
    rotation: int = 0
    start: float | None = None
    frame_skip: int = 1
    frames: int = 16
    cut: float | None = None  # stream-copied by ``ffmpeg -ss CUT -c copy``: an MP4 edit list

    @property
    def bits(self) -> int:
        return 10 if "10" in self.pix_fmt else 8

    @property
    def odd_420(self) -> bool:
        return "420" in self.pix_fmt and (self.height % 2 == 1 or self.width % 2 == 1)


CELLS: tuple[Cell, ...] = (
    Cell("h264-420-601-tv", "h264"),
    Cell("h264-420-709-pc", "h264", suffix=".mkv", colorspace="bt709", color_range="full"),
    Cell("h264-444-709-tv-odd", "h264", pix_fmt="yuv444p", width=65, height=49, colorspace="bt709"),
    Cell("h264-420p10-709-tv", "h264", pix_fmt="yuv420p10le", colorspace="bt709"),
    Cell("h264-420p10-601-pc", "h264", pix_fmt="yuv420p10le", suffix=".mkv", color_range="full"),
    Cell("hevc-420-709-tv", "hevc", colorspace="bt709"),
    Cell("hevc-444-601-pc", "hevc", pix_fmt="yuv444p", suffix=".mkv", color_range="full"),
    Cell("hevc-420p10-709-tv", "hevc", pix_fmt="yuv420p10le", colorspace="bt709"),
    Cell("vp9-420-601-tv", "vp9", suffix=".webm"),
    Cell("vp9-444-709-tv-odd", "vp9", pix_fmt="yuv444p", suffix=".webm", width=65, height=49, colorspace="bt709"),
    Cell("vp9-420-709-pc-odd", "vp9", suffix=".webm", width=65, height=49, colorspace="bt709", color_range="full"),
    Cell("av1-420-709-tv", "av1", suffix=".mkv", colorspace="bt709"),
    Cell("av1-420p10-709-tv", "av1", pix_fmt="yuv420p10le", suffix=".mkv", colorspace="bt709"),
    Cell("mpeg4-420-601-tv-odd", "mpeg4", suffix=".avi", width=65, height=49),
    Cell("mpeg4-420-601-tv", "mpeg4", suffix=".avi"),
    Cell("mjpeg-420-601-pc", "mjpeg", suffix=".avi", color_range="full"),
    Cell("mjpeg-420-601-pc-odd", "mjpeg", suffix=".avi", width=65, height=49, color_range="full"),
    # MJPEG streams are tagged BT.601 (bt470bg) whatever the encoder is told: JPEG's matrix
    Cell("mjpeg-444-601-pc", "mjpeg", pix_fmt="yuv444p", suffix=".mkv", color_range="full"),
    Cell("h264-vfr", "h264", vfr=True, frames=24),
    Cell("hevc-vfr-mkv", "hevc", suffix=".mkv", vfr=True, colorspace="bt709", frames=24),
    Cell("h264-vfr-start-skip", "h264", vfr=True, frames=30, start=0.3, frame_skip=3),
    Cell("h264-cfr-start-skip", "h264", frames=30, start=0.2, frame_skip=4),
    Cell("h264-editlist-cut", "h264", frames=40, cut=0.3),
    Cell("h264-rot90", "h264", rotation=90, width=64, height=48),
    Cell("h264-rot180", "h264", rotation=180),
    Cell("h264-rot270", "h264", rotation=270, width=64, height=48),
)


@dataclass
class Result:
    cell: Cell
    backend: str
    frames: int = 0
    ffmpeg_frames: int = 0
    size: tuple[int, int] | None = None
    ffmpeg_size: tuple[int, int] | None = None
    order_ok: bool = False
    index_ok: bool = False
    pts_err: float = 0.0
    max_err: int = -1
    mean_err: float = -1.0
    vs_default: tuple[int, float] | None = None  # >8 bit: against ffmpeg's default rgb24
    src: tuple[float, float] | None = None  # >8 bit: mean error to the source (vidpipe, ffmpeg default)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def row(self) -> str:
        notes = list(self.problems)
        if self.vs_default is not None:
            notes.append(f"vs ffmpeg's default rgb24 {self.vs_default[0]}/{self.vs_default[1]:.3f}")
        if self.src is not None:
            notes.append(f"mean error to the source: vidpipe {self.src[0]:.3f}, ffmpeg default {self.src[1]:.3f}")
        return (
            f"| {self.cell.name} | {self.backend} | {'pass' if self.passed else 'FAIL'} | "
            f"{self.frames}/{self.ffmpeg_frames} | {self.pts_err * 1000:.2f} | {self.max_err} | {self.mean_err:.3f} | "
            f"{'; '.join(notes)} |"
        )


HEADER = (
    "| cell | decoder | result | frames vidpipe/ffmpeg | pts err ms | max err | mean err | notes |\n"
    "|---|---|---|---|---|---|---|---|"
)


def ffmpeg_exe() -> str | None:
    """The ``ffmpeg`` command: ``$FFMPEG`` (any build, e.g. a static one carried to a GPU host),
    else the one on ``PATH``."""
    return os.environ.get("FFMPEG") or shutil.which("ffmpeg")


def ffmpeg_missing_reason() -> str | None:
    exe = ffmpeg_exe()
    if exe is None:
        return "the ffmpeg command line is not installed (apt-get install ffmpeg, or set FFMPEG to a binary)"
    if not os.access(exe, os.X_OK):
        return f"FFMPEG={exe} is not an executable"
    return None


def make_clip(cell: Cell, folder: Path):
    """The cell's clip (a :class:`media.Clip`; for ``cut`` cells its ``path`` is the cut copy, whose
    frames start at a keyframe's leading part that the edit list hides)."""
    import dataclasses

    path = folder / f"{cell.name}{cell.suffix}"
    times = vfr_times(cell.frames, fps=25, seed=len(cell.name)) if cell.vfr else None
    clip = make_video(
        path, codec=cell.codec, pix_fmt=cell.pix_fmt, width=cell.width, height=cell.height, frames=cell.frames,
        fps=25, gop=8, colorspace=cell.colorspace, color_range=cell.color_range, rotation=cell.rotation,
        timestamps=times, crf=18,
    )  # fmt: skip
    if cell.cut is None:
        return clip
    cut = folder / f"{cell.name}-cut{cell.suffix}"
    subprocess.run(
        [ffmpeg_exe() or "ffmpeg", "-v", "error", "-y", "-ss", str(cell.cut), "-i", str(path), "-c", "copy", str(cut)],
        check=True,
    )
    return dataclasses.replace(clip, path=cut)


def _scale(cell: Cell, flags: str | None) -> str:
    rng = "tv" if cell.color_range == "limited" else "pc"
    return f"scale=in_color_matrix={cell.colorspace}:in_range={rng}:out_range=pc" + (f":flags={flags}" if flags else "")


_SHOWINFO = re.compile(r"\bn:\s*(\d+)\s+pts:\s*(-?\d+)\s+pts_time:\s*(\S+).*?\bs:(\d+)x(\d+)")


def ffmpeg_frames(path: Path, cell: Cell, *, pix_fmt: str = "rgb24", flags: str | None = None):
    """``(frames (N, H, W, 3) uint8, times)`` from the ffmpeg command line: every decoded frame
    (``-fps_mode passthrough``; autorotated, as players show it; from ``-ss START`` for cells with a
    start), converted by the ``scale`` filter with the cell's matrix and range, and each frame's
    presentation time in seconds from the start of the stream (``showinfo``)."""
    pre = ["-ss", str(cell.start)] if cell.start else []
    proc = subprocess.run(
        [ffmpeg_exe() or "ffmpeg", "-nostats", "-hide_banner", "-v", "info", *pre, "-i", str(path), "-map", "0:v:0",
         "-fps_mode", "passthrough", "-vf", f"{_scale(cell, flags)},showinfo", "-pix_fmt", pix_fmt,
         "-f", "rawvideo", "-"],
        capture_output=True, check=True,
    )  # fmt: skip
    info = [m.groups() for m in map(_SHOWINFO.search, proc.stderr.decode(errors="replace").splitlines()) if m]
    if not info:
        return np.zeros((0, 1, 1, 3), np.uint8), []
    w, h = int(info[0][3]), int(info[0][4])
    times = [float(t) + (cell.start or 0.0) for _, _, t, _, _ in info]  # -ss shifts times to 0
    a = np.frombuffer(proc.stdout, np.uint8)
    if pix_fmt == "rgb24":
        return a.reshape(-1, h, w, 3), times
    return a.reshape(-1, 3, h, w)[:, [2, 0, 1]].transpose(0, 2, 3, 1), times  # gbrp planes G, B, R


def decode_vidpipe(path: Path, cell: Cell, backend: str):
    """``(frames (N, H, W, 3) uint8, indices, pts)`` from a vidpipe decoder: ``"pyav"``,
    ``"parallel"`` (segment-parallel PyAV, 2 workers) or ``"nvdec"`` (CUDA, RGB output)."""
    from vidpipe.decode.base import DecodeOptions

    opts = DecodeOptions(start=cell.start, frame_skip=cell.frame_skip)
    if backend == "pyav":
        from vidpipe.decode.pyav import PyAVDecoder

        dec = PyAVDecoder(str(path), options=opts)
    elif backend == "parallel":
        from vidpipe.decode.parallel import PyAVParallelDecoder

        dec = PyAVParallelDecoder(str(path), options=opts, workers=2, segment_frames=8)
    if backend in ("pyav", "parallel") and (dec.info.rotation or dec.info.extra.get("mirror")):
        from vidpipe.decode.rotation import RotatedDecoder  # what open_decoder wraps every backend in

        dec = RotatedDecoder(dec, dec.info.rotation, mirror=bool(dec.info.extra.get("mirror")))
    elif backend not in ("pyav", "parallel"):
        import vidpipe

        dec = vidpipe.open_video(
            str(path), device="cuda", decoder="nvdec", strict_gpu=True, start=cell.start, frame_skip=cell.frame_skip
        )
    frames, idx, pts = [], [], []
    with dec:
        for b in dec.batches(8):
            frames.append(b.data.cpu().numpy().transpose(0, 2, 3, 1))
            idx += [m.index for m in b.frames]
            pts += [m.pts for m in b.frames]
    return (np.concatenate(frames) if frames else np.zeros((0, 1, 1, 3), np.uint8)), idx, pts


def _err(a: np.ndarray, b: np.ndarray) -> tuple[int, float]:
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return int(d.max()), float(d.mean())


def run_cell(cell: Cell, folder: Path, backend: str = "pyav", clip=None) -> Result:
    """Decode ``cell``'s clip with vidpipe's ``backend`` and ffmpeg and compare; see the module doc."""
    clip = clip or make_clip(cell, folder)
    res = Result(cell, backend)
    deep = cell.bits > 8
    ref_all, times_all = ffmpeg_frames(
        clip.path, cell, pix_fmt="gbrp" if deep else "rgb24", flags="neighbor" if deep else None
    )
    keep = list(range(0, len(ref_all), cell.frame_skip))
    ref = ref_all[keep]
    got, idx, pts = decode_vidpipe(clip.path, cell, backend)
    res.frames, res.ffmpeg_frames = len(got), len(ref)
    res.size = tuple(got.shape[1:3]) if len(got) else None  # type: ignore[assignment]
    res.ffmpeg_size = tuple(ref.shape[1:3]) if len(ref) else None  # type: ignore[assignment]
    if res.frames != res.ffmpeg_frames:
        res.problems.append(f"{res.frames} frames, ffmpeg {res.ffmpeg_frames}")
    if res.size != res.ffmpeg_size:
        res.problems.append(f"size {res.size}, ffmpeg {res.ffmpeg_size}")
    res.index_ok = idx == keep[: len(idx)] and len(idx) == len(keep)
    if not res.index_ok:
        res.problems.append(f"frame numbers {idx[:8]}..., expected {keep[:8]}...")
    n = min(len(got), len(ref))
    if len(times_all) != len(ref_all):
        res.problems.append(f"ffmpeg printed {len(times_all)} frame times for {len(ref_all)} frames")
    elif n:
        want_t = [times_all[k] for k in keep[:n]]
        res.pts_err = max(abs((a if a is not None else -1.0) - b) for a, b in zip(pts[:n], want_t))
        if res.pts_err > 1.5e-3:
            res.problems.append(f"timestamps off by {res.pts_err:.4f}s")
    first = int(np.ceil(cell.start * 25 - 1e-9)) if cell.start and not cell.vfr else None
    if cell.rotation == 0 and cell.height >= 24 and n:
        stamps = [read_stamp(f) for f in got[:n]]
        ref_stamps = [read_stamp(f) for f in ref[:n]]
        res.order_ok = stamps == ref_stamps
        if first is not None:
            res.order_ok = res.order_ok and stamps[0] == first
        if not res.order_ok:
            res.problems.append(f"frames out of order: {stamps[:8]} vs ffmpeg {ref_stamps[:8]}")
    else:
        res.order_ok = True
    if n and res.size == res.ffmpeg_size:
        res.max_err, res.mean_err = _err(got[:n], ref[:n])
        if deep:
            limit = DEEP_TOLERANCE_GPU if backend == "nvdec" else DEEP_TOLERANCE
        elif cell.odd_420:
            limit = SITED_ODD_420_TOLERANCE if cell.codec == "mpeg4" else ODD_420_TOLERANCE
        else:
            limit = (0, 0.0)
        if res.max_err > limit[0] or res.mean_err > limit[1]:
            res.problems.append(f"pixels off (limit max {limit[0]}, mean {limit[1]})")
        if deep:
            default = ffmpeg_frames(clip.path, cell)[0][keep][:n]
            res.vs_default = _err(got[:n], default)
            if cell.rotation == 0 and cell.start is None and cell.frame_skip == 1:
                src = np.stack([clip.rgb(i) for i in range(n)])
                res.src = (_err(got[:n], src)[1], _err(default, src)[1])
                if res.src[0] > res.src[1] + 0.05:
                    res.problems.append("farther from the source than ffmpeg's default rgb24")
    return res


def main() -> int:  # pragma: no cover - a reporting script
    import tempfile

    reason = ffmpeg_missing_reason()
    if reason:
        print(reason)
        return 2
    backends = sys.argv[1:] or ["pyav", "parallel"]
    print(HEADER)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for cell in CELLS:
            clip = make_clip(cell, Path(tmp))
            for backend in backends:
                try:
                    res = run_cell(cell, Path(tmp), backend, clip=clip)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    res = Result(cell, backend, problems=[f"{type(exc).__name__}: {exc}"])
                failed += not res.passed
                print(res.row(), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("SVT_LOG", "1")
    raise SystemExit(main())
