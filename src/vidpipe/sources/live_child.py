"""The decoder-process side of live streams run in decoder processes (:mod:`vidpipe.sources.live_hub`).

A child (``python -m vidpipe.decode.procworker``) that is sent ``("live-init", config, geometry)``
runs live streams for the parent: for each ``("live-add", stream_id, spec, ring_id)`` a thread
runs the ordinary :class:`~vidpipe.sources.live.LiveSource` (reader, decoder, watchdog,
reconnect, capture stamps, preprocessing: the same code as in-process) and writes each
preprocessed frame into one of the stream's ring slots (``(3, H, W)`` model-input buffers the
parent allocated and shared: CUDA IPC, or shared memory on the CPU), then tells the parent:

- ``("live-size", stream_id, (H, W), state)``: the run keeps frames and this stream's are H x W:
  the parent makes a ring of kept frames (``(3, H, W)`` uint8, the same slot numbers as the
  model inputs') and answers ``("live-images", stream_id, ring_id)``; frames that come before
  it (or before a ring of a new size) are dropped and counted.
- ``("live-frame", stream_id, slot, (h, w), FrameMeta, scale, pad, image, state)``: the slot holds a
  ``(3, h, w)`` letterboxed frame (top-left corner of the slot) and, when ``image``, the slot of
  the kept frames' ring the decoded frame; ``scale``/``pad`` as in
  :class:`~vidpipe.types.ModelInput`, as ``(x, y)`` floats;
- ``("live-state", stream_id, state)``: the stream's counters changed without a frame
  (connecting, reconnecting, stalled);
- ``("live-end", stream_id, error, state)``: the stream ended (``error``: ``None``, or the
  exception, pickled where it can be, else ``(type name, message)``).

``state`` is a dict of the live fields of :class:`~vidpipe.pipeline_config.SourceState`. A slot
is the parent's until it answers ``("live-free", stream_id, [slots])``; a frame that finds no free
slot is dropped here and counted in ``drops`` (latest wins, as the parent's queue does).
``("live-remove", stream_id)`` stops one stream.
"""

from __future__ import annotations

import collections
import logging
import pickle
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import torch

    from vidpipe.models.base import ModelInfo
    from vidpipe.pipeline_config import PipelineConfig, SourceState

__all__ = ["DetectorGeometry", "LiveChild", "state_fields"]

logger = logging.getLogger(__name__)

#: the live fields of SourceState a child reports to the parent
STATE_FIELDS = ("live_state", "frames_in", "drops", "reconnects", "stalls", "decode_errors", "last_frame_at",
                "decoder", "decoder_reason")
#: seconds between state reports of a stream that delivers no frame
STATE_PERIOD_S = 0.5


def state_fields(state: "SourceState") -> dict[str, Any]:
    """The live fields of ``state`` (and its ``extra`` notes, e.g. ``last_error``) as a dict."""
    out = {f: getattr(state, f) for f in STATE_FIELDS}
    out["extra"] = dict(state.extra)
    return out


@dataclass(frozen=True)
class ModelView:
    """The model's :class:`~vidpipe.models.base.ModelInfo` without its weights."""

    info: "ModelInfo"


@dataclass(frozen=True)
class DetectorGeometry:
    """What the live source reads from a detector (``device``, ``dtype``, ``input_size``,
    ``model.info``): a decoder process preprocesses frames exactly as the parent would, without
    the model's weights."""

    device: "torch.device"
    dtype: "torch.dtype"
    input_size: tuple[int, int]
    model: ModelView

    @classmethod
    def of(cls, detector: Any) -> "DetectorGeometry":
        return cls(detector.device, detector.dtype, tuple(detector.input_size), ModelView(detector.model.info))


def _picklable(exc: BaseException) -> Any:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - sent as text instead
        return (type(exc).__name__, str(exc))


class _Stream:
    def __init__(self, stream_id: int, slots: list[Any]) -> None:
        self.stream_id = stream_id
        self.slots = slots
        self.images: list[Any] | None = None  # kept frames' ring (same slot numbers), once the parent made it
        self.asked: tuple[int, int] | None = None  # the frame size an image ring was asked for
        self.free = collections.deque(range(len(slots)))
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None


class LiveChild:
    """Runs the parent's live streams in this process (see the module docstring)."""

    def __init__(self, send: Callable[[tuple], None], rings: dict[int, list[Any]]) -> None:
        self._send = send
        self._rings = rings
        self._streams: dict[int, _Stream] = {}
        self._config: "PipelineConfig | None" = None
        self._geometry: DetectorGeometry | None = None
        self._submit = threading.Lock()  # SourceContext.gpu_submit, among this child's streams

    def handle(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "live-init":
            self._config, self._geometry = msg[1], msg[2]
        elif kind == "live-add":
            self._add(msg[1], msg[2], msg[3])
        elif kind == "live-free":
            st = self._streams.get(msg[1])
            if st is not None:
                with st.lock:
                    st.free.extend(msg[2])
        elif kind == "live-images":  # the kept frames' ring of a stream, at the size it asked for
            st = self._streams.get(msg[1])
            if st is not None:
                st.images = self._rings[msg[2]]
        elif kind == "live-remove":
            st = self._streams.pop(msg[1], None)
            if st is not None:
                st.stop.set()

    def close(self) -> None:
        for st in list(self._streams.values()):
            st.stop.set()
        for st in list(self._streams.values()):
            if st.thread is not None:
                st.thread.join(timeout=5)

    def _add(self, stream_id: int, spec: Any, ring_id: int) -> None:
        st = _Stream(stream_id, self._rings[ring_id])
        self._streams[stream_id] = st
        st.thread = threading.Thread(target=self._run, args=(st, spec), name=f"vidpipe-live{stream_id}", daemon=True)
        st.thread.start()

    def _run(self, st: _Stream, spec: Any) -> None:
        from vidpipe.pipeline_config import SourceState
        from vidpipe.sources.base import SourceContext
        from vidpipe.sources.live import LiveSource
        from vidpipe.stats import PipelineStats

        config, geometry = self._config, self._geometry
        assert config is not None and geometry is not None, "live-init comes first"
        state = SourceState(spec=spec, stream_id=st.stream_id, status="running")
        ctx = SourceContext(detector=geometry, config=config, stop=st.stop,  # type: ignore[arg-type]
                            stats=PipelineStats(geometry.device), gpu_submit=self._submit)  # fmt: skip
        reporter = threading.Thread(target=self._report_state, args=(st, state), daemon=True)
        reporter.start()
        error: Any = None
        try:
            for inp, ready in LiveSource(spec, config.live).produce(state, ctx):
                self._deliver(st, state, inp, ready)
        except BaseException as exc:  # noqa: BLE001 - the parent's worker records it
            error = _picklable(exc)
        finally:
            st.stop.set()
            reporter.join(timeout=2)
        self._send(("live-end", st.stream_id, error, state_fields(state)))

    def _deliver(self, st: _Stream, state: "SourceState", inp: Any, ready: Any) -> None:
        image = None if inp.images is None else inp.images[0]  # kept frames: (3, H, W) uint8
        if image is not None:
            size = (int(image.shape[-2]), int(image.shape[-1]))
            ring = st.images
            if ring is None or tuple(ring[0].shape[-2:]) != size:
                if st.asked != size:  # ask the parent for a ring of kept frames at this size
                    st.asked, st.images = size, None
                    self._send(("live-size", st.stream_id, size, state_fields(state)))
                state.drops += 1  # until it is there (the stream's first frames, or a new size)
                return
        with st.lock:
            slot = st.free.popleft() if st.free else None
        if slot is None:  # the parent still holds every slot: latest wins
            state.drops += 1
            return
        x = inp.tensor[0]
        h, w = int(x.shape[-2]), int(x.shape[-1])
        if ready is not None:
            ready.synchronize()
        dst = st.slots[slot][:, :h, :w]
        dst.copy_(x)
        if image is not None:
            st.images[slot].copy_(image)
        if dst.device.type == "cuda":
            import torch

            torch.cuda.current_stream(dst.device).synchronize()
        scale = tuple(float(v) for v in inp.scale[0].tolist())
        pad = tuple(float(v) for v in inp.pad[0].tolist())
        self._send(("live-frame", st.stream_id, slot, (h, w), inp.frames[0], scale, pad, image is not None,
                    state_fields(state)))

    def _report_state(self, st: _Stream, state: "SourceState") -> None:
        last = None
        while not st.stop.wait(STATE_PERIOD_S):
            now = state_fields(state)
            if now != last:
                last = now
                self._send(("live-state", st.stream_id, now))
