"""``vidpipe bench follow --pipeline``: the broadcaster's pipeline, measured live on loopback.

A camera (a publisher pushing a clip at its own frame rate, looped, to a real nginx-rtmp server)
-> ``vidpipe``: decode -> detect -> track -> follow-cam (plan + render on the device) -> encode
(:class:`~vidpipe.encode.VideoWriter`) -> RTMP out to the same server -> a player that receives
it. The camera is RTMP (the package's own server; the tests run the RTSP-camera variant against
GStreamer's RTSP server).

The clip: the bundled ``bikes.mp4`` (real street footage, people and bicycles) scaled to the
input size and re-timed to ``fps``; the camera follows ``person``. Reported: frames in / out,
drops, output frames per second (over the measured window, after a warm-up), capture-to-result
latency p50/p99, the per-stage ms per frame, and whether it kept up (real time: output rate
>= 95 % of ``fps`` and at most 2 % dropped).
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["make_camera_clip", "run_pipeline_bench"]


def make_camera_clip(path: str | Path, *, size: tuple[int, int], fps: float, frames: int = 250) -> Path:
    """The first ``frames`` of ``bikes.mp4`` (250) scaled to ``size`` (width, height), at ``fps``,
    a keyframe a second and no B-frames (a live encoder's stream) -> ``path`` (H.264 MP4)."""
    import av
    import torch
    import torch.nn.functional as F

    from vidpipe.data import sample_video

    w, h = size
    path = Path(path)
    with av.open(str(sample_video())) as src, av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=round(fps))
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        s.options = {"preset": "ultrafast", "crf": "23", "g": str(round(fps)), "bf": "0"}
        for i, frame in enumerate(src.decode(video=0)):
            if i >= frames:
                break
            t = torch.from_numpy(frame.to_ndarray(format="rgb24")).permute(2, 0, 1)[None].float()
            big = F.interpolate(t, size=(h, w), mode="bilinear", align_corners=False)
            rgb = big[0].round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous().numpy()
            for p in s.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


def _player(url: str, got: list[float], stop: threading.Event) -> None:
    """Receive the published stream; the arrival time of each frame goes to ``got``."""
    import av

    try:
        with av.open(url, timeout=(60, 2), options={"analyzeduration": "300000", "probesize": "4096"}) as f:
            for _ in f.decode(video=0):
                got.append(time.monotonic())
                if stop.is_set():
                    return
    except Exception as exc:  # noqa: BLE001 - a live stream ends in an I/O error or a read timeout
        logger.debug("player: %s", exc)


def run_pipeline_bench(
    *,
    seconds: float = 20.0,
    warmup: float = 5.0,
    device: str = "auto",
    in_size: tuple[int, int] = (1280, 720),
    out_size: tuple[int, int] = (1280, 720),
    fps: float = 30.0,
    target: str = "person",
    batch_size: int = 4,
    model: str = "yolov3-tiny",
    nginx_root: str | None = None,
) -> dict[str, Any]:
    """Run the pipeline for ``warmup`` + ``seconds`` and measure the last ``seconds``."""
    import vidpipe
    from vidpipe.bench.publish import publish
    from vidpipe.bench.rtmp_server import RtmpServer
    from vidpipe.encode import VideoWriter
    from vidpipe.follow.stage import FollowStage
    from vidpipe.follow.timing import TimedStage, pipeline_timings
    from vidpipe.track.stage import TrackerStage

    with tempfile.TemporaryDirectory(prefix="vidpipe-follow-bench-") as tmp:
        # long enough not to loop during a short run (a loop makes the people jump)
        clip = make_camera_clip(Path(tmp) / "camera.mp4", size=in_size, fps=fps,
                                frames=min(250, max(round(fps * 3), round(fps * (warmup + seconds + 2)))))
        with RtmpServer(root=nginx_root) as server:
            pub = publish(str(clip), [server.url("camera")])
            got: list[float] = []
            stop = threading.Event()
            player = threading.Thread(target=_player, args=(server.url("follow"), got, stop), daemon=True)
            player.start()
            state: dict[str, Any] = {"writer": None}
            tracker = TimedStage(TrackerStage(worker="inline"))
            follow = FollowStage(target, size=out_size, sink=lambda meta, image: state["writer"].write(image, pts=meta.pts),
                                 nominal_fps=fps)  # fmt: skip
            run = vidpipe.detect(server.url("camera"), model=model, device=device, classes=target,
                                 batch_size=batch_size, stages=[tracker, follow])  # fmt: skip
            writer = state["writer"] = VideoWriter(server.url("follow"), width=out_size[0], height=out_size[1], fps=fps)
            t_start = None
            mark: dict[str, Any] = {}
            try:
                for _ in run.batches():
                    now = time.monotonic()
                    t_start = t_start or now
                    if not mark and now - t_start >= warmup:
                        st = run.status()["streams"][0]
                        mark = {"t": now, "frames_in": st["frames_in"], "frames": st["frames"], "drops": st["drops"],
                                "received": len(got)}  # fmt: skip
                    if mark and now - mark["t"] >= seconds:
                        break
            finally:
                t_stop = time.monotonic()
                status = run.status()["streams"][0]
                stats = run.get_stats()
                run.close()
                writer.close()
                time.sleep(1.0)  # the last frames reach the player
                stop.set()
                pub.stop()
                player.join(timeout=10)
    if not mark:
        raise RuntimeError(f"the pipeline produced no result within the {warmup:g} s warm-up")
    span = t_stop - mark["t"]
    frames_in = status["frames_in"] - mark["frames_in"]
    drops = status["drops"] - mark["drops"]
    out_frames = status["frames"] - mark["frames"]
    received = len(got) - mark["received"]
    out_fps = out_frames / span if span > 0 else 0.0
    result = {
        "device": str(getattr(run.detector, "device", device)),
        "in_size": list(in_size), "out_size": list(out_size), "fps": fps, "seconds": round(span, 2),
        "frames_in": frames_in, "frames_out": out_frames, "drops": drops, "received_by_player": received,
        "out_fps": round(out_fps, 2),
        "latency_ms": stats.get("latency_ms"),
        "ms_per_frame": pipeline_timings(run, tracker, follow, writer),
        "follow": dict(follow.report()),
        "writer": {k: v for k, v in writer.report().items() if k in ("frames", "encode_ms_per_frame", "blocked_writes")},
    }  # fmt: skip
    result["real_time"] = bool(out_fps >= 0.95 * fps and drops <= 0.02 * max(frames_in, 1))
    return result


def format_pipeline(r: dict[str, Any]) -> str:
    lat = r.get("latency_ms") or {}
    t = r["ms_per_frame"]
    rows = [
        f"broadcaster pipeline: {r['in_size'][0]}x{r['in_size'][1]}@{r['fps']:g} RTMP camera -> detect -> track -> "
        f"follow-cam -> {r['out_size'][0]}x{r['out_size'][1]} RTMP out, on {r['device']}, {r['seconds']:.1f} s measured",
        f"  frames in {r['frames_in']}, out {r['frames_out']} ({r['out_fps']:.1f} fps), dropped {r['drops']}, "
        f"received by the player {r['received_by_player']}; real time: {'yes' if r['real_time'] else 'NO'}",
        f"  capture->result latency ms: p50 {_ms(lat.get('p50'))}, p99 {_ms(lat.get('p99'))}",
        "  ms per frame: " + ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in t.items()),
    ]
    return "\n".join(rows)


def _ms(v: Any) -> str:
    return "-" if v is None else f"{float(v):.1f}"
