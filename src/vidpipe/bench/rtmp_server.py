"""A real RTMP server for ``vidpipe bench streams``: nginx with the RTMP module, on loopback.

Uses the system's ``nginx`` and ``ngx_rtmp_module.so`` (Debian: ``nginx``,
``libnginx-mod-rtmp``), or a tree unpacked from those ``.deb`` files with ``dpkg -x`` (``root=``),
for machines without a package manager. The server runs in the foreground of its own process
group, with its configuration, logs and pid file in a private folder, and is killed with it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["RtmpServer", "find_nginx"]

_MODULE = "ngx_rtmp_module.so"


def find_nginx(root: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """``(nginx binary, RTMP module)`` from ``root`` (a ``dpkg -x`` tree) or the system.

    Raises FileNotFoundError naming what is missing and how to get it.
    """
    if root is not None:
        base = Path(root)
        binary = base / "usr/sbin/nginx"
        modules = sorted(base.glob(f"usr/lib/nginx/modules/{_MODULE}"))
    else:
        found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
        binary = Path(found) if found else Path("nginx")
        modules = [p for p in (Path("/usr/lib/nginx/modules") / _MODULE,) if p.exists()]
    if not binary.exists():
        raise FileNotFoundError(f"nginx not found ({binary}); install Debian's nginx and libnginx-mod-rtmp")
    if not modules:
        raise FileNotFoundError(f"{_MODULE} not found; install Debian's libnginx-mod-rtmp")
    return binary, modules[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RtmpServer:
    """nginx-rtmp on ``127.0.0.1:port`` with one live application ``live``.

    ``url(name)`` is where a stream is published and played: ``rtmp://127.0.0.1:PORT/live/NAME``.
    """

    def __init__(self, *, port: int | None = None, root: str | os.PathLike | None = None, workers: int = 1) -> None:
        self.binary, self.module = find_nginx(root)
        self.root = Path(root) if root is not None else None
        self.port = port or _free_port()
        self.workers = workers
        self._dir = Path(tempfile.mkdtemp(prefix="vidpipe-rtmp-"))
        self._proc: subprocess.Popen | None = None

    def url(self, name: str) -> str:
        return f"rtmp://127.0.0.1:{self.port}/live/{name}"

    def _config(self) -> Path:
        d = self._dir
        conf = d / "nginx.conf"
        conf.write_text(
            f"load_module {self.module};\n"
            f"worker_processes {self.workers};\n"
            "daemon off;\n"
            f"pid {d / 'nginx.pid'};\n"
            f"error_log {d / 'error.log'} warn;\n"
            "events { worker_connections 8192; }\n"
            "rtmp {\n"
            "  access_log off;\n"  # else the module opens Debian's compiled-in /var/log/nginx/access.log
            f"  server {{ listen 127.0.0.1:{self.port}; chunk_size 4096;\n"
            "    application live { live on; record off; wait_key on; }\n"
            "  }\n"
            "}\n"
        )
        return conf

    def start(self, *, timeout: float = 10.0) -> "RtmpServer":
        env = dict(os.environ)
        if self.root is not None:  # the .deb tree's own libraries, if it brought any
            libs = [str(p) for p in (self.root / "usr/lib/x86_64-linux-gnu", self.root / "lib/x86_64-linux-gnu")
                    if p.exists()]
            if libs:
                env["LD_LIBRARY_PATH"] = ":".join([*libs, env.get("LD_LIBRARY_PATH", "")])
        conf = self._config()
        self._proc = subprocess.Popen(
            [str(self.binary), "-p", str(self._dir), "-e", str(self._dir / "error.log"), "-c", str(conf)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                log = (self._dir / "error.log").read_text(errors="replace") if (self._dir / "error.log").exists() else ""
                raise RuntimeError(f"nginx exited with {self._proc.returncode}: {err.strip() or log.strip()}")
            with socket.socket() as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"nginx did not listen on 127.0.0.1:{self.port} within {timeout} s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "RtmpServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
