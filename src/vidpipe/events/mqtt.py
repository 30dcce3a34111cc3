"""Events to an MQTT broker (:class:`MqttSink`, needs ``pip install vidpipe[mqtt]``: paho-mqtt).

URL: ``mqtt://[user:password@]host[:port]/topic/prefix`` (port 1883), or ``mqtts://`` for TLS
(port 8883, the system's CA certificates). Each event is one message, its JSON
``Event.to_dict()`` (``time`` in UTC epoch seconds), QoS 1, not retained, on the topic::

    <prefix>/<stream_id>/<kind>          e.g.  vidpipe/0/cross, shop/2/enter

(``prefix`` is the URL's path without its slashes at the ends, ``vidpipe`` when empty; subscribe
to ``<prefix>/#`` for everything, ``<prefix>/+/cross`` for line crossings of every stream).

A background thread takes events from a bounded queue (``queue_size``; events that do not fit
are dropped and counted) and hands them to paho's client, whose own thread connects, reconnects
(1 to 5 s apart) after the broker goes away and re-sends unacknowledged messages. ``delivered``
counts the messages the broker acknowledged (PUBACK). Closing waits up to ``close_timeout_s`` for
the queue to be published and acknowledged, then disconnects cleanly. The password never appears
in a log, error or statistic (the URL is shown as ``mqtt://***@host:port/prefix``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from vidpipe.errors import ConfigError
from vidpipe.events._push import PushSink, RateLimitedLog
from vidpipe.sources.redact import redact_text, redact_url
from vidpipe.summary import jsonable, redacted

__all__ = ["MqttSink", "parse_mqtt_url", "topic_of"]

logger = logging.getLogger(__name__)

LOG_INTERVAL_S = 30.0
_PAHO_QUEUE = 1000  # messages handed to paho and not yet acknowledged (in flight or waiting to be sent)


def parse_mqtt_url(url: str) -> dict[str, Any]:
    """``{"host", "port", "tls", "username", "password", "prefix"}`` of an MQTT URL.

    Raises:
        ConfigError: not ``mqtt(s)://host[:port]/prefix``, or wildcards in the prefix.
    """
    shown = redact_url(url) if isinstance(url, str) else repr(url)
    if not isinstance(url, str):
        raise ConfigError(f"MQTT URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise ConfigError(f"MQTT URL {shown!r}: expected mqtt://HOST[:PORT]/TOPIC-PREFIX (mqtts:// for TLS; "
                          "a user and password go before HOST, as in any URL)")
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"MQTT URL {shown!r}: bad port ({exc})") from None
    prefix = unquote(parts.path).strip("/") or "vidpipe"
    if any(c in prefix for c in "+#\x00") or "//" in prefix:
        raise ConfigError(f"MQTT URL {shown!r}: the topic prefix {prefix!r} may not hold +, # or empty levels")
    if parts.query or parts.fragment or "#" in url or "?" in url:
        raise ConfigError(f"MQTT URL {shown!r}: no ?query or #fragment expected")
    return {
        "host": parts.hostname,
        "port": port if port is not None else (8883 if scheme == "mqtts" else 1883),
        "tls": scheme == "mqtts",
        "username": None if parts.username is None else unquote(parts.username),
        "password": None if parts.password is None else unquote(parts.password),
        "prefix": prefix,
    }


def topic_of(prefix: str, stream_id: int, kind: str) -> str:
    """``<prefix>/<stream_id>/<kind>``."""
    return f"{prefix}/{int(stream_id)}/{kind}"


class MqttSink(PushSink):
    """Publishes each event of the results it is given (see the module docstring).

    Args:
        url: ``mqtt(s)://[user:password@]host[:port]/topic-prefix``.
        qos: 0, 1 (default) or 2.
        client_id: the MQTT client id (default ``vidpipe-<pid>-<random>``).
        keepalive_s: MQTT keep-alive.
        queue_size: most events waiting; more are dropped (counted).
        close_timeout_s: how long closing waits for the queue to be acknowledged.

    Raises:
        ConfigError: a bad URL or option, or paho-mqtt is not installed.
    """

    kind = "mqtt"
    logger = logger

    def __init__(
        self,
        url: str,
        *,
        qos: int = 1,
        client_id: str | None = None,
        keepalive_s: int = 30,
        queue_size: int = 10000,
        close_timeout_s: float = 10.0,
    ) -> None:
        cfg = parse_mqtt_url(url)
        self._shown = redact_url(url)
        if qos not in (0, 1, 2):
            raise ConfigError(f"qos must be 0, 1 or 2, got {qos!r}")
        try:
            import paho.mqtt.client as mqtt
        except ImportError:
            raise ConfigError(
                "MQTT output needs paho-mqtt: pip install 'vidpipe[mqtt]' (or pip install paho-mqtt)"
            ) from None
        super().__init__(queue_size=queue_size, close_timeout_s=close_timeout_s)
        self.qos = qos
        self.prefix = cfg["prefix"]
        self._mqtt = mqtt
        self._acked = threading.Condition()
        self._pending: set[int] = set()  # mids handed to paho, not yet acknowledged
        self._early: set[int] = set()  # mids acknowledged before publish() returned
        self._connected = threading.Event()
        self._connects = 0
        self._conn_log = RateLimitedLog(logger, LOG_INTERVAL_S)
        cid = client_id or f"vidpipe-{os.getpid()}-{os.urandom(4).hex()}"
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, clean_session=True)
        if cfg["username"] is not None:
            client.username_pw_set(cfg["username"], cfg["password"])
        if cfg["tls"]:
            client.tls_set()
        client.reconnect_delay_set(min_delay=1, max_delay=5)
        client.max_queued_messages_set(_PAHO_QUEUE)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_connect_fail = self._on_connect_fail
        self._client = client
        client.connect_async(cfg["host"], cfg["port"], keepalive=int(keepalive_s))
        client.loop_start()  # paho's network thread: connects, reconnects, re-sends
        self._start()

    @property
    def target(self) -> str:
        return self._shown

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def stats(self) -> dict[str, Any]:
        out = super().stats
        out["published"] = out["delivered"]
        out["connects"] = self._connects
        return out

    # ------------------------------------------------------------------ paho's thread
    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any = None) -> None:
        if getattr(reason_code, "is_failure", False):
            self._conn_log(logging.WARNING, "mqtt %s: the broker refused the connection (%s); retrying",
                           self._shown, redact_text(str(reason_code)))
            return
        self._connects += 1
        self._connected.set()
        logger.info("mqtt %s: %s", self._shown, "connected" if self._connects == 1 else "reconnected")

    def _on_connect_fail(self, client: Any, userdata: Any) -> None:
        self._conn_log(logging.WARNING, "mqtt %s: cannot connect to the broker; retrying (events are queued "
                       "meanwhile)", self._shown)

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any = None) -> None:
        was = self._connected.is_set()
        self._connected.clear()
        if was and not self._closing:
            self._conn_log(logging.WARNING, "mqtt %s: disconnected (%s); reconnecting, events are queued meanwhile",
                           self._shown, redact_text(str(reason_code)))

    def _on_publish(
        self, client: Any, userdata: Any, mid: int, reason_code: Any = None, properties: Any = None
    ) -> None:
        # (paho holds its message lock here: never call into the client while holding ours)
        with self._acked:
            if mid in self._pending:
                self._pending.discard(mid)
                self._count(1, "delivered")
            else:  # acknowledged before publish() returned to _work
                self._early.add(mid)
            self._acked.notify_all()

    # ------------------------------------------------------------------ our thread
    def _work(self) -> None:
        mqtt = self._mqtt
        while True:
            batch = self._take(100, linger_s=0.0)
            if not batch:
                return
            for event in batch:
                payload = json.dumps(redacted(jsonable(event.to_dict())), ensure_ascii=False)  # NaN -> null
                topic = topic_of(self.prefix, event.stream_id, event.kind)
                while True:
                    info = self._client.publish(topic, payload, qos=self.qos)
                    if info.rc != mqtt.MQTT_ERR_QUEUE_SIZE:
                        break
                    if self._wait(0.05):  # paho's queue is full (broker away): wait for room
                        return  # closing gave up: the rest of the batch counts undelivered
                if self.qos == 0 and info.rc != mqtt.MQTT_ERR_SUCCESS:
                    self._count(1, "failed")  # QoS 0 is not kept for a reconnect
                    continue
                with self._acked:
                    if info.mid in self._early:
                        self._early.discard(info.mid)
                        self._count(1, "delivered")
                    else:
                        self._pending.add(info.mid)

    def _stop(self) -> None:
        """Wait (until the close's deadline) for the broker to acknowledge what was handed to
        paho, then disconnect cleanly; what is still unacknowledged counts undelivered."""
        with self._acked:
            while self._pending and not self._give_up.is_set():
                left = self._deadline - time.monotonic()
                if left <= 0:
                    break
                self._acked.wait(min(0.1, left))
            self._pending.clear()
        try:
            self._client.disconnect()
        except Exception:  # noqa: BLE001 - best effort at the end
            pass
        self._client.loop_stop()
