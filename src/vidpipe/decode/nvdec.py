"""The GPU decoder: NVDEC through PyNvVideoCodec, frames kept on the GPU as NV12/P016 batches.

Each session's worker thread reads its segments' packets itself (MP4/MOV and Matroska straight
from the file, H.264/HEVC converted to Annex-B in Python; other containers through PyAV) and
decodes them with PyNvVideoCodec's core decoder (``CreateDecoder``) with ``cudacontext=0``
(PyTorch's primary context) and a PyTorch CUDA stream per session, so decoded surfaces are GPU
memory with no copy to the host. Each kept frame is copied once, device to device, from the
decoder's frame buffer (which the next ``Decode`` call reuses) into its row of a pooled
``(B, H*3/2, W)`` batch buffer, with one ``cuMemcpyDtoDAsync`` on the session's stream
(:mod:`vidpipe.decode.nvdec_copy`; PyTorch's ``from_dlpack`` + ``copy_`` where that does not apply). NVDEC
runs as several sessions over keyframe-aligned segments of the file (see
:mod:`vidpipe.decode.parallel`), by default three per NVDEC engine, which is what it takes to keep
all engines busy; never more than the file has segments. Sessions are pooled across decoders
(:mod:`vidpipe.decode.nvdec_pool`): the driver creates NVDEC decoders one at a time, about 50 ms
each, so they are created once per process (or ahead of time with :func:`warm_sessions`) and
reused for every file of the same kind; a file whose sessions are not pooled yet starts only as
many as its length pays for (about ``sqrt(frames / 32.5)``: 4 for 600 frames, measured,
:func:`~vidpipe.decode.nvdec_pool.sessions_worth_starting`).

Output: :class:`~vidpipe.types.FrameBatch` with ``format="nv12"`` (``uint8``) or ``"p010"``
(``uint16``, 10-bit samples in the high bits, as NVDEC writes P016) and the stream's
:class:`~vidpipe.types.ColorSpec`; colour conversion, letterbox and normalisation happen in the
fused kernel of :mod:`vidpipe.ops.fused`. Frame numbers and timestamps equal the PyAV
backend's (see :mod:`vidpipe.decode.segments`).

**CUDA stream contract.** Frames are written on the sessions' own streams. When
:meth:`NvdecDecoder.batches` yields a batch, the CUDA stream *current in the calling thread* has
been made to wait for those writes (``wait_event``, no host synchronization): issue the work that
reads the batch on that stream. When the caller asks for the next batch, an event is recorded on
the then-current stream, and the batch's buffer is rewritten only after it. So iterate with the
stream you process on as the current stream, e.g.::

    with torch.cuda.stream(worker_stream):
        for batch in decoder.batches(32):
            model_input = preprocess(batch, ...)      # enqueued on worker_stream

A batch (or any view of it) that you keep is never overwritten: its buffer leaves the pool.

**What falls back, and how.** :func:`check` (used by ``decoder="auto"``) sends to PyAV, with
the reason: no CUDA device, PyNvVideoCodec or the driver's NVDEC library missing, codecs NVDEC
does not take (MJPEG, ProRes, ...), chroma other than 4:2:0, more than 10 bits, odd sizes, sizes
outside the GPU's limits, and codec/bit-depth combinations the GPU lacks (``GetDecoderCaps`` on
the H200 used here: H.264 8-bit only, no AV1). A decoder session that fails while decoding
(an exception from PyNvVideoCodec) has its segment decoded again by PyAV on the CPU and uploaded
as NV12 into the same rows; only if that fails too are the frames missing (``error`` set,
``partial`` true), and the other segments go on. Corrupt packets NVDEC can conceal come out as
(damaged) frames, as with FFmpeg.

Importing this module imports PyNvVideoCodec and raises
:class:`~vidpipe.errors.BackendUnavailableError` where it cannot load (no NVIDIA driver), so the
registry reports the backend as unavailable; :mod:`vidpipe.decode.nvdec_caps` has the checks
without that import.

Never passed to PyNvVideoCodec: a CUDA context other than 0, or a stream other than one made by
PyTorch on the right device or by :mod:`vidpipe.decode.nvdec_early` in that device's primary
context, since a CUDA driver error inside it ends the process.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from vidpipe._validate import check_range
from vidpipe.decode.base import MAX_DECODER_PROCESSES, DecodeOptions, StreamInfo
from vidpipe.decode.cuda_driver import DriverStream, new_stream
from vidpipe.decode.nvdec_caps import (
    NVDEC_CODECS,
    canonical_codec,
    num_engines,
    nvdec_module,
    nvdec_unavailable,
    query_caps,
    stream_unsupported,
)
from vidpipe.decode.nvdec_copy import driver_copy
from vidpipe.decode.parallel import SegmentParallelDecoder
from vidpipe.decode.procpool import AUTO_START_FRAMES, DEFAULT_PROCESSES, sessions_per_process
from vidpipe.decode.sessions import PyAVSession
from vidpipe.errors import BackendUnavailableError, DecodeError, UnsupportedError

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.ipc_memory import DeviceRow
    from vidpipe.decode.segment_state import SegmentState
    from vidpipe.decode.segments import DecodePlan, Segment, StreamIndex
    from vidpipe.types import FrameBatch, Packet

__all__ = [
    "NvdecDecoder", "NvdecSession", "check", "create", "default_workers", "default_buffer_bytes", "warm_sessions",
    "session_key", "process_pass", "Streams",
]  # fmt: skip

logger = logging.getLogger(__name__)

# Without PyNvVideoCodec (or the NVIDIA driver's libraries it loads) this backend cannot exist
# here: importing the module raises BackendUnavailableError with the reason, which the registry
# reports for decoder="nvdec" and records as the fallback reason for decoder="auto".
nvdec_module()

#: sessions per NVDEC engine by default. A session is latency-bound (~1.5 ms per 1080p frame
#: alone, ~3 ms with two sessions per engine) and each of its ``Decode`` calls then waits to take
#: the GIL back from the other threads; more sessions hide both. 1080p H.264 on an H200 (7
#: engines), NV12 + FP16 letterbox, 4 GiB window: 14 sessions 3,650 fps, 21 sessions 3,905,
#: 28 sessions 3,940, against 4,340 for 28 independent sessions (measured in one run)
SESSIONS_PER_ENGINE = 3
#: the default frame window (``buffer_bytes``): this much GPU memory, at most 1/16 of the GPU's
DEFAULT_BUFFER_BYTES = 4 << 30
_active = 0  # NVDEC decoders iterating right now (their default session counts share the engines)
_active_lock = threading.Lock()
#: codecs whose container header (extradata) is sent before a segment's first packet
_PREPEND_EXTRADATA = {"mpeg4", "mpeg1video", "mpeg2video", "vc1"}


def _gpu(device: "torch.device | int") -> int:
    if isinstance(device, int):  # a CUDA ordinal already (sessions started before PyTorch)
        return device
    import torch

    return device.index if device.index is not None else torch.cuda.current_device()


def check(info: StreamInfo, device: "torch.device") -> str | None:
    """``None`` when NVDEC can decode ``info`` on ``device``, else the reason (for the registry)."""
    why = nvdec_unavailable(device)
    if why is not None:
        return why
    gpu = _gpu(device)
    return stream_unsupported(info, lambda codec, chroma, bits: query_caps(gpu, codec, chroma, bits))


def create(info: StreamInfo, *, device: "torch.device", options: DecodeOptions,
           index: "StreamIndex | None" = None) -> "NvdecDecoder":  # fmt: skip
    """Registry factory (``index``: the stream's scan, made already)."""
    return NvdecDecoder(info, device=device, options=options, fallback=options.cpu_fallback, index=index)


def default_workers(device: "torch.device | int", codec: str = "h264") -> int:
    """Concurrent sessions that keep every NVDEC engine of ``device`` busy."""
    return SESSIONS_PER_ENGINE * num_engines(_gpu(device), canonical_codec(codec))


def default_buffer_bytes(device: "torch.device") -> int:
    """GPU memory for frames decoded ahead of the consumer: :data:`DEFAULT_BUFFER_BYTES`, at most
    1/16 of the device's memory (4 GiB = ~1,380 1080p NV12 frames: two 60-frame segments per
    session for 21 sessions; in-order delivery needs about two per session in the window)."""
    import torch

    total = torch.cuda.get_device_properties(_gpu(device)).total_memory
    return int(max(256 << 20, min(DEFAULT_BUFFER_BYTES, total // 16)))


def _extradata(info: StreamInfo) -> bytes | None:
    """The container's codec header for codecs whose decoder needs it in-band (MPEG-4 Part 2 ...)."""
    if canonical_codec(info.codec) not in _PREPEND_EXTRADATA:
        return None
    from vidpipe.decode.demux import Demuxer

    with Demuxer(info.location) as dmx:
        return dmx.extradata


def _address(data: bytes) -> int:
    """Address of a bytes object's buffer (no copy); valid while ``data`` lives."""
    return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0


class _NvFrame:
    __slots__ = ("pts", "_frame", "_session")

    def __init__(self, frame: Any, session: "NvdecSession") -> None:
        ts = frame.timestamp
        self.pts = ts if ts >= 0 else None
        self._frame = frame
        self._session = session

    def copy_into(self, dst: "torch.Tensor | DeviceRow") -> int:
        """Copy the frame into ``dst`` (a tensor, or a decoder process's row of the parent's ring)
        on the session's stream (the decoder's: the frame's own copy out of the NVDEC surface is
        ordered before it). Workers make a PyTorch stream current once per segment
        (:func:`vidpipe.decode.workers.on_stream`)."""
        sess = self._session
        if driver_copy(self._frame, dst, sess.stream.cuda_stream, sess.key[0]):
            return 0
        import torch

        from vidpipe.decode.ipc_memory import as_torch

        dst = as_torch(dst)
        src = torch.from_dlpack(self._frame)  # waits on the decoder's copy event, no data copy
        if src.shape != dst.shape or src.dtype != dst.dtype:
            raise DecodeError(
                f"{self._session.info.source}: NVDEC frame {tuple(src.shape)} {src.dtype} does not "
                f"match {tuple(dst.shape)} {dst.dtype} (frame size changed mid-stream?); "
                "decode this file with decoder='pyav'"
            )
        with torch.cuda.stream(sess.torch_stream()):
            dst.copy_(src)
        return 0


#: ``NvdecSession(latency=...)``: when NVDEC hands a decoded frame out. ``"native"``: the
#: decoder's own pipeline, display order (on an H100 with a 1080p30 stream without B-frames: two
#: packets after the frame's own, 67 ms at 30 fps); ``"low"``: display order, one packet after;
#: ``"zero"``: in decode order (right only for streams that do not reorder frames: no B-frames),
#: without timestamps (NVDEC hands back 0), each packet flagged as ending its picture so the frame
#: leaves with its own packet (measured on an H200: p50 capture-to-result 62 -> 21 ms at 16 streams)
Latency = Literal["native", "low", "zero"]
#: ``NvdecSession.acquire(streams=...)``: the session's ``stream`` object. ``"torch"``: a PyTorch
#: stream (the decode in this process, whose batches PyTorch reads); ``"driver"``: a
#: :class:`~vidpipe.decode.cuda_driver.DriverStream` (a decoder process, which never imports PyTorch)
Streams = Literal["torch", "driver"]


def _latency(nvc: Any, latency: str) -> dict[str, Any]:
    """``CreateDecoder``'s ``latency`` argument (nothing for ``"native"``, or where this
    PyNvVideoCodec does not have the mode)."""
    kind = getattr(nvc, "DisplayDecodeLatencyType", None)
    member = {"low": "LOW", "zero": "ZERO"}.get(latency)
    if member is None or kind is None or not hasattr(kind, member):
        return {}
    return {"latency": getattr(kind, member)}


def _end_of_picture(nvc: Any) -> Any:
    """The packet flag that says a packet ends its picture (``CUVID_PKT_ENDOFPICTURE``): the
    parser then hands the picture to the decoder at once instead of when the next one starts,
    one packet (33 ms at 30 fps) sooner. For ``"zero"`` latency, whose packets are whole access
    units (live demuxers); ``None`` where this PyNvVideoCodec does not have it."""
    flag = getattr(getattr(nvc, "VideoPacketFlag", None), "ENDOFPICTURE", None)
    if flag is None:
        return None
    try:
        nvc.PacketData().decode_flag = flag
    except Exception:  # noqa: BLE001 - the attribute takes an int in some versions
        try:
            flag = int(flag)
            nvc.PacketData().decode_flag = flag
        except Exception:  # noqa: BLE001 - not settable here
            return None
    return flag


def session_key(info: StreamInfo, device: "torch.device | int", latency: Latency = "native") -> tuple:
    """What makes two streams able to share an initialized NVDEC session."""
    return (_gpu(device), canonical_codec(info.codec), info.bit_depth, info.profile, info.width, info.height,
            latency)  # fmt: skip


class NvdecSession:
    """One PyNvVideoCodec decoder on its own PyTorch CUDA stream (used by one thread at a time).

    Frames it returns are views of the decoder's frame buffer, valid until the next
    :meth:`feed`/:meth:`finish`. :meth:`close` returns a healthy session to the process-wide
    pool (:mod:`vidpipe.decode.nvdec_pool`); one that raised is destroyed.

    ``stream``: a CUDA stream made by :func:`vidpipe.decode.cuda_driver.new_stream` in GPU
    ``device``'s primary context (then ``device`` is that GPU's ordinal and PyTorch need not be
    imported yet): the session has no ``stream`` object until :meth:`adopt_stream` (a PyTorch
    stream, or in a decoder process a :class:`~vidpipe.decode.cuda_driver.DriverStream`).
    ``None``: a new PyTorch stream on ``device``.
    """

    kind = "nvdec"
    layout = "yuv"

    def __init__(self, info: StreamInfo, device: "torch.device | int", *, pooled: bool = True,
                 latency: Latency = "native", stream: int | None = None) -> None:  # fmt: skip
        nvc = nvdec_module()
        codec = canonical_codec(info.codec)
        member = NVDEC_CODECS.get(codec)
        if member is None:
            raise UnsupportedError(f"{info.source}: NVDEC does not decode {codec}")
        self.info = info
        self.key = session_key(info, device, latency)
        self.latency = latency
        self.pooled = pooled
        self.broken = False
        self._nvc = nvc
        self.stream: "torch.cuda.Stream | DriverStream | None" = None
        if stream is None:
            import torch

            self.stream = torch.cuda.Stream(device)
            stream = self.stream.cuda_stream
        self._handle = stream
        self._decoder = nvc.CreateDecoder(
            gpuid=self.key[0],
            codec=getattr(nvc.cudaVideoCodec, member),
            cudacontext=0,
            cudastream=stream,
            usedevicememory=True,
            outputColorType=nvc.OutputColorType.NATIVE,
            **_latency(nvc, latency),
        )
        self._packet = nvc.PacketData()
        self._end_of_picture = _end_of_picture(nvc) if latency == "zero" else None
        self._drained = True  # nothing pending: may go back to the pool
        self._prepend = False
        self._extradata = _extradata(info)

    @classmethod
    def acquire(cls, info: StreamInfo, device: "torch.device | int", *, latency: Latency = "native",
                streams: Streams = "torch") -> "NvdecSession":  # fmt: skip
        """A pooled, already initialized session for this kind of stream, or a new one
        (``latency``: see :data:`Latency`; ``streams``: see :data:`Streams`; ``"driver"`` needs
        ``device``'s primary context current in the calling thread)."""
        from vidpipe.decode.nvdec_pool import POOL

        if streams == "driver":
            make = lambda: cls(info, device, latency=latency, stream=new_stream())  # noqa: E731
        else:
            make = lambda: cls(info, device, latency=latency)  # noqa: E731
        sess = POOL.acquire(session_key(info, device, latency), make)
        sess.adopt_stream(streams)  # one started elsewhere may have the other kind, or none yet
        if sess.info.location != info.location:  # a reused session: now decoding another file
            sess.info = info
            sess._extradata = _extradata(info)
        return sess

    def adopt_stream(self, streams: Streams = "torch") -> None:
        """Give the session a ``stream`` object of the kind ``streams`` for its CUDA stream: a
        ``torch.cuda.ExternalStream`` or a :class:`~vidpipe.decode.cuda_driver.DriverStream` of
        the same handle (a session started before PyTorch has none). A no-op when it has one."""
        if streams == "driver":
            if not isinstance(self.stream, DriverStream):
                self.stream = DriverStream(self._handle)
        elif self.stream is None or isinstance(self.stream, DriverStream):
            import torch

            self.stream = torch.cuda.ExternalStream(self._handle, device=torch.device("cuda", self.key[0]))

    def torch_stream(self) -> "torch.cuda.Stream":
        """The session's stream as a PyTorch stream (for copies PyTorch makes)."""
        if isinstance(self.stream, DriverStream) or self.stream is None:
            import torch

            return torch.cuda.ExternalStream(self._handle, device=torch.device("cuda", self.key[0]))
        return self.stream

    def start(self, segment: "Segment") -> None:
        self._prepend = self._extradata is not None

    def _decode(self, pd: Any) -> list[_NvFrame]:
        try:
            frames = self._decoder.Decode(pd)  # releases the GIL
        except BaseException:
            self.broken = True
            raise
        return [_NvFrame(f, self) for f in frames]

    def feed(self, packet: "Packet") -> list[_NvFrame]:
        data = packet.data
        if self._prepend:
            data = self._extradata + data  # type: ignore[operator]
            self._prepend = False
        pd = self._packet
        pd.bsl_data = _address(data)
        pd.bsl = len(data)
        pd.pts = packet.pts if packet.pts is not None else -1
        if self._end_of_picture is not None:
            pd.decode_flag = self._end_of_picture
        self._drained = False
        return self._decode(pd)  # ``data`` stays alive until Decode returns

    def finish(self) -> list[_NvFrame]:
        """Drain the decoder (end of stream); it then takes a new keyframe-started segment."""
        frames = self._decode(self._nvc.PacketData())
        self._drained = True
        return frames

    def close(self) -> None:
        """Back to the pool when drained and healthy, else destroyed."""
        if self._decoder is None:
            return
        if self.pooled and not self.broken and self._drained:
            from vidpipe.decode.nvdec_pool import POOL

            POOL.release(self.key, self, NvdecSession.destroy)
        else:
            self.destroy()

    def destroy(self) -> None:
        """Free the decoder now."""
        self._decoder = None


def primed_sessions(info: StreamInfo, count: int, make: "Callable[[], NvdecSession]") -> "Iterator[NvdecSession]":
    """``count`` new sessions from ``make()``, each fed ``info``'s first keyframe and drained
    (the driver creates a session's hardware decoder at the first sequence header: this is the
    start that costs about 50 ms), yielded as each is ready, not pooled yet; none for a file
    without a keyframe. Stop iterating to start no more."""
    from vidpipe.decode.demux import ANNEXB_FILTERS, Demuxer

    if count < 1:
        return
    with Demuxer(info.location, annexb=canonical_codec(info.codec) in ANNEXB_FILTERS) as dmx:
        first = next((p for p in dmx.packets() if p.is_key), None)
    for _ in range(count if first is not None else 0):
        sess = make()
        sess.start(None)  # type: ignore[arg-type]
        sess.feed(first)  # type: ignore[arg-type]
        sess.finish()
        yield sess


def warm_sessions(
    source: "StreamInfo | str | os.PathLike",
    device: "torch.device | str" = "cuda",
    count: int | None = None,
    *,
    processes: int = 0,
) -> int:
    """Initialize ``count`` NVDEC sessions for ``source``'s kind of stream (default: the decoder's
    default number) and leave them in the pool, so the next :class:`NvdecDecoder` of such a
    stream starts without the driver's serialized session creation (about 50 ms each). With
    ``processes``, also start that many decoder processes (:mod:`vidpipe.decode.procpool`, a few
    seconds) and warm ``count`` sessions spread over them. Returns the number of idle sessions
    now pooled for it in this process."""
    from vidpipe.decode.nvdec_pool import POOL
    from vidpipe.decode.probe import probe
    from vidpipe.device import resolve_device

    info = source if isinstance(source, StreamInfo) else probe(source)
    dev = resolve_device(device)
    why = check(info, dev)
    if why is not None:
        raise UnsupportedError(f"NVDEC cannot decode {info.source}: {why}")
    n = count if count is not None else default_workers(dev, info.codec)
    key = session_key(info, dev)
    for sess in primed_sessions(info, max(0, n - POOL.idle(key)), lambda: NvdecSession(info, dev)):
        sess.close()
    if processes:
        from vidpipe.decode.procpool import get_pool

        pool = get_pool(dev, processes, start=True)
        lease = pool.lease() if pool is not None else None
        if lease is not None:
            with lease:
                lease.warm(info, sessions_per_process(n, lease.size))
    return POOL.idle(key)


def _session_factories(
    info: StreamInfo, device: "torch.device | int", *, streams: Streams
) -> "tuple[bool, Callable[[int], NvdecSession], Callable[[int], PyAVSession]]":
    """Whether ``info``'s packets go to NVDEC as Annex-B, and the factories ``(worker) -> session``
    of a pass's NVDEC sessions (``streams``: see :data:`Streams`) and of its PyAV fallback
    sessions (NV12 rows uploaded on a PyTorch stream of their own: the fallback imports PyTorch)."""
    from vidpipe.decode.demux import ANNEXB_FILTERS

    annexb = canonical_codec(info.codec) in ANNEXB_FILTERS
    extradata = None
    if not annexb:
        from vidpipe.decode.demux import Demuxer

        with Demuxer(info.location) as dmx:
            extradata = dmx.extradata

    def session(worker: int) -> NvdecSession:
        return NvdecSession.acquire(info, device, streams=streams)

    def cpu_session(worker: int) -> PyAVSession:
        import torch

        return PyAVSession(
            info, layout="yuv", annexb=annexb, extradata=extradata, threads=2, stream=torch.cuda.Stream(device)
        )

    return annexb, session, cpu_session


def process_pass(info: StreamInfo, gpu: int, *, options: DecodeOptions, workers: int, stream_id: int,
                 fallback: bool) -> "SegmentState":  # fmt: skip
    """What a decoder process decodes one NVDEC pass with, without PyTorch: the pass's state, its
    sessions on :class:`~vidpipe.decode.cuda_driver.DriverStream` streams of GPU ``gpu``'s primary
    context (current in each decoding thread), and, with ``fallback``, PyAV for a segment NVDEC
    fails on."""
    from vidpipe.decode.segment_state import SegmentState

    annexb, session, cpu_session = _session_factories(info, gpu, streams="driver")
    return SegmentState(info, options=options, session_factory=session,
                        fallback_factory=cpu_session if fallback else None, annexb=annexb, workers=workers,
                        stream_id=stream_id)  # fmt: skip


class NvdecDecoder(SegmentParallelDecoder):
    """Decode one file with NVDEC into NV12/P016 batches on the GPU (see the module docstring).

    Args:
        source: a :class:`StreamInfo` or a path (probed here).
        device: a CUDA device (``"cuda"``, ``"cuda:1"``, ``torch.device``).
        options: frame selection (stride, time range, count).
        workers: concurrent NVDEC sessions (``None``: three per NVDEC engine, shared among the
            NVDEC decoders running at the same time in this process, or the
            ``options.files_at_once`` of the run if more, and for a file whose
            sessions must first be started, only as many new ones as its length pays for:
            :func:`~vidpipe.decode.nvdec_pool.sessions_worth_starting`; 1: one session).
        segment_frames: frames per segment (``None``: sized from ``buffer_bytes``).
        buffer_bytes: GPU memory for frames decoded ahead of the consumer (``None``:
            ``options.gpu_buffer_bytes`` as a hard bound, else :func:`default_buffer_bytes`,
            4 GiB on a large GPU, about 1,380 1080p frames; never more than the file's frames).
        fallback: retry a failing segment on PyAV (CPU) instead of leaving its frames out.
        stream_id: written into every :class:`~vidpipe.types.FrameMeta` (default:
            ``options.stream_id``).
        index: a :class:`~vidpipe.decode.segments.StreamIndex` to reuse.
        processes: spread the sessions over this many decoder processes
            (:mod:`vidpipe.decode.procpool`: each has its own GIL, frames reach this process
            through CUDA IPC with no copy); started on first use and kept. ``0``: threads in this
            process. ``None`` (default): use the decoder processes when they are running
            (:func:`warm_sessions` with ``processes``, or an earlier long file) or being started
            for this run (``vidpipe detect`` and ``vidpipe.detect`` start them at their start
            for shorter files:
            :data:`~vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES`; still starting, the decode
            begins with threads here and they join it once ready:
            :mod:`vidpipe.decode.proclate`), start them for
            :data:`AUTO_START_FRAMES` frames or more (this file's frames times
            ``options.files_at_once``: files decoding at once share the processes, each taking
            its share of them), else threads.
            Short plans (one segment) and streams without exact timestamps always use threads.
            ``None`` also takes ``options.decoder_processes``.

    Raises:
        BackendUnavailableError: no CUDA / PyNvVideoCodec / NVDEC here.
        UnsupportedError: NVDEC (or vidpipe's NVDEC path) cannot decode this stream; the
            message says why (:func:`check` gives the same reason without raising).
    """

    name = "nvdec"
    process_kind = "nvdec"

    def __init__(
        self,
        source: StreamInfo | str | os.PathLike,
        *,
        device: "torch.device | str" = "cuda",
        options: DecodeOptions | None = None,
        workers: int | None = None,
        segment_frames: int | None = None,
        buffer_bytes: int | None = None,
        fallback: bool = True,
        stream_id: int | None = None,
        index: "StreamIndex | None" = None,
        processes: int | None = None,
    ) -> None:
        from vidpipe.decode.probe import probe
        from vidpipe.device import resolve_device

        info = source if isinstance(source, StreamInfo) else probe(source)
        dev = resolve_device(device)
        why = nvdec_unavailable(dev)
        if why is not None:
            raise BackendUnavailableError(f"NVDEC cannot decode {info.source}: {why}")
        why = check(info, dev)
        if why is not None:
            raise UnsupportedError(f"NVDEC cannot decode {info.source}: {why}")
        codec = canonical_codec(info.codec)
        annexb, session, cpu_session = _session_factories(info, dev, streams="torch")
        bound = options.gpu_buffer_bytes if options is not None else None  # max_gpu_memory's share
        self.auto_workers = workers is None
        if processes is None and options is not None:
            processes = options.decoder_processes
        self.processes = None if processes is None else check_range("processes", processes, low=0, high=MAX_DECODER_PROCESSES, integer=True)
        super().__init__(
            info,
            device=dev,
            options=options,
            session_factory=session,
            fallback_factory=cpu_session if fallback else None,
            layout="yuv",
            annexb=annexb,
            workers=workers if workers is not None else default_workers(dev, codec),
            segment_frames=segment_frames,
            buffer_bytes=buffer_bytes if buffer_bytes is not None else (bound or default_buffer_bytes(dev)),
            stream_id=stream_id,
            index=index,
            bounded=buffer_bytes is None and bound is not None,
        )

    def batches(self, batch_size: int) -> "Iterator[FrameBatch]":
        """NV12/P016 batches on the GPU; see :meth:`SegmentParallelDecoder.batches` and the stream
        contract in the module docstring."""
        global _active
        with _active_lock:
            _active += 1
            # the run's other files count before they start: a file that starts first would
            # otherwise take every engine's sessions (and its decoder process make the most)
            share = max(_active, self.options.files_at_once)
        try:
            if self.auto_workers:  # decoders running at once share the engines
                self.workers = max(1, default_workers(self.device, self.info.codec) // share)
            yield from super().batches(batch_size)
        finally:
            with _active_lock:
                _active -= 1

    def _sessions(self, plan: "DecodePlan") -> int:
        """One per segment up to ``workers``; with automatic workers, pooled sessions first and new
        ones only as far as the plan's length pays for their start."""
        most = super()._sessions(plan)
        if not self.auto_workers or not plan.total:
            return most
        from vidpipe.decode.nvdec_pool import POOL, sessions_worth_starting

        return sessions_worth_starting(plan.total, idle=POOL.idle(session_key(self.info, self.device)), most=most)

    def _process_pool(self, plan: "DecodePlan") -> Any:
        """A lease of the decoder processes for this plan (its share of them when several files
        decode at once: ``options.files_at_once``), or ``None`` for threads; see ``processes``."""
        from vidpipe.decode.procpool import START_TIMEOUT, get_pool, is_starting

        n = self.processes
        if n == 0 or self.workers < 2:
            return None
        if n is None:
            if is_starting(self.device):
                # processes starting in the background were started for this run (vidpipe
                # detect's vidpipe.decode.prestart, from its own, lower length): the run starts
                # with threads here and they join it once ready (vidpipe.decode.proclate)
                from vidpipe.decode.proclate import LateLease

                return LateLease(self.device, among=self.options.files_at_once, info=self.info,
                                 sessions=self.workers, here=self._sessions(plan))  # fmt: skip
            # files decoding at once share the processes: their frames together (this one's as
            # the estimate of each) against the decoder-process crossover
            long = (plan.total or 0) * self.options.files_at_once >= AUTO_START_FRAMES
            pool = get_pool(self.device, None, start=False, wait_s=START_TIMEOUT if long else 0.0)
            if pool is None and long and not is_starting(self.device):
                try:
                    pool = get_pool(self.device, DEFAULT_PROCESSES, start=True)
                except Exception as exc:  # noqa: BLE001 - decode with threads instead
                    logger.warning("decoder processes could not start (%s); decoding with threads", exc)
                    return None
        else:
            pool = get_pool(self.device, n, start=True)
        lease = pool.lease(among=self.options.files_at_once) if pool is not None else None
        if lease is None:
            return None
        try:
            lease.warm(self.info, sessions_per_process(self.workers, lease.size))
        except BaseException:
            lease.release()
            raise
        return lease

    def _process_settings(self) -> dict:
        return {"device": str(self.device), "fallback": self.fallback_factory is not None}
