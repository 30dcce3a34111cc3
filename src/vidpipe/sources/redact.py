"""Credentials never leave the process: URLs are shown with their user and password replaced.

``rtsp://admin:secret@10.0.0.5:554/stream`` is shown as ``rtsp://***@10.0.0.5:554/stream``
everywhere vidpipe writes a source's name (logs, exceptions, tables, metadata, metric labels).
Query parameters that commonly carry secrets (``password``, ``passphrase``, ``token``, ...) are
masked too. :class:`RedactingFilter` applies the same rule to log records, including FFmpeg's own
messages routed through Python logging by PyAV.
"""

from __future__ import annotations

import logging
import re

__all__ = ["redact_url", "redact_text", "RedactingFilter"]

# scheme://user[:password]@  (user info ends at the first "@" before the host's "/")
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<userinfo>[^/@\s]+)@")
_SECRET_QUERY = re.compile(
    r"(?P<key>[?&;](?:password|passwd|pass|pwd|passphrase|token|access_token|auth|key|secret|sig|signature)=)"
    r"(?P<value>[^&;#\s]*)",
    re.IGNORECASE,
)


def redact_text(text: str) -> str:
    """``text`` with the user info of every URL in it and secret query values masked."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}***@", text)
    return _SECRET_QUERY.sub(lambda m: f"{m['key']}***", text)


def redact_url(url: str) -> str:
    """``url`` safe to show: ``scheme://***@host/path`` when it carries credentials.

    Paths without ``://`` are returned unchanged.
    """
    return redact_text(url)


class RedactingFilter(logging.Filter):
    """A logging filter that masks credentials in a record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not ours to break
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
