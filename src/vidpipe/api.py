"""The one-call Python API: :func:`detect`."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError, SourceError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from vidpipe.models.base import Model
    from vidpipe.models.detector import Detector
    from vidpipe.pipeline import DetectionRun
    from vidpipe.stages.base import Stage
    from vidpipe.track.config import TrackConfig


def build_detector(
    model: "str | os.PathLike | Model | Detector" = "yolov3-tiny",
    *,
    device: str = "auto",
    dtype: str = "auto",
    conf: float = 0.25,
    iou: float = 0.45,
    classes: "str | Sequence[str | int] | None" = None,
    max_det: int = 300,
    agnostic: bool = False,
    imgsz: "int | tuple[int, int] | None" = None,
    names: "Sequence[str] | str | os.PathLike | None" = None,
    head: str | None = None,
) -> "Detector":
    """Load ``model`` (a bundled name, a file, or a loaded Model) and wrap it with NMS settings."""
    from vidpipe.models.base import Model
    from vidpipe.models.detector import Detector, DetectorConfig, resolve_classes
    from vidpipe.models.zoo import load_model

    if isinstance(model, Detector):
        return model
    if isinstance(imgsz, int):
        imgsz = (imgsz, imgsz)
    if not isinstance(model, Model):
        model = load_model(os.fspath(model), device=device, dtype=dtype, input_size=imgsz, names=names, head=head)
    class_ids = None if classes is None else resolve_classes(classes, model.info.names)
    config = DetectorConfig(conf=conf, iou=iou, classes=class_ids, max_det=max_det, agnostic=agnostic)
    return Detector(model, config=config)


def detect(
    source: "str | os.PathLike | Sequence[str | os.PathLike]",
    *,
    model: "str | os.PathLike | Model | Detector" = "yolov3-tiny",
    device: str = "auto",
    decoder: str = "auto",
    batch_size: int = 32,
    frame_skip: int = 1,
    max_frames: int | None = None,
    start: float | None = None,
    end: float | None = None,
    conf: float = 0.25,
    iou: float = 0.45,
    classes: "str | Sequence[str | int] | None" = None,
    max_det: int = 300,
    agnostic: bool = False,
    imgsz: "int | tuple[int, int] | None" = None,
    dtype: str = "auto",
    names: "Sequence[str] | str | os.PathLike | None" = None,
    head: str | None = None,
    strict_gpu: bool = False,
    results_on_host: bool = False,
    stages: "Sequence[Stage]" = (),
    keep_frames: bool = False,
    track: "bool | Mapping[str, Any] | TrackConfig | None" = None,
    max_gpu_memory: "int | float | str | None" = None,
    **pipeline_options: Any,
) -> "DetectionRun":
    """Detect objects in videos, image folders or image files.

    Args:
        source: a path, URL, folder, glob, or a list of them (a list may also hold
            :class:`~vidpipe.sources.spec.SourceSpec` or :class:`~vidpipe.sources.base.Source` objects).
        model: ``"yolov3-tiny"`` (bundled, offline), a model file (Darknet ``.cfg``/``.weights``,
            ONNX ``.onnx``, TorchScript ``.pt``/``.torchscript``, torch.export ``.pt2``, ...), or a
            loaded model.
        device: ``"auto" | "cpu" | "cuda" | "cuda:N"``; everything runs there.
        decoder: ``"auto" | "nvdec" | "pyav" | "dali"`` for videos, or the name of a backend added
            with :func:`vidpipe.decode.registry.register_backend`.
        batch_size: frames per model call.
        frame_skip: keep every N-th frame; ``max_frames``, ``start``, ``end`` (seconds) limit the
            frames per video.
        conf, iou, classes, max_det: detection thresholds, class filter (names or ids), cap.
        agnostic: class-agnostic NMS (boxes of different classes suppress each other).
        imgsz: model input size (default: the model's).
        dtype: ``"auto"`` (FP16 on CUDA, FP32 on the CPU), ``"fp16"`` or ``"fp32"``.
        names: class names (list or names file) for models that carry none; ``head``: force the
            output head (``"yolov5"``, ``"yolov8"``, ``"detr"``, ``"rfdetr"``, ``"torchvision"``).
        strict_gpu: raise instead of falling back to a CPU stage on a GPU device.
        results_on_host: move detections to the CPU before yielding (default: keep them on the
            device until you ask).
        stages: steps run on each stream's results, in order, before they are yielded
            (:class:`~vidpipe.stages.Stage`: tracking, lines and zones, ...).
        keep_frames: each result carries its decoded frame in ``FrameResult.image`` (``(3, H, W)``
            uint8 RGB on ``device``, the source's size; from the same decode, no second one);
            automatic when a stage needs frames. Costs memory: see
            :class:`~vidpipe.pipeline_config.PipelineConfig` (1080p: 6.2 MB a frame).
        track: ``True`` (or a dict of :class:`~vidpipe.track.TrackConfig` options, or a
            ``TrackConfig``) runs a ByteTrack tracker per stream before ``stages``: each
            frame's ``detections.track_ids`` holds its detections' track ids (``-1``: not in a
            confirmed track yet).
        max_gpu_memory: one bound on the run's GPU memory -- decode buffers and rings, queued
            inputs, kept frames, the model and its CUDA graph together: bytes (``4 << 30``,
            ``"4GiB"``, ``"512MiB"``) or a fraction of the card (``0.5``). The batch is lowered if
            it must; too small for batch 1 raises :class:`~vidpipe.errors.GpuMemoryError` naming
            the minimum. ``run.summary().stats["gpu_memory"]`` says what each part got. Ignored on
            the CPU. See :mod:`vidpipe.gpu_memory`.

    Returns:
        A :class:`~vidpipe.pipeline.DetectionRun`: iterate it for one
        :class:`~vidpipe.types.FrameResult` per frame (in order per source); ``run.summary()``
        afterwards gives frames, detections, fps and the backends used.

    Example::

        for frame in vidpipe.detect("street.mp4", classes="person,bicycle"):
            print(frame.index, frame.pts, frame.labels())
    """
    called = time.monotonic()
    from vidpipe.pipeline import DetectionRun, PipelineConfig
    from vidpipe.sources.spec import classify_inputs

    if isinstance(source, (str, os.PathLike)):
        sources: list[Any] = [os.fspath(source)]
    elif isinstance(source, Sequence) and source:
        # a SourceSpec or Source object (e.g. a resumed input) is taken as it is
        sources = [os.fspath(s) if isinstance(s, (str, os.PathLike)) else s for s in source]
    else:
        raise ConfigError(f"invalid source={source!r}; expected a path, URL, folder, glob or a list of them")
    if track is not None and track is not False:
        from vidpipe.track.config import track_config
        from vidpipe.track.stage import TrackerStage

        stages = [TrackerStage(track_config(track)), *stages]
    config = PipelineConfig(
        decoder=decoder,
        batch_size=batch_size,
        frame_skip=frame_skip,
        max_frames=max_frames,
        start=start,
        end=end,
        strict_gpu=strict_gpu,
        results_on_host=results_on_host,
        keep_frames=keep_frames,
        max_gpu_memory=max_gpu_memory,
        **pipeline_options,
    )
    specs, failed = [], []
    for src in sources:  # one bad input must not stop the others; report it in the summary
        if not isinstance(src, str):
            specs.append(src)
            continue
        try:
            specs.extend(classify_inputs([src]))
        except SourceError as exc:
            if len(sources) == 1:
                raise
            logger.error("%s", exc, exc_info=logger.isEnabledFor(logging.DEBUG), extra={"vidpipe_source_error": True})
            failed.append((src, str(exc)))
    if not specs:
        raise SourceError("none of the inputs can be read: " + "; ".join(reason for _, reason in failed))
    from vidpipe.prewarm import start_prewarm  # host-side start-up work beside the model's load

    on = str(getattr(model, "device", device))  # a loaded model's device, else the option
    start_prewarm(specs, device=on, decoder=decoder, options=config.decode_options())
    detector = build_detector(
        model,
        device=device,
        dtype=dtype,
        conf=conf,
        iou=iou,
        classes=classes,
        max_det=max_det,
        agnostic=agnostic,
        imgsz=imgsz,
        names=names,
        head=head,
    )
    return DetectionRun(specs, detector, config, failed=failed, stages=stages, called_mono=called)
