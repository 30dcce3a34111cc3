"""Unpack ``.deb`` files without dpkg or apt (the GPU host has neither network nor apt).

``tools/debs-for-gpu DEST`` (run on a Debian machine with apt) downloads nginx, its RTMP module and
the libraries nginx links to into ``DEST``; carry that folder to the GPU host, then::

    from live.debs import unpack_debs
    from live.servers import NginxRtmp, Publisher
    root = unpack_debs("/path/to/DEST", "/tmp/nginx-root")      # like dpkg -x for each .deb
    with NginxRtmp.from_tree(root) as srv:                        # usr/sbin/nginx + its module
        with Publisher("clip1080p30.mp4", srv.url("cam0")):       # PyAV, no ffmpeg tool needed
            ...  # clients read srv.url("cam0") = rtmp://127.0.0.1:PORT/live/cam0

The nginx config names the module by absolute path (``load_module ROOT/usr/lib/nginx/modules/
ngx_rtmp_module.so``) and the tree's library folders go on ``LD_LIBRARY_PATH`` only when ``ldd``
finds one of nginx's libraries missing on the host (see :class:`live.servers.NginxRtmp`).
A ``.deb`` is an ``ar`` archive whose ``data.tar.*`` member holds the files; this reads it with the
standard library (``tarfile`` handles xz, gz and bz2; zstd members need ``zstd`` on the PATH).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

__all__ = ["unpack_deb", "unpack_debs"]


def _ar_members(data: bytes):
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive (.deb)")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        yield name, data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)


def unpack_deb(deb: str | os.PathLike, root: str | os.PathLike) -> None:
    """Extract the files of one ``.deb`` under ``root`` (what ``dpkg -x deb root`` does)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for name, payload in _ar_members(Path(deb).read_bytes()):
        if not name.startswith("data.tar"):
            continue
        if name.endswith(".zst"):
            payload = subprocess.run([shutil.which("zstd") or "zstd", "-dc"], input=payload,
                                     capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tar:
            tar.extractall(root, filter="tar")  # keeps the package's relative symlinks
        return
    raise ValueError(f"{deb}: no data.tar member")


def unpack_debs(folder: str | os.PathLike, root: str | os.PathLike) -> Path:
    """Unpack every ``*.deb`` in ``folder`` under ``root``; return ``root``."""
    debs = sorted(Path(folder).glob("*.deb"))
    if not debs:
        raise FileNotFoundError(f"no .deb files in {folder}")
    for deb in debs:
        unpack_deb(deb, root)
    return Path(root)
