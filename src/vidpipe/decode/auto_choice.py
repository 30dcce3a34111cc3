"""When ``decoder="auto"`` reads a file with PyAV although NVDEC could: a short file that is a
run's only input, in a process whose NVDEC sessions are not started yet.

NVDEC's start is paid before its first frame (its sessions start one at a time in the driver,
about 50 ms each); PyAV starts at once on the CPU. Measured on one H200 host (16 cores, driver
580.159.04) with ``vidpipe.detect(clip, device="cuda", decoder=...)``, one fresh process per run,
the run's seconds after its warm-up, two runs each (`docs/bench/h200/short-files`; H.264 clips of
the bundled street footage, a keyframe a second):

=========  ======  ==============  ==============
size       frames  PyAV            NVDEC
=========  ======  ==============  ==============
640x360       150  0.17 / 0.20     0.97 / 0.44
640x360       600  0.35 / 0.35     0.76 / 0.67
640x360     2,400  0.99 / 0.93     1.12 / 1.24
1280x720      150  0.28 / 0.30     0.44 / 0.52
1280x720      600  0.57 / 0.56     0.71 / 0.74
1280x720    2,400  1.42 / 1.35     1.36 / 1.34
1920x1080      60  0.44 / 0.44     0.45 / 0.49
1920x1080     150  0.49 / 0.46     0.55 / 0.55
1920x1080     300  0.69 / 0.60     0.66 / 0.67
1920x1080     600  0.94 / 0.89     0.80 / 0.72
1920x1080   1,200  1.46 / 1.56     0.99 / 1.15
1920x1080   2,400  2.19 / 2.60     1.49 / 1.66
=========  ======  ==============  ==============

So PyAV is chosen below :data:`PYAV_FRAMES_BELOW` frames for the frame's size class (1080p and
larger: 300, where the two tie; 720p-class: 2,000, between PyAV's win at 600 and the tie at
2,400; smaller: 2,400, the longest clip measured, which PyAV still won). PyAV decoded those
clips with about 8 of the host's cores; on a machine with fewer the limits shrink in proportion
(an assumption: only 16 cores were measured). NVDEC stays the choice where its start is already
paid (sessions of this stream's kind pooled in the process, or decoder processes running), for
a run of several files (they share NVDEC's sessions from file to file), and for live streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidpipe.decode.base import DecodeOptions, StreamInfo

if TYPE_CHECKING:
    import torch

__all__ = ["PYAV_FRAMES_BELOW", "MEASURED_PYAV_CPUS", "frames_to_decode", "pyav_frame_limit", "pyav_finishes_first"]

#: ``(least pixels a frame, frames below which PyAV finishes first)``, largest size class first
PYAV_FRAMES_BELOW: tuple[tuple[int, int], ...] = ((1_500_000, 300), (500_000, 2_000), (0, 2_400))
#: the cores PyAV's decoding used in the measurement above (``bench e2e``'s CPU column: ~800%)
MEASURED_PYAV_CPUS = 8


def frames_to_decode(info: StreamInfo, options: DecodeOptions | None) -> int | None:
    """About how many frames decoding ``info`` with ``options`` reads (``None``: unknown). Skipped
    frames (``frame_skip``) are decoded all the same; ``start``/``end``/``max_frames`` narrow it."""
    n = info.frame_count
    if n is None:
        return None
    opts = options if options is not None else DecodeOptions()
    fps = info.fps or 0.0
    lo = int((opts.start or 0.0) * fps) if fps else 0
    hi = min(n, int(opts.end * fps)) if (opts.end is not None and fps) else n
    count = max(0, hi - lo)
    if opts.max_frames is not None:
        count = min(count, opts.max_frames * opts.frame_skip)
    return count


def pyav_finishes_first(info: StreamInfo, device: "torch.device", frames: int | None, *, cpus: int) -> str | None:
    """Why PyAV should read ``info`` instead of NVDEC (see the module docstring), or ``None``.

    Args:
        info: the stream; NVDEC has already said it can decode it.
        device: the CUDA device NVDEC would use.
        frames: the frames the run will decode (:func:`frames_to_decode`); ``None`` (unknown, or
            a run of several inputs): NVDEC.
        cpus: the CPUs this process may use.
    """
    if frames is None or _nvdec_started(info, device):
        return None
    limit = pyav_frame_limit(info, cpus=cpus)
    if frames >= limit:
        return None
    return (f"a short file ({frames} frames of {info.width}x{info.height}, fewer than {limit}): PyAV finishes "
            "before NVDEC's sessions would start")


def pyav_frame_limit(info: StreamInfo, *, cpus: int) -> int:
    """The frames of ``info``'s size below which PyAV finishes first with ``cpus`` CPUs
    (:data:`PYAV_FRAMES_BELOW`, shrunk in proportion below :data:`MEASURED_PYAV_CPUS`)."""
    pixels = info.width * info.height
    limit = next(n for least, n in PYAV_FRAMES_BELOW if pixels >= least)
    return int(limit * min(1.0, max(1, cpus) / MEASURED_PYAV_CPUS))


def _nvdec_started(info: StreamInfo, device: "torch.device") -> bool:
    """NVDEC's start is already paid in this process: idle sessions for this kind of stream, or
    decoder processes running on ``device``."""
    from vidpipe.decode.nvdec import session_key
    from vidpipe.decode.nvdec_pool import POOL
    from vidpipe.decode.procpool import get_pool

    return POOL.idle(session_key(info, device)) > 0 or get_pool(device, None, start=False) is not None
