"""A running ``vidpipe serve``: cameras through one detector into their tables, with cameras
added and removed while it runs, a status, metrics, and a clean stop.

::

    with vidpipe.serve("serve.yaml") as server:          # started; stops (tables final) on exit
        server.add_camera("door", "rtsp://cam9/stream", classes=["person"])
        server.status()["streams"]                       # per stream state, fps, latency, drops
        server.remove_camera("door")

One background thread iterates the :class:`~vidpipe.pipeline.DetectionRun` (``keep_alive``: it
goes on when every camera is gone, until :meth:`Server.stop`), observes each batch for the
metrics and writes it to the cameras' tables (:mod:`vidpipe.serve.outputs`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError, VidpipeError
from vidpipe.serve.config import CameraConfig, OutputConfig, ServeConfig

if TYPE_CHECKING:
    from vidpipe.metrics import MetricsServer
    from vidpipe.models.detector import Detector
    from vidpipe.pipeline import DetectionRun
    from vidpipe.preview import PreviewHub
    from vidpipe.serve.outputs import CameraOutputs
    from vidpipe.sources.spec import SourceSpec
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["Server", "serve", "build_detector_for", "camera_spec"]

_TERMINAL = ("ok", "partial", "failed", "skipped", "removed")


def camera_spec(cam: CameraConfig) -> "SourceSpec":
    """The one source of ``cam`` (a stream URL, a webcam or a video file).

    Raises:
        ConfigError: the url is a folder, a glob or an image (a camera is one stream).
    """
    from vidpipe.sources.spec import classify_one

    specs = classify_one(cam.url)
    if len(specs) != 1 or specs[0].kind == "images":
        what = "an image" if len(specs) == 1 else f"{len(specs)} inputs (a folder or a pattern)"
        raise ConfigError(
            f"camera {cam.name!r}: {cam.source_name} is {what}; a camera is one stream URL, webcam or video file"
        )
    return specs[0]


def _is_live(cam: CameraConfig, pconfig: Any) -> bool:
    """Whether ``cam`` is read live (a stream, a webcam, a file with ``live.realtime``)."""
    from vidpipe.sources.factory import is_live_spec

    try:
        return is_live_spec(camera_spec(cam), pconfig)
    except VidpipeError:
        return False


def build_detector_for(config: ServeConfig) -> "Detector":
    """The detector of ``config`` (model, device, thresholds, top-level classes); errors name the
    config file's line of ``model`` or ``classes``."""
    from vidpipe.api import build_detector

    opts = dict(conf=config.conf, iou=config.iou, max_det=config.max_det, agnostic=config.agnostic)
    with config.located(("model",)):
        detector = build_detector(
            config.model, device=config.device, dtype=config.dtype, imgsz=config.imgsz, **opts
        )
    if config.classes is not None:
        with config.located(("classes",)):
            detector = build_detector(detector.model, classes=list(config.classes), **opts)
    return detector


class Server:
    """A serve run (create it with :func:`serve`). Thread-safe: cameras may be added, removed and
    queried from any thread while it runs.

    Attributes:
        config: what it runs.
        run: the underlying :class:`~vidpipe.pipeline.DetectionRun` (``None`` before :meth:`start`).
        metrics: the metrics endpoint, or ``None`` without a port.
        error: the exception that ended the loop early, else ``None``.
    """

    def __init__(self, config: ServeConfig, *, on_batch: "Callable[[list[FrameResult]], Any] | None" = None) -> None:
        if not isinstance(config, ServeConfig):
            raise ConfigError(f"invalid config={config!r}; expected a ServeConfig or a YAML file path")
        self.config = config
        self.run: "DetectionRun | None" = None
        self.metrics: "MetricsServer | None" = None
        self.error: BaseException | None = None
        self._on_batch = on_batch
        self._outputs: "CameraOutputs | None" = None
        self._lock = threading.RLock()  # cameras and routes vs. the loop's writes
        self._active: dict[str, int] = {}  # camera name -> stream id, while running
        self._name_of: dict[int, str] = {}  # stream id -> camera name, for good
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._summary: "RunSummary | None" = None
        self._tracked: set[int] = set()  # stream ids the tracker stage follows
        self._preview: "PreviewHub | None" = None  # metrics.preview: the frames of /preview

    # ------------------------------------------------------------------ start
    def start(self) -> "Server":
        """Load the model, open the tables, start the enabled cameras and the metrics endpoint."""
        if self.run is not None:
            return self
        from vidpipe.pipeline import DetectionRun
        from vidpipe.pipeline_config import PipelineConfig
        from vidpipe.serve.outputs import CameraOutputs

        config = self.config
        detector = build_detector_for(config)
        with config.located(()):
            pconfig = PipelineConfig(
                decoder=config.decoder, batch_size=config.batch_size, strict_gpu=config.strict_gpu,
                letterbox=config.letterbox, results_on_host=True, live=config.live,
            )  # fmt: skip
        enabled = [(i, cam) for i, cam in enumerate(config.cameras) if cam.enabled]
        specs = []
        for i, cam in enabled:
            with config.located(("cameras", i, "url")):
                specs.append(camera_spec(cam))
        outputs = CameraOutputs(config, detector.names, live_of=lambda cam: _is_live(cam, pconfig))
        routes = []
        try:
            for i, cam in enabled:
                routes.append(outputs.prepare(cam, path=("cameras", i)))
        except BaseException:
            outputs.abort("the serve run could not start", None)
            raise
        self._tracked = {sid for sid, (_, cam) in enumerate(enabled) if config.tracks(cam)}
        stages = []
        if config.tracking:  # one tracker stage; it tracks the streams in self._tracked
            from vidpipe.track.stage import TrackerStage

            stages.append(TrackerStage(config.track, streams=self._tracked))
        try:
            from vidpipe.serve.zones import serve_zone_stages  # after the tracker

            stages = [*stages, *serve_zone_stages(config, lambda sid: config.camera(self._name_of.get(sid, "")))]
            from vidpipe.serve.annotate import CameraRender, serve_annotate_stages  # after the zones

            camera_of = lambda sid: config.camera(self._name_of.get(sid, ""))  # noqa: E731
            if config.metrics.preview and config.metrics.port is not None:  # it shows what the others found
                from vidpipe.preview import PreviewHub, PreviewStage

                self._preview = PreviewHub()  # boxes, labels, track ids, each camera's lines and zones
                stages.append(PreviewStage(self._preview, render=CameraRender(camera_of)))
            stages += serve_annotate_stages(config, camera_of)
            run = DetectionRun(specs, detector, pconfig, keep_alive=True, stages=stages)
            outputs.attach_events(run, live_of=lambda sid: run.kind_of(sid) == "live")
        except BaseException:
            outputs.abort("the serve run could not start", None)
            raise
        with self._lock:
            for sid, ((_, cam), route) in enumerate(zip(enabled, routes)):
                outputs.route(sid, route)
                self._active[cam.name] = sid
                self._name_of[sid] = cam.name
            self.run, self._outputs = run, outputs
        if config.metrics.port is not None:
            from vidpipe.metrics import serve_metrics

            try:
                with config.located(("metrics", "port")):
                    self.metrics = serve_metrics(
                        run, port=config.metrics.port, host=config.metrics.host, status=self.status,
                        camera_of=self._name_of.get,
                    )  # fmt: skip
                if self._preview is not None:
                    logger.info("preview at %s", self.metrics.attach_preview(self._preview))
            except BaseException:
                run.close()
                self._summary = run.summary(outputs=outputs.outputs)
                self._done.set()
                outputs.abort("the metrics endpoint could not start", self._summary)
                if self._preview is not None:
                    self._preview.close()
                raise
        self._thread = threading.Thread(target=self._loop, name="vidpipe-serve", daemon=True)
        self._thread.start()
        logger.info("serving %d camera(s)%s", len(enabled), f"; metrics at {self.metrics.url}" if self.metrics else "")
        return self

    def _loop(self) -> None:
        run, outputs = self._running()
        observe = self.metrics.metrics.observe if self.metrics is not None else None
        try:
            for batch in run.batches():
                if observe is not None:
                    observe(batch)
                with self._lock:
                    outputs.write(batch)
                if self._on_batch is not None:
                    self._on_batch(batch)
        except BaseException as exc:  # noqa: BLE001 - recorded; stop() finalises and re-raises
            self.error = exc
            logger.error("the serve loop stopped: %s: %s", type(exc).__name__, exc,
                         exc_info=logger.isEnabledFor(logging.DEBUG))
            run.close()
        finally:
            self._done.set()

    # ------------------------------------------------------------------ cameras
    def add_camera(
        self,
        name: str,
        url: str | None = None,
        *,
        classes: "str | Sequence[str | int] | None" = None,
        conf: float | None = None,
        output: "str | os.PathLike[str] | OutputConfig | None" = None,
    ) -> int:
        """Start a camera now; returns its stream id.

        ``url=None`` starts the configured camera ``name`` (e.g. one with ``enabled: false``).

        Raises:
            ConfigError: the name is running already, no url for an unknown name, a bad value,
                or ``classes``/``conf`` asking for less than the model detects.
        """
        run, outputs = self._running()
        if url is None:
            cam = self.config.camera(name)
            if cam is None:
                raise ConfigError(f"add_camera({name!r}): no camera of that name in the config; pass url=")
            cam = CameraConfig(cam.name, cam.url, cam.classes, cam.conf, cam.output, True, cam.track)
        else:
            if isinstance(output, os.PathLike):
                output = os.fspath(output)
            cam = CameraConfig(name, url, classes=classes, conf=conf, output=output)  # type: ignore[arg-type]
        self.config.check_camera(cam)
        spec = camera_spec(cam)
        with self._lock:
            if cam.name in self._active:
                raise ConfigError(f"add_camera({cam.name!r}): a camera of that name is running; remove it first")
            route = outputs.prepare(cam)
            sid = run.add_source(spec)
            if self.config.tracks(cam) and self.config.tracking:
                self._tracked.add(sid)
            outputs.route(sid, route)
            self._active[cam.name] = sid
            self._name_of[sid] = cam.name
        logger.info("camera %s added (%s, stream %d)", cam.name, cam.source_name, sid)
        return sid

    def remove_camera(self, name: str) -> None:
        """Stop camera ``name`` promptly; its table keeps the rows written (and stays open)."""
        run, _ = self._running()
        with self._lock:
            sid = self._active.pop(name, None)
            if sid is None:
                known = ", ".join(sorted(self._active)) or "none"
                raise ConfigError(f"remove_camera({name!r}): no running camera of that name (running: {known})")
        run.remove_source(sid)
        logger.info("camera %s removed (stream %d)", name, sid)

    @property
    def cameras(self) -> dict[str, int]:
        """Running cameras: name -> stream id."""
        with self._lock:
            return dict(self._active)

    def _running(self) -> "tuple[DetectionRun, CameraOutputs]":
        if self.run is None or self._outputs is None:
            raise ConfigError("the server is not started; call start() (vidpipe.serve() starts it)")
        if self._summary is not None or self._done.is_set():
            raise ConfigError("the server has stopped; start a new one with vidpipe.serve()")
        return self.run, self._outputs

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """``run.status()`` plus each stream's ``camera`` (and ``tracks``, the tracks followed
        now, when the camera is tracked), the running ``cameras``, each
        camera's ``tables`` and the ``metrics_url`` (JSON-able; cheap; any thread)."""
        if self.run is None:
            return {"streams": [], "cameras": {}, "tables": {}, "metrics_url": None}
        status = dict(self.run.status())
        tracker = next((st for st in self.run.stages.stages if st.name == "track"), None)
        streams = []
        for s in status.get("streams", ()):
            s = dict(s)
            s["camera"] = self._name_of.get(int(s["stream_id"]))
            if tracker is not None and int(s["stream_id"]) in self._tracked:
                s["tracks"] = tracker.active_tracks(int(s["stream_id"]))  # confirmed tracks followed now
            streams.append(s)
        status["streams"] = streams
        with self._lock:
            status["cameras"] = dict(self._active)
            status["tables"] = self._outputs.tables() if self._outputs is not None else {}
        status["metrics_url"] = self.metrics.url if self.metrics is not None else None
        status["error"] = None if self.error is None else f"{type(self.error).__name__}: {self.error}"
        return status

    @property
    def idle(self) -> bool:
        """True when no stream is pending or running (every camera ended, failed or was removed)."""
        if self.run is None:
            return False
        # "ok" is set when a source has read its input; its last frames may still be on the way
        return all(st.status in _TERMINAL and (st.status != "ok" or st.drained) for st in list(self.run.states))

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics is None else self.metrics.url

    # ------------------------------------------------------------------ stop
    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the loop ends (after :meth:`stop`, or an error); True if it ended."""
        return self._done.wait(timeout)

    def stop(self, *, reason: str | None = None, timeout: float = 30.0) -> "RunSummary":
        """Stop every camera, write the results already detected, finalise the tables and close
        the metrics endpoint (idempotent). ``reason`` marks the tables partial with it (e.g.
        ``"interrupted (SIGTERM)"``); without it their status follows the run's summary.

        Returns:
            The run's summary. Re-raises the exception that ended the loop early, if any
            (after finalising the tables).
        """
        with self._lock:
            if self._summary is not None:
                return self._summary
            run, outputs = self.run, self._outputs
            if run is None or outputs is None:
                raise ConfigError("the server was never started")
        run.stop()  # the batch being detected is still delivered and written
        if not self._done.wait(timeout):
            logger.warning("the serve loop did not end within %.0f s of stop(); closing the run", timeout)
            run.close()
            self._done.wait(10)
        run.close()
        summary = outputs.with_events(run.summary(outputs=outputs.outputs), reason)
        try:
            with self._lock:
                if reason is not None or self.error is not None:
                    why = reason or f"{type(self.error).__name__}: {self.error}"
                    outputs.abort(why, summary)
                else:
                    outputs.close(summary)
        finally:
            if self.metrics is not None:
                self.metrics.close()
            if self._preview is not None:
                self._preview.close()
            self._summary = summary
        if self.error is not None and not isinstance(self.error, KeyboardInterrupt):
            raise self.error
        return summary

    @property
    def summary(self) -> "RunSummary | None":
        """The summary once stopped, else ``None``."""
        return self._summary

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.stop()
            return
        reason = (
            "interrupted (KeyboardInterrupt)" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        )
        try:
            self.stop(reason=reason)
        except Exception as stop_exc:  # noqa: BLE001 - keep the original exception propagating
            logger.error("stopping the server after %s: %s", reason, stop_exc)


def serve(
    config: "ServeConfig | str | os.PathLike[str]",
    *,
    metrics_port: int | None = None,
    metrics_host: str | None = None,
    on_batch: "Callable[[list[FrameResult]], Any] | None" = None,
    start: bool = True,
    env: Mapping[str, str] | None = None,
) -> Server:
    """Run cameras through one detector into their tables (``vidpipe serve`` from Python).

    Args:
        config: a :class:`ServeConfig`, or the path of a YAML file (:func:`load_config`).
        metrics_port / metrics_host: override the config's ``metrics`` (``0``: a free port).
        on_batch: called with each batch of results (list of FrameResult, detections on the CPU)
            in the server's thread, after they are written.
        start: start now (default); else call ``start()`` or use ``with``.
        env: where ``${NAME}`` in a YAML file comes from (default ``os.environ``).

    Returns:
        The :class:`Server`: ``add_camera``, ``remove_camera``, ``status``, ``stop``; a context
        manager that stops on exit.
    """
    from vidpipe.serve.config import MetricsConfig
    from vidpipe.serve.load import load_config

    if isinstance(config, (str, os.PathLike)):
        config = load_config(config, env=env)
    elif not isinstance(config, ServeConfig):
        raise ConfigError(f"invalid config={config!r}; expected a ServeConfig or a YAML file path")
    if metrics_port is not None or metrics_host is not None:
        metrics = MetricsConfig(
            port=metrics_port if metrics_port is not None else config.metrics.port,
            host=metrics_host if metrics_host is not None else config.metrics.host,
            preview=config.metrics.preview,
        )
        config = config.replace(metrics=metrics)
    server = Server(config, on_batch=on_batch)
    return server.start() if start else server

