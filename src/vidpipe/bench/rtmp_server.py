"""A real RTMP server for ``vidpipe bench streams``: nginx with the RTMP module, on loopback.

Uses the system's ``nginx`` and ``ngx_rtmp_module.so`` (Debian: ``nginx``,
``libnginx-mod-rtmp``), or a tree unpacked from those ``.deb`` files with ``dpkg -x`` (``root=``),
for machines without a package manager. The server runs in the foreground of its own process
group, with its configuration, logs and pid file in a private folder, and is killed with it.

It dies with this process, by whatever signal this process dies (``kill -9`` included): nginx runs
as one process (``master_process off``: a master's workers would outlive a killed master) started
by a keeper thread with a parent-death ``SIGKILL`` (:mod:`vidpipe.lifetime.keeper`). The private
folder is named after this process (``vidpipe-rtmp-<pid>-*``, :mod:`vidpipe.lifetime.folders`); a
server started later removes the folders of processes that no longer run, so a killed run leaves
nothing for long and a new one never collides with it (each server also takes a free port).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from vidpipe.lifetime.folders import private_folder
from vidpipe.lifetime.keeper import Keeper

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

    def __init__(self, *, port: int | None = None, root: str | os.PathLike | None = None) -> None:
        self.binary, self.module = find_nginx(root)
        self.root = Path(root) if root is not None else None
        self.port = port or _free_port()
        self._dir = private_folder("rtmp")  # removes those of killed runs
        self._proc: subprocess.Popen | None = None
        self._keeper: Keeper | None = None

    def url(self, name: str) -> str:
        return f"rtmp://127.0.0.1:{self.port}/live/{name}"

    def _config(self) -> Path:
        d = self._dir
        conf = d / "nginx.conf"
        conf.write_text(
            f"load_module {self.module};\n"
            "master_process off;\n"  # one process: it gets the parent-death signal (workers would not)
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
        self._keeper = Keeper("vidpipe-rtmp-keeper")
        self._proc = self._keeper.popen(
            [str(self.binary), "-p", str(self._dir), "-e", str(self._dir / "error.log"), "-c", str(conf)],
            python=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True,
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

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return None if self._proc is None else self._proc.pid

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        keeper, self._keeper = self._keeper, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=5)
            if proc.stderr:
                proc.stderr.close()
        if keeper is not None:
            keeper.close()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "RtmpServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
