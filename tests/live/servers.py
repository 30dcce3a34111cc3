"""Real streaming servers on loopback for the live tests: RTSP, RTMP (+HLS), HTTP (MPEG-TS, HLS), SRT.

Each server is a child process (see :mod:`live.procs`: ``start()`` waits until it serves,
``stop()`` kills it like a crash, ``restart(down_s=...)`` brings it back on the same port,
``freeze()``/``thaw()`` make it go quiet with its sockets open; a context manager):

- :class:`RtspServer`: GStreamer's RTSP server (``tests/live/rtsp_server.py`` under Debian's
  ``/usr/bin/python3``): ``/cam0`` ... live H.264 from ``videotestsrc``, plus files by name;
  TCP and UDP; optional basic auth. :meth:`RtspServer.url`.
- :class:`NginxRtmp`: nginx with ``libnginx-mod-rtmp`` (``application live``), optionally HLS
  (nginx-rtmp writes it, nginx's http serves it); runs the system nginx or one unpacked from
  ``.deb`` files (:meth:`NginxRtmp.from_tree`, for the GPU host). Streams come from a
  :class:`Publisher`.
- :class:`Publisher`: pushes a file with PyAV (remux, paced, looping; ``tests/live/publish.py``
  under the project's Python), reconnecting when the server goes away.
- :class:`HttpStreamServer`: progressive MPEG-TS (``/NAME.ts``) and HLS (``/hls/NAME.m3u8``)
  from files (``tests/live/http_server.py``, PyAV).
- :class:`SrtServer`: the ``ffmpeg`` tool as an SRT listener (needs FFmpeg built with libsrt).

``*_missing_reason()`` say why a server cannot run here (``None`` when it can); the fixtures in
``tests/live/conftest.py`` skip with that reason, or fail under ``CI=true``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from live.procs import LOOPBACK, ServerProcess, free_port, port_open

__all__ = [
    "GST_PYTHON", "DEFAULT_RTMP_MODULE", "RtspServer", "NginxRtmp", "Publisher", "HttpStreamServer", "SrtServer",
    "rtsp_missing_reason", "nginx_missing_reason", "srt_missing_reason", "udp_port_bound",
]

HERE = Path(__file__).resolve().parent
#: Debian's Python, which has ``gi`` (python3-gst-1.0); override with VIDPIPE_GST_PYTHON
GST_PYTHON = os.environ.get("VIDPIPE_GST_PYTHON", "/usr/bin/python3")
RTSP_PACKAGES = ("gir1.2-gst-rtsp-server-1.0 python3-gst-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good "
                 "gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly")
NGINX_PACKAGES = "nginx libnginx-mod-rtmp"
DEFAULT_RTMP_MODULE = "/usr/lib/nginx/modules/ngx_rtmp_module.so"


@functools.lru_cache(maxsize=None)
def rtsp_missing_reason(python: str = GST_PYTHON) -> str | None:
    """``None`` when ``python`` can run GStreamer's RTSP server with x264enc, else why not."""
    if not os.access(python, os.X_OK):
        return f"{python} not found (Debian's Python with gi runs the RTSP server)"
    probe = ("import gi; gi.require_version('Gst','1.0'); gi.require_version('GstRtspServer','1.0');"
             "from gi.repository import Gst, GstRtspServer; Gst.init(None);"
             "m=[e for e in ('videotestsrc','x264enc','rtph264pay','h264parse','parsebin') "
             "if Gst.ElementFactory.find(e) is None]; print(' '.join(m))")
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} cannot probe GStreamer ({exc})"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return f"GStreamer's RTSP server is not usable from {python} ({last}); apt-get install {RTSP_PACKAGES}"
    if out.stdout.strip():
        return f"GStreamer elements missing: {out.stdout.strip()}; apt-get install {RTSP_PACKAGES}"
    return None


def _nginx_paths(root: str | os.PathLike | None) -> tuple[Path, Path]:
    if root is not None:
        root = Path(root)
        return root / "usr/sbin/nginx", root / "usr/lib/nginx/modules/ngx_rtmp_module.so"
    return Path(shutil.which("nginx") or "/usr/sbin/nginx"), Path(DEFAULT_RTMP_MODULE)


def nginx_missing_reason(root: str | os.PathLike | None = None) -> str | None:
    """``None`` when nginx and its RTMP module are there (system, or under a ``dpkg -x`` ``root``)."""
    nginx, module = _nginx_paths(root)
    if not os.access(nginx, os.X_OK):
        return f"nginx not found at {nginx}; apt-get install {NGINX_PACKAGES}"
    if not module.is_file():
        return f"the nginx RTMP module is not at {module}; apt-get install libnginx-mod-rtmp"
    return None


@functools.lru_cache(maxsize=None)
def srt_missing_reason() -> str | None:
    """``None`` when the ``ffmpeg`` tool has the ``srt`` protocol (libsrt), else why not."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        return "the ffmpeg command-line tool is not installed (apt-get install ffmpeg)"
    out = subprocess.run([ffmpeg, "-hide_banner", "-protocols"], capture_output=True, text=True, timeout=30)
    if "srt" not in out.stdout.split():
        return "this ffmpeg has no srt protocol (built without libsrt)"
    return None


def udp_port_bound(port: int) -> bool:
    """Whether some socket on this host is bound to UDP ``port`` (reads /proc/net/udp)."""
    needle = f":{port:04X} "
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                if any(line.split()[1].endswith(needle.strip()) for line in f.readlines()[1:] if len(line.split()) > 1):
                    return True
        except OSError:
            continue
    return False


def _userinfo(user: str | None, password: str | None) -> str:
    if user is None:
        return ""
    return quote(user, safe="") + (":" + quote(password, safe="") if password is not None else "") + "@"


class RtspServer(ServerProcess):
    """GStreamer's RTSP server: ``/cam0`` ... ``/cam{streams-1}`` live, plus ``files`` by mount name.

    Live mounts: ``width`` x ``height`` at ``fps``, H.264 constrained baseline (no B-frames), a
    keyframe every ``keyint_s`` seconds, each mount a different moving ``videotestsrc`` pattern.
    SPS/PPS are in the SDP; ``sps_in_band=True`` also sends them before every keyframe, as many
    cameras do (FFmpeg's RTSP client then delivers each keyframe twice: see rtsp_server.py). File mounts (``files={"clip": path}``): the file's H.264 remuxed and
    played once at its own rate. ``shared=True`` (default): one pipeline per mount for all its
    clients, as a camera has one encoder (CPU cost per mount, not per client; a client joins at
    the next keyframe). ``user``/``password``: every mount needs them (basic auth).
    """

    name = "rtsp"

    def __init__(self, *, streams: int = 1, width: int = 320, height: int = 240, fps: int = 15,
                 keyint_s: float = 1.0, bitrate_kbps: int = 300, files: Mapping[str, str | os.PathLike] | None = None,
                 shared: bool = True, sps_in_band: bool = False, user: str | None = None, password: str | None = None,
                 port: int | None = None, host: str = LOOPBACK, python: str = GST_PYTHON, **kwargs) -> None:
        super().__init__(**kwargs)
        self.streams, self.width, self.height, self.fps = streams, width, height, fps
        self.keyint_s, self.bitrate_kbps, self.shared = keyint_s, bitrate_kbps, shared
        self.sps_in_band = sps_in_band
        self.files = {k: os.fspath(v) for k, v in (files or {}).items()}
        self.user, self.password = user, password
        self.host, self.python = host, python
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port()

    @property
    def mounts(self) -> tuple[str, ...]:
        return tuple(f"cam{i}" for i in range(self.streams)) + tuple(self.files)

    def url(self, name: str = "cam0", *, user: str | None = None, password: str | None = None,
            credentials: bool = True) -> str:
        """``rtsp://[user:pass@]127.0.0.1:PORT/name``: the server's credentials when it has them
        (``credentials=False``: none), or the ``user``/``password`` given (percent-encoded)."""
        if user is None and credentials:
            user, password = self.user, self.password
        return f"rtsp://{_userinfo(user, password)}{self.host}:{self.port}/{name}"

    def new_ports(self) -> None:
        if not self._fixed_port:
            self.port = free_port()

    def command(self) -> list[str]:
        cmd = [self.python, "-u", str(HERE / "rtsp_server.py"), "--host", self.host, "--port", str(self.port),
               "--streams", str(self.streams), "--width", str(self.width), "--height", str(self.height),
               "--fps", str(self.fps), "--keyint", str(self.keyint_s), "--bitrate", str(self.bitrate_kbps)]
        cmd += [a for name, path in self.files.items() for a in ("--file", f"{name}={path}")]
        if self.shared:
            cmd.append("--shared")
        if self.sps_in_band:
            cmd.append("--sps-in-band")
        if self.user is not None:
            cmd += ["--user", self.user, "--password", self.password or ""]
        return cmd

    def ready(self) -> bool:
        return "READY" in self.log_since_start() and port_open(self.port, self.host)


class NginxRtmp(ServerProcess):
    """nginx with the RTMP module: publish/play ``rtmp://127.0.0.1:PORT/live/NAME``.

    ``hls=True`` also has nginx-rtmp cut each published stream into HLS (1 s fragments) served
    at :meth:`hls_url` by nginx's http server. A player joins at the next keyframe (``wait_key``).
    ``root``: a tree made by ``dpkg -x`` of the ``.deb`` files of ``tools/debs-for-gpu``;
    its ``usr/sbin/nginx`` and module are used, and its library folders are put on
    ``LD_LIBRARY_PATH`` only when ``ldd`` finds a library missing on this host. nginx runs in
    the foreground (``daemon off; master_process off``) with its pid, logs and temp files in
    the work folder, so it needs neither root nor /var.
    """

    name = "nginx"

    def __init__(self, *, hls: bool = False, port: int | None = None, http_port: int | None = None,
                 root: str | os.PathLike | None = None, host: str = LOOPBACK, **kwargs) -> None:
        super().__init__(**kwargs)
        self.nginx, self.module = _nginx_paths(root)
        self.root = Path(root) if root is not None else None
        self.hls, self.host = hls, host
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port()
        self.http_port = http_port if http_port is not None else (free_port() if hls else None)
        if self.root is not None and self.env is None:
            self.env = _tree_library_env(self.root, self.nginx)

    @classmethod
    def from_tree(cls, root: str | os.PathLike, **kwargs) -> NginxRtmp:
        """nginx from a ``dpkg -x`` unpacked tree (the GPU host: no apt there)."""
        return cls(root=root, **kwargs)

    def url(self, name: str = "cam0") -> str:
        return f"rtmp://{self.host}:{self.port}/live/{name}"

    def hls_url(self, name: str = "cam0") -> str:
        if not self.hls:
            raise ValueError("this NginxRtmp was made with hls=False")
        return f"http://{self.host}:{self.http_port}/hls/{name}.m3u8"

    def new_ports(self) -> None:
        if not self._fixed_port:
            self.port = free_port()
            if self.hls:
                self.http_port = free_port()

    def config(self) -> str:
        d = self.workdir
        hls = (f"hls on; hls_path {d}/hls; hls_fragment 1s; hls_playlist_length 6s; hls_cleanup on;"
               if self.hls else "")
        http = ""
        if self.hls:
            temps = " ".join(f"{k}_temp_path {d}/tmp/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            http = f"""
http {{
    access_log off;
    {temps}
    types {{ application/vnd.apple.mpegurl m3u8; video/mp2t ts; }}
    server {{
        listen {self.host}:{self.http_port};
        location /hls/ {{ root {d}; add_header Cache-Control no-cache; }}
    }}
}}"""
        return f"""daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
load_module {self.module};
events {{ worker_connections 4096; }}
rtmp {{
    server {{
        listen {self.host}:{self.port};
        chunk_size 4096;
        application live {{
            live on;
            record off;
            wait_key on;
            wait_video on;
            {hls}
        }}
    }}
}}{http}
"""

    def prepare(self) -> None:
        (self.workdir / "hls").mkdir(exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        (self.workdir / "nginx.conf").write_text(self.config())

    def command(self) -> list[str]:
        return [str(self.nginx), "-p", str(self.workdir), "-e", str(self.workdir / "error.log"),
                "-c", str(self.workdir / "nginx.conf")]

    def ready(self) -> bool:
        return port_open(self.port, self.host) and (not self.hls or port_open(self.http_port, self.host))

    def log_tail(self, chars: int = 2000) -> str:
        err = self.workdir / "error.log"
        extra = err.read_text(errors="replace")[-chars:] if err.exists() else ""
        return (super().log_tail(chars) + "\n" + extra).strip()


def _tree_library_env(root: Path, binary: Path) -> dict[str, str] | None:
    """``LD_LIBRARY_PATH`` with the tree's library folders when ``ldd`` says a library is missing."""
    try:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    if "not found" not in out:
        return None
    dirs = [str(p) for p in (root / "lib/x86_64-linux-gnu", root / "usr/lib/x86_64-linux-gnu") if p.is_dir()]
    old = os.environ.get("LD_LIBRARY_PATH")
    return {"LD_LIBRARY_PATH": ":".join(dirs + ([old] if old else []))}


class Publisher(ServerProcess):
    """Pushes ``input`` to ``url`` with PyAV (``tests/live/publish.py``): remuxed, paced, looping.

    ``url`` may be a list: one process then publishes the same file to each URL (a thread each,
    output ``i`` starting ``i * stagger_s`` seconds after the first), cheaper than a process per
    stream for a bench of many streams. ``fmt``: the output format (``"flv"`` for RTMP,
    ``"mpegts"``, ...). ``retry_s``: when the server goes away each output opens its URL again
    every ``retry_s`` seconds (``None``: that output ends). Ready once every output has opened
    its URL (for RTMP: nginx accepted the publish).
    """

    name = "publisher"

    def __init__(self, input: str | os.PathLike, url: str | Sequence[str], *, fmt: str = "flv", loop: bool = True,
                 realtime: bool = True, retry_s: float | None = 0.2, stagger_s: float = 0.0,
                 options: Mapping[str, str] | None = None, python: str = sys.executable, **kwargs) -> None:
        n = 1 if isinstance(url, str) else len(url)
        kwargs.setdefault("ready_timeout", 15.0 + n * (0.5 + stagger_s))  # opens take ~0.2 s each here
        super().__init__(**kwargs)
        self.input, self.fmt = os.fspath(input), fmt
        self.targets = [url] if isinstance(url, str) else list(url)
        self.loop, self.realtime, self.retry_s, self.stagger_s = loop, realtime, retry_s, stagger_s
        self.options, self.python = dict(options or {}), python

    def command(self) -> list[str]:
        cmd = [self.python, "-u", str(HERE / "publish.py"), "--input", self.input, "--format", self.fmt,
               "--stagger", str(self.stagger_s)]
        cmd += [a for url in self.targets for a in ("--output", url)]
        cmd += [a for k, v in self.options.items() for a in ("--option", f"{k}={v}")]
        if not self.loop:
            cmd.append("--once")
        if not self.realtime:
            cmd.append("--no-realtime")
        if self.retry_s is not None:
            cmd += ["--retry", str(self.retry_s)]
        return cmd

    def publishing(self) -> int:
        """How many outputs have opened their URL since the last start (reopenings count again)."""
        return sum(1 for line in self.log_since_start().splitlines() if line.startswith("PUBLISHING"))

    def ready(self) -> bool:
        opened = {line.split()[1] for line in self.log_since_start().splitlines() if line.startswith("PUBLISHING")}
        return len(opened) >= len(self.targets)


class HttpStreamServer(ServerProcess):
    """``http://127.0.0.1:PORT/NAME.ts`` (progressive MPEG-TS, each client its own paced, looping
    remux) and ``/hls/NAME.m3u8`` (live HLS, 1 s segments) for each ``files`` entry (PyAV).

    Ready when listening and each playlist lists 2 segments (about 2 s after start).
    """

    name = "http"

    def __init__(self, files: Mapping[str, str | os.PathLike], *, hls: bool = True, port: int | None = None,
                 host: str = LOOPBACK, python: str = sys.executable, **kwargs) -> None:
        super().__init__(**kwargs)
        self.files = {k: os.fspath(v) for k, v in files.items()}
        self.hls, self.host, self.python = hls, host, python
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port()

    def url(self, name: str) -> str:
        return f"http://{self.host}:{self.port}/{name}.ts"

    def hls_url(self, name: str) -> str:
        if not self.hls:
            raise ValueError("this HttpStreamServer was made with hls=False")
        return f"http://{self.host}:{self.port}/hls/{name}.m3u8"

    def new_ports(self) -> None:
        if not self._fixed_port:
            self.port = free_port()

    def command(self) -> list[str]:
        cmd = [self.python, "-u", str(HERE / "http_server.py"), "--host", self.host, "--port", str(self.port),
               "--hls-dir", str(self.workdir)]
        cmd += [a for name, path in self.files.items() for a in ("--file", f"{name}={path}")]
        if not self.hls:
            cmd.append("--no-hls")
        return cmd

    def ready(self) -> bool:
        return "READY" in self.log_since_start() and port_open(self.port, self.host)


class SrtServer(ServerProcess):
    """The ``ffmpeg`` tool as an SRT listener: ``srt://127.0.0.1:PORT`` serves ``input`` as MPEG-TS
    (remuxed, ``-re`` paced, looping) to one caller at a time; a shell loop starts a fresh
    listener after each caller leaves. Ready when the UDP port is bound."""

    name = "srt"

    def __init__(self, input: str | os.PathLike, *, port: int | None = None, host: str = LOOPBACK,
                 latency_ms: int = 120, **kwargs) -> None:
        super().__init__(**kwargs)
        self.input, self.host, self.latency_ms = os.fspath(input), host, latency_ms
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port("udp")

    def url(self, name: str | None = None) -> str:
        """The caller's URL (``name`` is accepted for symmetry and ignored: one stream per port)."""
        return f"srt://{self.host}:{self.port}?mode=caller&latency={self.latency_ms * 1000}"

    def new_ports(self) -> None:
        if not self._fixed_port:
            self.port = free_port("udp")

    def command(self) -> list[str]:
        listen = f"srt://{self.host}:{self.port}?mode=listener&latency={self.latency_ms * 1000}"
        ffmpeg = shutil.which("ffmpeg") or "ffmpeg"
        inner = (f'while :; do "{ffmpeg}" -nostdin -hide_banner -loglevel warning -re -stream_loop -1 '
                 f'-i "$0" -map 0:v:0 -c copy -f mpegts "{listen}"; sleep 0.1; done')
        return ["/bin/sh", "-c", inner, self.input]

    def ready(self) -> bool:
        return udp_port_bound(self.port)
