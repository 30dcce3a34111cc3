"""WebhookSink against a real HTTP server on loopback: delivery, batching, a server down then
back, 500 then 200, a slow server (the pipeline never waits), no credential in any log."""

from __future__ import annotations

import base64
import logging
import time

import pytest

from events.event_helpers import make_event, result_with
from events.http_receiver import Receiver, free_port
from vidpipe.errors import ConfigError
from vidpipe.events import WebhookSink


@pytest.fixture(scope="module")
def server():
    srv = Receiver().start()
    yield srv
    srv.close()


@pytest.fixture
def receiver(server):
    server.posts.clear()
    server.answers.clear()
    server.delay_s = 0.0
    return server


def _results(n: int, start: int = 0):
    return [result_with([make_event(i)], index=i) for i in range(start, start + n)]


def test_delivers_every_event_as_json_lists_in_batches(receiver):
    sink = WebhookSink(receiver.url(), batch_size=4, interval_s=0.2)
    sink.write(_results(10))
    got = receiver.wait_events(10)
    assert [e["frame"] for e in got] == list(range(10))
    assert got[0] == make_event(0).to_dict()  # exactly the Event's fields
    sizes = [len(b) for _, b in receiver.posts]
    assert max(sizes) <= 4 and len(sizes) >= 3  # batched, at most batch_size per POST
    assert receiver.posts[0][0]["Content-Type"] == "application/json"
    sink.close()
    st = sink.stats
    assert (st["accepted"], st["posted"], st["dropped"], st["failed"], st["undelivered"]) == (10, 10, 0, 0, 0)


def test_interval_batches_events_that_trickle_in(receiver):
    sink = WebhookSink(receiver.url(), batch_size=1000, interval_s=0.5)
    for i in range(5):
        sink.write(_results(1, i))
        time.sleep(0.02)
    receiver.wait_events(5)
    assert len(receiver.posts) == 1  # all within the first event's 0.5 s: one POST
    sink.close()


def test_500_then_200_is_retried(receiver):
    receiver.answers[:] = [500, 503]
    sink = WebhookSink(receiver.url(), interval_s=0.0)
    sink.write(_results(3))
    assert [e["frame"] for e in receiver.wait_events(3)] == [0, 1, 2]
    sink.close()
    assert sink.stats["posted"] == 3 and sink.stats["requests"] == 3


def test_4xx_is_not_retried_and_counted_failed(receiver):
    receiver.answers[:] = [404]
    sink = WebhookSink(receiver.url(), interval_s=0.0)
    sink.write(_results(2))
    sink.close()
    assert sink.stats["failed"] == 2 and sink.stats["requests"] == 1 and receiver.events == []


def test_server_down_then_back(caplog):
    port = free_port()
    sink = WebhookSink(f"http://127.0.0.1:{port}/hook", interval_s=0.0, timeout_s=1.0)
    with caplog.at_level(logging.WARNING, logger="vidpipe.events"):
        sink.write(_results(3))
        time.sleep(1.0)  # a few refused connections, retried
        later = Receiver(port).start()
        try:
            sink.write(_results(2, 3))
            assert sorted(e["frame"] for e in later.wait_events(5, timeout=15)) == [0, 1, 2, 3, 4]
            sink.close()
        finally:
            later.close()
    assert sink.stats["posted"] == 5
    assert "retrying" in caplog.text


def test_slow_server_never_blocks_the_pipeline_and_drops_are_counted(receiver, caplog):
    receiver.delay_s = 1.5
    sink = WebhookSink(receiver.url(), batch_size=5, interval_s=0.0, queue_size=20, close_timeout_s=0.5,
                       timeout_s=5.0)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="vidpipe.events"):
        for i in range(50):
            sink.write(_results(1, i))
        took = time.monotonic() - t0
        assert took < 0.5, f"write() waited for the server ({took:.2f} s)"
        t1 = time.monotonic()
        sink.close()
    assert time.monotonic() - t1 < 0.5 + 5.0 + 2.0  # the close's wait is bounded
    st = sink.stats
    assert st["dropped"] == 30 and st["accepted"] == 20
    assert st["posted"] + st["failed"] + st["undelivered"] == 20 and st["undelivered"] > 0
    assert caplog.text.count("dropped so far") == 1  # logged once, then at a slow rate


def test_basic_auth_from_url_and_no_credentials_in_logs(receiver, caplog):
    sink = WebhookSink(receiver.url(auth="bob:s%40cret"), headers={"X-Token": "tok-123"}, interval_s=0.0)
    with caplog.at_level(logging.DEBUG):
        receiver.answers[:] = [500]
        sink.write([result_with([make_event(0, source="rtsp://cam:camPW1@10.0.0.5/live")])])
        (got,) = receiver.wait_events(1)
        sink.close()
    headers = receiver.posts[0][0]
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"bob:s@cret").decode()
    assert headers["X-Token"] == "tok-123"
    text = caplog.text + repr(sink) + str(sink.stats)
    assert "s%40cret" not in text and "s@cret" not in text and "tok-123" not in text
    assert "http://***@127.0.0.1" in text
    assert got["source"] == "rtsp://***@10.0.0.5/live"  # even a stage's unmasked source never goes out


def test_abort_flushes_for_a_short_bounded_time():
    sink = WebhookSink(f"http://127.0.0.1:{free_port()}/hook", interval_s=0.0, close_timeout_s=10.0)
    sink.write(_results(4))
    t0 = time.monotonic()
    sink.abort("interrupted (SIGINT)")
    assert time.monotonic() - t0 < 4.0  # 2 s at most after an interrupt, not the 10 s of a close
    assert sink.stats["undelivered"] == 4 and sink.stats["posted"] == 0


def test_nan_values_are_sent_as_null(receiver):
    sink = WebhookSink(receiver.url(), interval_s=0.0)
    sink.write([result_with([make_event(0, pts=float("nan"), dwell_s=float("inf"))])])
    (got,) = receiver.wait_events(1)
    sink.close()
    assert got["pts"] is None and got["dwell_s"] is None and sink.stats["posted"] == 1


def test_bad_url():
    with pytest.raises(ConfigError, match="webhook URL"):
        WebhookSink("ftp://user:pw@host/x")
    with pytest.raises(ConfigError) as info:
        WebhookSink("http://user:pw@host:99999/x")
    assert "pw" not in str(info.value)
