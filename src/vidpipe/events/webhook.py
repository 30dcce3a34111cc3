"""Events to an HTTP webhook: JSON POSTs from a background thread (:class:`WebhookSink`).

Each POST's body is a JSON **list** of events (``Event.to_dict()``: ``kind, name, stream_id,
source, frame, pts, time`` (UTC epoch seconds), ``track_id, class_id, class_name, direction,
dwell_s``), ``Content-Type: application/json``. Events are sent in batches: a POST when
``batch_size`` events are waiting, or ``interval_s`` after the first of them (0.5 s).

Failures never reach the pipeline: a connection error, a timeout (``timeout_s`` for the connect
and for each read), a 5xx, 408 or 429 answer is retried with exponential back-off (0.25 s
doubling to 5 s) for up to ``retry_for_s`` seconds per batch, then the batch is counted
``failed``; another 4xx (or a redirect, never followed) fails the batch at once. While a batch
is retried, new events wait in the bounded queue (``queue_size``); when it is full, new events
are dropped and counted. Closing flushes the queue within ``close_timeout_s``.

Credentials: a URL's user and password (``https://user:pass@host/hook``) are sent as HTTP Basic
authorisation, never in the URL; ``headers`` (e.g. ``{"Authorization": "Bearer ..."}``) are
sent as given. Neither appears in any log, error or statistic: the URL is shown as
``https://***@host/hook``.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from vidpipe._validate import check_range
from vidpipe.errors import ConfigError
from vidpipe.events._push import PushSink, RateLimitedLog
from vidpipe.sources.redact import redact_text, redact_url
from vidpipe.summary import jsonable, redacted

__all__ = ["WebhookSink", "split_credentials"]

logger = logging.getLogger(__name__)

RETRY_MIN_S, RETRY_MAX_S = 0.25, 5.0
ERROR_LOG_INTERVAL_S = 30.0
_RETRY_STATUS = frozenset({408, 429})


def split_credentials(url: str) -> tuple[str, str | None]:
    """``(url without user info, "Basic ..." header value or None)``.

    Raises:
        ConfigError: not an ``http(s)://host...`` URL.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"webhook URL {redact_url(url)!r}: expected http://HOST[:PORT]/PATH or https://...")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise ConfigError(f"webhook URL {redact_url(url)!r}: bad port ({exc})") from None
    auth = None
    if parts.username is not None or parts.password is not None:
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), auth


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error (never re-send events, or credentials, somewhere else)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class WebhookSink(PushSink):
    """POSTs the events of the results it is given to ``url`` (see the module docstring).

    Args:
        url: ``http(s)://[user:password@]host[:port]/path``.
        headers: more request headers (``Authorization``, ...); their values are never logged.
        batch_size: most events per POST.
        interval_s: longest wait for a batch to fill after its first event.
        timeout_s: socket timeout of the connect and of each read.
        retry_for_s: how long one batch is retried before it counts as failed.
        queue_size: most events waiting; more are dropped (counted).
        close_timeout_s: how long closing waits for the queue to be delivered.

    Raises:
        ConfigError: a bad URL or option.
    """

    kind = "webhook"
    logger = logger

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        batch_size: int = 100,
        interval_s: float = 0.5,
        timeout_s: float = 5.0,
        retry_for_s: float = 30.0,
        queue_size: int = 10000,
        close_timeout_s: float = 10.0,
    ) -> None:
        if not isinstance(url, str):
            raise ConfigError(f"webhook url must be a string, got {type(url).__name__}")
        self._url, auth = split_credentials(url)
        self._shown = redact_url(url)
        super().__init__(queue_size=queue_size, close_timeout_s=close_timeout_s)
        self.batch_size = check_range("batch_size", batch_size, low=1, integer=True)
        self.interval_s = float(check_range("interval_s", interval_s, low=0.0))
        self.timeout_s = float(check_range("timeout_s", timeout_s, low=0.001))
        self.retry_for_s = float(check_range("retry_for_s", retry_for_s, low=0.0))
        self._headers = {"Content-Type": "application/json", "User-Agent": _user_agent()}
        if auth is not None:
            self._headers["Authorization"] = auth
        for k, v in (headers or {}).items():
            if not isinstance(k, str) or not isinstance(v, str) or "\n" in k + v or "\r" in k + v:
                raise ConfigError(f"webhook {self._shown}: header {redact_text(str(k))!r} must be text on one line")
            self._headers[k] = v
        self._opener = urllib.request.build_opener(_NoRedirect)
        self._error_log = RateLimitedLog(logger, ERROR_LOG_INTERVAL_S)
        self.requests = 0
        self._start()

    @property
    def target(self) -> str:
        return self._shown

    @property
    def stats(self) -> dict[str, Any]:
        out = super().stats
        out["posted"] = out["delivered"]
        out["requests"] = self.requests
        return out

    def _work(self) -> None:
        while True:
            batch = self._take(self.batch_size, linger_s=self.interval_s)
            if not batch:
                return
            rows = [redacted(jsonable(e.to_dict())) for e in batch]  # NaN -> null; a source's credentials masked
            body = json.dumps(rows, ensure_ascii=False).encode("utf-8")
            ok = self._post(body, len(batch))
            if ok is None:
                return  # closing gave up on it: the batch (still in flight) counts undelivered
            self._count(len(batch), "delivered" if ok else "failed")

    def _post(self, body: bytes, n: int) -> bool | None:
        """POST ``body`` with retries; True once answered 2xx, False when failed, None when the
        close's wait ran out first."""
        start, delay = time.monotonic(), RETRY_MIN_S
        while True:
            retry, why = self._post_once(body)
            if why is None:
                return True
            if not retry:
                self._error_log(logging.WARNING, "webhook %s: %d events not accepted: %s", self._shown, n, why)
                return False
            if time.monotonic() - start + delay > self.retry_for_s:
                self._error_log(logging.WARNING, "webhook %s: %d events failed after retrying for %.0f s: %s",
                                self._shown, n, time.monotonic() - start, why)
                return False
            self._error_log(logging.WARNING, "webhook %s: %s; retrying (for up to %.0f s per batch)", self._shown,
                            why, self.retry_for_s)
            if self._wait(delay):
                return None
            delay = min(delay * 2, RETRY_MAX_S)

    def _post_once(self, body: bytes) -> tuple[bool, str | None]:
        """One POST: ``(retry?, None when accepted else why)`` (``why`` redacted)."""
        self.requests += 1
        request = urllib.request.Request(self._url, data=body, headers=self._headers, method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                response.read(65536)
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
            exc.close()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return True, redact_text(f"cannot reach it ({type(exc).__name__}: {reason})")
        except Exception as exc:  # noqa: BLE001 - http.client's protocol errors: a broken server
            return True, redact_text(f"bad answer ({type(exc).__name__}: {exc})")
        if 200 <= status < 300:
            return False, None
        retry = status >= 500 or status in _RETRY_STATUS
        return retry, f"HTTP {status}"

    def _stop_grace_s(self) -> float:
        return self.timeout_s + 1.0


def _user_agent() -> str:
    from vidpipe.summary import vidpipe_version

    return f"vidpipe/{vidpipe_version()}"
