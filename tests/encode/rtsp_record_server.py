#!/usr/bin/python3
"""GStreamer's RTSP server accepting RECORD (a client publishing to it), for the encode tests;
run by Debian's ``/usr/bin/python3`` (it has ``gi``), like ``tests/live/rtsp_server.py``.

``/NAME`` takes one published H.264 stream (ANNOUNCE + SETUP over TCP + RECORD, as FFmpeg's RTSP
muxer sends it) and writes its access units, remuxed, to ``--out`` (Matroska). Prints
``READY <port>`` once listening; SIGTERM stops it (the pipeline gets EOS first, so the file ends
cleanly).
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mount", default="/out")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address(args.host)
    server.set_service(str(args.port))
    location = args.out.replace("\\", "\\\\").replace('"', '\\"')
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_transport_mode(GstRtspServer.RTSPTransportMode.RECORD)
    factory.set_launch(f'( rtph264depay name=depay0 ! h264parse ! matroskamux streamable=true '
                       f'! filesink location="{location}" sync=false )')
    factory.set_protocols(GstRtsp.RTSPLowerTrans.TCP)
    factory.set_latency(50)
    server.get_mount_points().add_factory(args.mount, factory)

    loop = GLib.MainLoop()
    if server.attach(None) == 0:
        print(f"cannot listen on {args.host}:{args.port}", file=sys.stderr, flush=True)
        return 2
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, loop.quit)
    print(f"READY {server.get_bound_port()}", flush=True)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
