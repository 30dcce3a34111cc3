"""PreviewHub on its own: latest frame only, no encoding without a watcher, rate limit, JPEGs
decoded by OpenCV match the pushed frames, close wakes watchers."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from preview.mjpeg import decode, solid, wait_for
from vidpipe.errors import ConfigError
from vidpipe.preview import PreviewHub


def test_push_without_watchers_encodes_nothing() -> None:
    with PreviewHub() as hub:
        for i in range(50):
            hub.push(3, solid((i, 0, 0)))
        assert hub.streams() == (3,)
        assert not hub.watching(3)
        assert hub._thread is None  # no worker until someone watches
        assert hub.report()["encoded"] == 0


def test_snapshot_is_the_latest_frame() -> None:
    with PreviewHub(max_width=None) as hub:
        hub.push(0, solid((10, 20, 30)))
        hub.push(0, solid((200, 40, 90)))  # replaces the first
        jpeg, _ = hub.snapshot(0, timeout=5)
        rgb = decode(jpeg)
        assert rgb.shape == (360, 640, 3)
        assert np.abs(rgb.reshape(-1, 3).mean(0) - (200, 40, 90)).max() < 4
        assert hub.report()["jpeg"] == ["cpu"]


def test_downscaled_to_max_width_keeping_aspect() -> None:
    with PreviewHub(max_width=320) as hub:
        hub.push(0, solid((0, 128, 255), 720, 1280))
        rgb = decode(hub.snapshot(0, timeout=5)[0])
        assert rgb.shape == (180, 320, 3)
        assert np.abs(rgb.reshape(-1, 3).mean(0) - (0, 128, 255)).max() < 4


def test_watcher_gets_newer_frames_at_most_max_fps() -> None:
    with PreviewHub(max_fps=5) as hub:
        stop = threading.Event()

        def producer() -> None:
            i = 0
            while not stop.is_set():
                hub.push(0, solid((i % 256, 0, 0), 96, 160))
                i += 1
                time.sleep(0.005)

        t = threading.Thread(target=producer, daemon=True)
        t.start()
        try:
            with hub.watch(0) as w:
                assert hub.watching(0)
                got, t0 = 0, time.monotonic()
                while time.monotonic() - t0 < 1.2:
                    if w.next(timeout=0.5) is not None:
                        got += 1
            assert not hub.watching(0)
        finally:
            stop.set()
            t.join(5)
        assert 1 <= got <= 8, got  # at most 5 a second over 1.2 s (the first at once)


def test_close_wakes_a_waiting_watcher() -> None:
    hub = PreviewHub()
    out: list = []
    with hub.watch(0) as w:
        t = threading.Thread(target=lambda: out.append(w.next(timeout=30)), daemon=True)
        t.start()
        time.sleep(0.1)
        t0 = time.monotonic()
        hub.close()
        t.join(5)
    assert out == [None] and time.monotonic() - t0 < 10  # woken, not timed out after 30 s
    hub.push(0, solid((1, 2, 3)))  # ignored after close
    assert hub.streams() == ()


def test_a_failed_encode_is_counted_not_retried(monkeypatch) -> None:
    import vidpipe.preview.jpeg as jpeg

    real, calls = jpeg.encode_jpeg, []

    def first_fails(image, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("encoder failure")
        return real(image, **kw)

    monkeypatch.setattr(jpeg, "encode_jpeg", first_fails)
    with PreviewHub() as hub:
        with hub.watch(0) as w:
            hub.push(0, solid((9, 9, 9), 16, 16))
            assert wait_for(lambda: hub.report()["errors"] == 1)
            time.sleep(0.3)
            assert len(calls) == 1  # that frame is not tried again
            hub.push(0, solid((9, 9, 9), 16, 16))
            assert w.next(timeout=5) is not None
        assert hub.report()["errors"] == 1


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [({"max_fps": 0}, "max_fps=0"), ({"max_width": 8}, "max_width=8"), ({"quality": 101}, "quality=101")],
)
def test_bad_options(kwargs: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        PreviewHub(**kwargs)


def test_push_checks_the_image() -> None:
    import torch

    with PreviewHub() as hub:
        for bad in (torch.zeros(4, 8, 8, dtype=torch.uint8), torch.zeros(3, 0, 8, dtype=torch.uint8),
                    torch.zeros(3, 8, 8)):
            with pytest.raises(ValueError, match=r"\(3, H, W\) uint8"):
                hub.push(0, bad)
