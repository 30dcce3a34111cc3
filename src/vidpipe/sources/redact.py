"""Credentials never leave the process: URLs are shown with their user and password replaced.

``rtsp://admin:secret@10.0.0.5:554/stream`` is shown as ``rtsp://***@10.0.0.5:554/stream``
everywhere vidpipe writes a source's name (logs, exceptions, tables, metadata, metric labels).
Query parameters that commonly carry secrets (``password``, ``passphrase``, ``token``, ...) and
HTTP/RTSP ``Authorization`` headers (which FFmpeg's RTSP client logs at its trace level, Base64
``user:password``) are masked too.

Where each rule is applied:

- :func:`redact_text` / :func:`redact_url`: by vidpipe wherever it formats a location (the
  redacted :attr:`vidpipe.sources.SourceSpec.name` and ``StreamInfo.source``; the raw URL is kept
  only to open it: ``StreamInfo.location``), and by :class:`vidpipe.errors.VidpipeError` on every
  message it is constructed with.
- :func:`redacted_cause`: an exception from PyAV names the URL it failed on (``str(exc)`` ends in
  ``: 'rtsp://user:pw@...'``); vidpipe chains a redacted stand-in instead of it.
- :class:`RedactingFilter`: on log handlers (the CLI installs it on its handler), it masks the
  message, its arguments and the formatted traceback of a record.
- :func:`guard_ffmpeg_logs`: FFmpeg's own messages reach Python logging only when someone turns
  PyAV's logging on (``av.logging.set_level``; vidpipe never does), as records of the loggers
  ``libav.<FFmpeg component>``. When vidpipe opens a URL it adds one shared
  :class:`RedactingFilter` to those loggers (the network protocols and demuxers that handle
  URLs). Nothing happens at import; it only masks text, never drops a record or changes a level.
"""

from __future__ import annotations

import logging
import re

__all__ = ["redact_url", "redact_text", "redacted_cause", "RedactingFilter", "guard_ffmpeg_logs", "RedactedError"]

# scheme://user[:password]@  (user info ends at the first "@" before the host's "/")
# (greedy up to the last "@" before the path: an unencoded "@" in a password is masked too)
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<userinfo>[^/\s]+)@")
_SECRET_QUERY = re.compile(
    r"(?P<key>[?&;](?:password|passwd|pass|pwd|passphrase|token|access_token|auth|key|secret|sig|signature)=)"
    r"(?P<value>[^&;#\s]*)",
    re.IGNORECASE,
)
# "Authorization: Basic dXNlcjpwdw==" / "Proxy-Authorization: Digest username=..., response=..."
_AUTH_HEADER = re.compile(r"(?P<key>\b(?:proxy-)?authorization\s*[:=]\s*)(?P<value>[^\r\n]*)", re.IGNORECASE)


def redact_text(text: str) -> str:
    """``text`` with the user info of every URL in it, secret query values and ``Authorization``
    header values masked (``***``)."""
    if "://" not in text and "=" not in text and "uthorization" not in text.lower():
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}***@", text)
    text = _SECRET_QUERY.sub(lambda m: f"{m['key']}***", text)
    return _AUTH_HEADER.sub(lambda m: f"{m['key']}***", text)


def redact_url(url: str) -> str:
    """``url`` safe to show: ``scheme://***@host/path`` when it carries credentials.

    Paths without ``://`` are returned unchanged.
    """
    return redact_text(url)


class RedactedError(Exception):
    """Stands in for an exception whose message carried credentials: same traceback, the
    original type's name and the redacted message."""


def redacted_cause(exc: BaseException) -> BaseException:
    """``exc`` itself when its message carries no credentials, else a :class:`RedactedError`
    with its redacted message and its traceback (to chain with ``raise ... from``)."""
    text = str(exc)
    clean = redact_text(text)
    if clean == text and redact_text(repr(exc)) == repr(exc):
        return exc
    stand_in = RedactedError(f"{type(exc).__module__}.{type(exc).__qualname__}: {clean}")
    return stand_in.with_traceback(exc.__traceback__)


class RedactingFilter(logging.Filter):
    """A logging filter that masks credentials in a record's message, arguments, traceback and
    stack (it never drops a record)."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not ours to break
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # formatted here, redacted; Formatter.format() then uses exc_text as it is
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


#: the FFmpeg components (``AVClass`` item names) that see URLs: protocols and network demuxers
FFMPEG_URL_LOGGERS: tuple[str, ...] = tuple(
    f"libav.{name}"
    for name in (
        "generic", "AVFormatContext", "AVIOContext", "URLContext", "tcp", "udp", "tls", "http", "https",
        "httpproxy", "crypto", "rtsp", "rtsps", "rtp", "srtp", "sdp", "rtmp", "rtmps", "rtmpt", "rtmpts",
        "rtmpe", "ffrtmphttp", "ffrtmpcrypt", "srt", "libsrt", "hls", "dash", "mpegts", "flv", "live_flv",
        "tee", "concat", "subfile", "file", "unix", "ftp", "icecast",
    )
)
_FFMPEG_FILTER = RedactingFilter()


def guard_ffmpeg_logs() -> None:
    """Add one shared :class:`RedactingFilter` to the ``libav`` loggers that see URLs
    (:data:`FFMPEG_URL_LOGGERS`); idempotent (``addFilter`` ignores a filter already there)."""
    for name in ("libav", *FFMPEG_URL_LOGGERS):
        logging.getLogger(name).addFilter(_FFMPEG_FILTER)
