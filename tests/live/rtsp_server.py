#!/usr/bin/python3
"""GStreamer's RTSP server (GstRtspServer) for the live tests; run by Debian's ``/usr/bin/python3``.

The project's virtualenv has no ``gi``; Debian's Python has it with ``python3-gst-1.0`` and
``gir1.2-gst-rtsp-server-1.0``. :class:`live.servers.RtspServer` starts this script; by hand::

    /usr/bin/python3 tests/live/rtsp_server.py --port 8554 --streams 2 --width 320 --height 240 --fps 15

Mount points: ``/cam0`` ... ``/cam{N-1}``: live H.264 (``videotestsrc is-live=true`` moving ball,
x264enc ``tune=zerolatency``, no B-frames, a keyframe every ``--keyint`` seconds; SPS/PPS in
the SDP, and with ``--sps-in-band`` also before every keyframe) and ``/NAME`` for each ``--file NAME=PATH`` (the file's H.264 remuxed, not
re-encoded, played once at its own rate). With ``--user``/``--password`` every mount needs
those credentials (HTTP basic, as IP cameras do). TCP and UDP transports are both offered.
Prints ``READY <port>`` once listening.

In-band SPS/PPS (``--sps-in-band``, as many cameras send) makes FFmpeg's RTSP client (5.1 CLI and
PyAV 18 / FFmpeg 8.1) deliver each keyframe twice (the copy with the same pts, or none) and
mis-decode a few frames after the first one; so by default they are only in the SDP
(``sprop-parameter-sets``), where a client joining mid-stream also finds them. ``--shared`` gives all clients of a mount one pipeline
(one encoder, as a camera has; a client joins mid-GOP at the next keyframe); without it each
client gets its own pipeline (starts at a keyframe, costs an encoder per client).
"""

from __future__ import annotations

import argparse
import signal
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtsp", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtsp, GstRtspServer  # noqa: E402

_PATTERNS = ("ball", "smpte", "snow", "circular", "pinwheel", "spokes", "gamut", "chroma-zone-plate")


def _live_launch(index: int, args: argparse.Namespace) -> str:
    pattern = _PATTERNS[index % len(_PATTERNS)]
    keyint = max(1, round(args.fps * args.keyint))
    motion = " horizontal-speed=4" if pattern == "smpte" else ""
    return (
        f"( videotestsrc is-live=true pattern={pattern}{motion} "
        f"! video/x-raw,width={args.width},height={args.height},framerate={args.fps}/1 "
        f"! videoconvert ! x264enc tune=zerolatency speed-preset=ultrafast bframes=0 "
        f"key-int-max={keyint} bitrate={args.bitrate} "
        f"! video/x-h264,profile=constrained-baseline "
        f"! rtph264pay name=pay0 pt=96 config-interval={args.config_interval} )"
    )


def _file_launch(path: str, args: argparse.Namespace) -> str:
    location = path.replace("\\", "\\\\").replace('"', '\\"')
    return (f'( filesrc location="{location}" ! parsebin ! h264parse '
            f"! rtph264pay name=pay0 pt=96 config-interval={args.config_interval} )")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--fps", type=int, default=15)
    p.add_argument("--keyint", type=float, default=1.0, help="seconds between keyframes")
    p.add_argument("--bitrate", type=int, default=300, help="kbit/s")
    p.add_argument("--file", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--shared", action="store_true")
    p.add_argument("--sps-in-band", dest="config_interval", action="store_const", const=-1, default=0,
                   help="also send SPS/PPS in-band before every keyframe (rtph264pay config-interval=-1)")
    p.add_argument("--user")
    p.add_argument("--password")
    args = p.parse_args(argv)

    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address(args.host)
    server.set_service(str(args.port))
    mounts = server.get_mount_points()
    launches = {f"/cam{i}": _live_launch(i, args) for i in range(args.streams)}
    for spec in args.file:
        name, _, path = spec.partition("=")
        launches[f"/{name}"] = _file_launch(path, args)

    if args.user is not None:
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string("media.factory.role", "user")
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(args.user, args.password or ""), token)
        server.set_auth(auth)

    for mount, launch in launches.items():
        factory = GstRtspServer.RTSPMediaFactory()
        factory.set_launch(launch)
        factory.set_shared(args.shared)
        factory.set_protocols(GstRtsp.RTSPLowerTrans.TCP | GstRtsp.RTSPLowerTrans.UDP)
        if args.user is not None:
            factory.add_role_from_structure(Gst.Structure.new_from_string(
                "user, media.factory.access=(boolean)true, media.factory.construct=(boolean)true"))
        mounts.add_factory(mount, factory)

    loop = GLib.MainLoop()
    if server.attach(None) == 0:
        print(f"cannot listen on {args.host}:{args.port}", file=sys.stderr, flush=True)
        return 2
    # Clients that vanish without TEARDOWN: drop their sessions every few seconds.
    GLib.timeout_add_seconds(2, lambda: server.get_session_pool().cleanup() >= 0)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, loop.quit)
    print(f"READY {server.get_bound_port()} mounts={','.join(launches)}", flush=True)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
