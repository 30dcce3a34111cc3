"""MqttSink against a real broker (Debian's mosquitto on a free loopback port) and a real
subscriber (paho): topics and payloads, a broker restart mid-run, username/password, no
password in any log. Skips without mosquitto or paho-mqtt, fails under CI=true (.ci/run
installs them)."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from events.event_helpers import make_event, result_with
from live.mosquitto import Mosquitto, log_of, mosquitto_missing_reason, paho_missing_reason
from live.need import require
from vidpipe.errors import ConfigError

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    require(mosquitto_missing_reason())
    require(paho_missing_reason())
    srv = Mosquitto(workdir=tmp_path_factory.mktemp("mosquitto"), users={"bob": "Sec:ret@9"})
    srv.start()
    yield srv
    srv.close()


class Subscriber:
    """A paho client subscribed (QoS 1) to ``topic``; ``persistent``: a session the broker keeps."""

    def __init__(self, port: int, topic: str, *, persistent: bool = False, user=("bob", "Sec:ret@9")) -> None:
        import paho.mqtt.client as mqtt

        self.messages: list[tuple[str, dict]] = []
        self.connects = 0
        self._cond = threading.Condition()
        self.subscribed = threading.Event()
        cid = f"test-sub-{time.monotonic_ns()}"
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, clean_session=not persistent)
        self.client.username_pw_set(*user)
        self.client.reconnect_delay_set(1, 2)
        self.topic = topic

        def on_connect(client, userdata, flags, rc, props=None):
            self.connects += 1
            client.subscribe(topic, qos=1)

        def on_subscribe(client, userdata, mid, rcs, props=None):
            self.subscribed.set()

        def on_message(client, userdata, msg):
            with self._cond:
                self.messages.append((msg.topic, json.loads(msg.payload)))
                self._cond.notify_all()

        self.client.on_connect, self.client.on_subscribe, self.client.on_message = on_connect, on_subscribe, on_message
        self.client.connect("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        assert self.subscribed.wait(10), "the subscriber did not subscribe within 10 s"

    def wait(self, n: int, timeout: float = 15.0) -> list[tuple[str, dict]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.messages)} of {n} messages within {timeout} s: {self.messages}")
                self._cond.wait(left)
            return list(self.messages)

    def wait_frames(self, frames: set[int], timeout: float = 20.0) -> set[int]:
        """Until every frame number in ``frames`` came (QoS 1 is at least once: duplicates may)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not frames <= (seen := {m["frame"] for _, m in self.messages}):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"frames {sorted(seen)} of {sorted(frames)} within {timeout} s")
                self._cond.wait(left)
            return seen

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _url(broker, prefix):
    return broker.url(prefix, user="bob", password="Sec:ret@9".replace(":", "%3A").replace("@", "%40"))


def test_publishes_each_event_as_json_on_prefix_stream_kind(broker, caplog):
    from vidpipe.events import MqttSink

    sub = Subscriber(broker.port, "shop/front/#")
    events = [make_event(0, kind="cross"), make_event(1, kind="enter", stream_id=1), make_event(2, kind="dwell"),
              make_event(3, kind="leave", stream_id=1)]
    with caplog.at_level(logging.DEBUG):
        sink = MqttSink(_url(broker, "/shop/front/"))
        sink.write([result_with(events[:2], index=0), result_with([], index=1), result_with(events[2:], index=2)])
        got = sub.wait(4)
        sink.close()
    sub.close()
    assert sorted(t for t, _ in got) == sorted(["shop/front/0/cross", "shop/front/1/enter", "shop/front/0/dwell",
                                                "shop/front/1/leave"])
    by_topic = dict(got)
    assert by_topic["shop/front/0/cross"] == events[0].to_dict()
    st = sink.stats
    assert (st["accepted"], st["published"], st["dropped"], st["undelivered"]) == (4, 4, 0, 0)
    assert "Sec" not in caplog.text and "ret%40" not in caplog.text and "mqtt://***@127.0.0.1" in caplog.text


def test_wrong_password_is_retried_quietly_and_never_shown(broker, caplog):
    from vidpipe.events import MqttSink

    with caplog.at_level(logging.DEBUG):
        sink = MqttSink(broker.url("x", user="bob", password="WrongPass77"), close_timeout_s=1.0)
        sink.write([result_with([make_event(0)])])
        time.sleep(1.5)
        t0 = time.monotonic()
        sink.close()
    assert time.monotonic() - t0 < 4.0
    st = sink.stats
    assert st["published"] == 0 and st["undelivered"] == 1
    assert "refused" in caplog.text
    assert "WrongPass77" not in caplog.text + repr(sink) + str(st) + log_of(broker)


def test_broker_restart_mid_run(tmp_path, caplog):
    from vidpipe.events import MqttSink

    require(mosquitto_missing_reason())
    require(paho_missing_reason())
    broker = Mosquitto(workdir=tmp_path / "broker", users={"bob": "Sec:ret@9"}).start()
    sub = None
    try:
        sub = Subscriber(broker.port, "cams/#", persistent=True)
        with caplog.at_level(logging.INFO, logger="vidpipe.events"):
            sink = MqttSink(_url(broker, "cams"))
            sink.write([result_with([make_event(i)], index=i) for i in range(3)])
            sub.wait(3)
            broker.stop(graceful=True)  # the broker goes away mid-run
            time.sleep(0.5)
            sink.write([result_with([make_event(i)], index=i) for i in range(3, 5)])  # queued meanwhile
            broker.start()
            sink.write([result_with([make_event(i)], index=i) for i in range(5, 8)])
            # the later events arrive, and those of the outage too (QoS 1: at least once)
            assert sub.wait_frames(set(range(8))) == set(range(8))
            sink.close()
        assert sink.stats["published"] == 8 and sink.stats["connects"] >= 2
        assert "reconnected" in caplog.text
    finally:
        if sub is not None:
            sub.close()
        broker.close()


def test_bad_urls():
    from vidpipe.events import MqttSink
    from vidpipe.events.mqtt import parse_mqtt_url

    assert parse_mqtt_url("mqtt://h")["prefix"] == "vidpipe" and parse_mqtt_url("mqtt://h")["port"] == 1883
    assert parse_mqtt_url("mqtts://u:p%40w@h/a/b")["password"] == "p@w"
    for bad in ("http://h/x", "mqtt:///x", "mqtt://h/a/+/b", "mqtt://h/a#"):
        with pytest.raises(ConfigError) as info:
            MqttSink(bad)
        assert "MQTT URL" in str(info.value)
    with pytest.raises(ConfigError) as info:
        MqttSink("mqtt://u:topsecret@h:99999/x")
    assert "topsecret" not in str(info.value)


def test_event_outputs_with_a_broker_that_comes_up_late(tmp_path, caplog):
    from vidpipe.events import EventOutputs

    require(mosquitto_missing_reason())
    require(paho_missing_reason())
    broker = Mosquitto(workdir=tmp_path / "late")  # anonymous; not started yet
    try:
        with caplog.at_level(logging.WARNING, logger="vidpipe.events"):
            outputs = EventOutputs(mqtt=broker.url("late"))
            outputs.write([result_with([make_event(0)], index=0), result_with([make_event(1)], index=1)])
            time.sleep(0.5)
            broker.start()
            stats = outputs.finish()  # flushes: waits (bounded) for the broker's acknowledgements
        assert stats["emitted"] == 2 and stats["mqtt"][0]["published"] == 2 and stats["mqtt"][0]["dropped"] == 0
        assert "cannot connect" in caplog.text
    finally:
        broker.close()


def test_cli_mqtt_flag_connects_and_exits_cleanly(broker, bikes_path, tmp_path):
    import subprocess
    import sys

    url = broker.url("cli", user="bob", password="Sec%3Aret%409")
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(bikes_path), "--device", "cpu", "--imgsz", "160",
                        "--max-frames", "4", "-o", str(tmp_path / "d.csv"), "--mqtt", url, "--debug"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "mqtt mqtt://***@127.0.0.1" in p.stdout and "0 published" in p.stdout
    assert "Sec" not in p.stdout + p.stderr
