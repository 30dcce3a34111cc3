"""The pieces of ``vidpipe bench streams`` and ``bench soak`` against real components.

- :func:`build_real_clip`: the real street clip scaled and retimed, checked with PyAV (frame
  count, size, rate, no B-frames, keyframe interval).
- :class:`RtmpServer` + :func:`publish`: nginx-rtmp on loopback fed by the PyAV publisher, read
  back by PyAV (an independent client): frames decode at the clip's size and arrive at about the
  clip's rate (paced, not as fast as possible). Needs Debian's ``nginx`` and ``libnginx-mod-rtmp``:
  skipped locally without them, failed under ``CI=true`` (``.ci/run`` installs them).
- ``bench soak`` for a few seconds on the CPU: samples, drift and the report files.
"""

from __future__ import annotations

import time

import av

from vidpipe.bench.realclip import build_real_clip
from live.need import require_nginx




def test_real_clip_is_scaled_retimed_and_camera_like(tmp_path):
    path = build_real_clip(tmp_path, width=320, height=240, fps=30, frames=300, gop=15)
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        assert (s.width, s.height) == (320, 240)
        assert s.average_rate == 30
        keys, n = [], 0
        for p in c.demux(s):
            if p.size:
                if p.is_keyframe:
                    keys.append(n)
                n += 1
        assert s.codec_context.has_b_frames is False or s.codec_context.has_b_frames == 0
    assert n == 300  # 250 source frames, looped to 300
    assert keys[:3] == [0, 15, 30]
    assert build_real_clip(tmp_path, width=320, height=240, fps=30, frames=300, gop=15) == path  # cached


def test_published_rtmp_streams_play_back_at_their_rate(tmp_path):
    require_nginx()
    from vidpipe.bench.publish import publish
    from vidpipe.bench.rtmp_server import RtmpServer

    clip = build_real_clip(tmp_path, width=320, height=240, fps=30, frames=60, gop=15)
    with RtmpServer() as server:
        pub = publish(str(clip), [server.url("a"), server.url("b")])
        try:
            time.sleep(1.0)
            with av.open(server.url("b"), timeout=(10, 10),
                         options={"analyzeduration": "500000", "probesize": "500000"}) as c:
                frames = []
                for f in c.decode(video=0):
                    frames.append((time.monotonic(), f.width, f.height))
                    if len(frames) == 75:  # past one loop of the 60-frame clip
                        break
        finally:
            pub.stop()
    assert {(w, h) for _, w, h in frames} == {(320, 240)}
    rate = (len(frames) - 31) / (frames[-1][0] - frames[30][0])  # after the start-up burst
    assert 20 < rate < 40, rate
    assert pub.reopens == [0, 0]
    sent = pub.lateness()
    assert sent["packets"] >= 75 and 0 <= sent["late_100ms"] <= sent["late_33ms"] <= sent["packets"]


def test_soak_samples_memory_and_counts(tmp_path, make_clip):
    from vidpipe.bench.soak import drift, run_soak_bench

    clip = make_clip(".mp4", frames=16, width=160, height=96, gop=8)
    result = run_soak_bench([clip.path], minutes=0.1, interval=1.0, settle=0.0, device="cpu", batch_size=8)
    assert len(result.rows) >= 2
    assert all(r["rss_mib"] > 0 and r["fds"] > 0 and r["children"] == 0 for r in result.rows)
    assert result.rows[-1]["frames"] == 16 * result.rows[-1]["runs"]
    assert drift(result.rows, "rss_mib", settle_min=0.0) is not None
    paths = result.write(tmp_path, "soak")
    assert all(p.exists() for p in paths.values())


def test_bench_streams_on_the_cpu_repeats_each_count(tmp_path):
    """``vidpipe bench streams`` as a user runs it, on the CPU at a small size: two runs of two
    streams from the real server, each a new run with its own row, and the report written."""
    require_nginx()
    import json

    from vidpipe.cli import main

    out = tmp_path / "out"
    rc = main(["bench", "streams", "--device", "cpu", "--decoder", "pyav", "--streams", "2", "--repeat", "2",
               "--seconds", "2", "--warmup", "1", "--size", "160x96", "--cache-dir", str(tmp_path), "--out", str(out)])
    assert rc == 0
    report = json.loads((out / "bench_streams.json").read_text())
    rows = report["rows"]
    assert [(r["streams"], r["run"]) for r in rows] == [(2, 1), (2, 2)]
    assert all(r["fps_total"] > 0 and r["fps_min"] > 0 and r["p50_ms"] is not None for r in rows)
    assert any("in all 2 runs" in k for k in report["meta"]["targets"])
    assert all(r["drops_before"] >= 0 for r in rows)
    # the publishers' own lateness in the window, from their status files
    assert all(0 <= r["publisher_late_100ms"] <= r["publisher_late_33ms"] for r in rows)
    assert "| run |" in (out / "bench_streams.md").read_text()


def test_bench_streams_annotate_encodes_every_stream(tmp_path):
    """``bench streams --annotate``: each stream drawn and encoded to a video of its own while it
    is measured; the row says how many frames the encoders took and what a frame cost them, and
    the option without ``--annotate`` is an error."""
    require_nginx()
    import json

    import pytest

    from vidpipe.cli import main

    with pytest.raises(SystemExit, match="needs --annotate"):
        main(["bench", "streams", "--device", "cpu", "--annotate-option", "preset=ultrafast", "--streams", "2"])
    with pytest.raises(SystemExit):
        main(["bench", "streams", "--device", "cpu", "--annotate", "--annotate-option", "ultrafast"])
    out = tmp_path / "out"
    rc = main(["bench", "streams", "--device", "cpu", "--decoder", "pyav", "--streams", "2", "--seconds", "2",
               "--warmup", "1", "--size", "160x96", "--cache-dir", str(tmp_path), "--out", str(out),
               "--annotate", "--annotate-option", "preset=ultrafast", "--annotate-option", "threads=1"])
    assert rc == 0
    report = json.loads((out / "bench_streams.json").read_text())
    (row,) = report["rows"]
    assert row["peer"] == "vidpipe+annotate"
    # every result of the run was drawn and handed to its encoder: at least the window's
    assert row["encoded_frames"] >= row["fps_total"] * row["window_s"] > 0
    assert row["encode_ms"] > 0 and row["encoder_errors"] is None
    assert "preset=ultrafast, threads=1" in report["title"]
    assert "frames encoded" in (out / "bench_streams.md").read_text()
    assert not list(tmp_path.glob("**/cam*.mp4"))  # the videos went with their temporary folder
