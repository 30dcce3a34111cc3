"""Where a :class:`~vidpipe.encode.VideoWriter` writes: a file by its extension, or a live URL.

- Files: the container from the extension (``.mp4``, ``.mov``, ``.m4v``, ``.mkv``, ``.webm``,
  ``.flv``, ``.ts``, ``.avi``, ...). MP4/MOV are written **fragmented**
  (``movflags=frag_keyframe+empty_moov+default_base_moof``, ``flush_packets=1``): each GOP goes to
  the file as a self-contained fragment as soon as the next keyframe starts, so a run killed
  with SIGKILL leaves a playable file of every finished fragment.
- ``rtmp://`` / ``rtmps://``: published as FLV, low latency (``tune=zerolatency``, a keyframe
  every 2 s), H.264 only (the FLV of RTMP servers carries no HEVC).
- ``rtsp://`` / ``rtsps://``: FFmpeg's RTSP muxer (ANNOUNCE + RECORD) over TCP.

Live targets open with a connection timeout (``timeout_s``); a server that refuses, or that
accepts and then says nothing, is a :class:`~vidpipe.errors.SinkError` within that time (RTMP:
:func:`rtmp_handshake` first, since FFmpeg's RTMP connection as PyAV opens it has no timeout).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from vidpipe.errors import ConfigError
from vidpipe.sources.redact import redact_url

__all__ = ["Target", "parse_target", "rtmp_handshake", "FRAGMENTED_MOVFLAGS"]

FRAGMENTED_MOVFLAGS = "frag_keyframe+empty_moov+default_base_moof"
_FILE_FORMATS = {
    ".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm", ".flv": "flv",
    ".ts": "mpegts", ".m2ts": "mpegts", ".avi": "avi", ".nut": "nut",
}
#: audio codecs each container takes as they are (others are transcoded to AAC); ``None``: ask FFmpeg
_AUDIO_COPY: dict[str, frozenset[str] | None] = {
    "mp4": frozenset({"aac", "mp3", "ac3", "eac3", "opus", "flac", "alac"}),
    "flv": frozenset({"aac", "mp3"}),  # FLV's G.711 ids exist, but RTMP servers and players want AAC
    "rtsp": frozenset({"aac"}),
    "webm": frozenset({"opus", "vorbis"}),
    "mpegts": frozenset({"aac", "mp3", "ac3", "eac3", "opus", "mp2"}),
}


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed output target.

    Attributes:
        location: what FFmpeg opens (the URL with its credentials, or the file's path).
        name: what is shown (credentials masked).
        format: FFmpeg's muxer name (``"mp4"``, ``"flv"``, ``"rtsp"``, ...).
        live: a network target (RTMP/RTSP) rather than a file.
        container_options: the muxer's options (fragmented MP4, RTSP over TCP, ...).
    """

    location: str
    name: str
    format: str
    live: bool
    container_options: tuple[tuple[str, str], ...]

    def audio_copyable(self, codec: str, supported: frozenset[str] | set[str] | None = None) -> bool:
        """Whether audio of ``codec`` can be copied into this container unchanged."""
        allowed = _AUDIO_COPY.get(self.format)
        if allowed is None:
            return supported is None or codec in supported
        return codec in allowed


def parse_target(target: str | os.PathLike, *, codec: str) -> Target:
    """Parse ``target`` (a file path or an ``rtmp://`` / ``rtsp://`` URL).

    Raises:
        ConfigError: an unknown extension or URL scheme, a folder, or HEVC to RTMP.
    """
    text = os.fspath(target)
    if not isinstance(text, str) or not text:
        raise ConfigError(f"target: expected a file path or an rtmp:// / rtsp:// URL, got {target!r}")
    lower = text.lower()
    name = redact_url(text)
    if "://" in lower:
        scheme = lower.split("://", 1)[0]
        if scheme in ("rtmp", "rtmps"):
            if codec not in ("libx264", "h264", "h264_nvenc"):
                raise ConfigError(f"target {name}: RTMP carries H.264 here; codec={codec!r} cannot be published "
                                  "(use codec='libx264')")
            return Target(text, name, "flv", True, (("flvflags", "no_duration_filesize"),))
        if scheme in ("rtsp", "rtsps"):
            return Target(text, name, "rtsp", True, (("rtsp_transport", "tcp"),))
        if scheme == "file":
            text = text.split("://", 1)[1]
            lower = text.lower()
        else:
            raise ConfigError(f"target {name}: unsupported URL scheme {scheme!r}; use a file path, rtmp:// or rtsp://")
    path = Path(text).expanduser()
    if text.endswith(("/", os.sep)) or path.is_dir():
        raise ConfigError(f"target {name}: is a folder; give a file name (out.mp4)")
    fmt = _FILE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError(f"target {name}: cannot tell the container from "
                          f"{('extension ' + repr(path.suffix)) if path.suffix else 'no extension'}; "
                          f"end it with one of {', '.join(sorted(_FILE_FORMATS))}")
    options: tuple[tuple[str, str], ...] = ()
    if fmt in ("mp4", "mov"):
        options = (("movflags", FRAGMENTED_MOVFLAGS), ("flush_packets", "1"))
    else:
        options = (("flush_packets", "1"),)
    return Target(str(path), name, fmt, False, options)


def rtmp_handshake(url: str, timeout_s: float) -> None:
    """Connect to ``url``'s RTMP server and do the first half of the RTMP handshake (send C0+C1,
    read S0+S1), each step within ``timeout_s``; then hang up.

    Raises:
        TimeoutError: no connection or no answer in time. ConnectionError / OSError: refused,
            reset, or an answer that is not RTMP's.
    """
    import os as _os
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme.lower() == "rtmps":
        return  # TLS first: FFmpeg's own connection is the check
    host, port = parts.hostname or "localhost", parts.port or 1935
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except socket.timeout:
        raise TimeoutError(f"no connection within {timeout_s:g} s") from None
    with sock:
        sock.settimeout(timeout_s)
        sock.sendall(b"\x03" + bytes(8) + _os.urandom(1528))  # C0 (version 3) + C1 (time, zero, random)
        got = b""
        try:
            while len(got) < 1537:
                chunk = sock.recv(1537 - len(got))
                if not chunk:
                    raise ConnectionError("the server closed the connection during the RTMP handshake")
                got += chunk
        except socket.timeout:
            raise TimeoutError(f"no answer within {timeout_s:g} s") from None
        if got[0] != 3:
            raise ConnectionError(f"not an RTMP server (handshake version {got[0]})")
