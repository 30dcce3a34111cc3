"""``bench e2e --track`` on real footage (``--generate street-720p``): detection alone and with
tracking, in one run, through ``vidpipe.detect`` as a user calls it."""

from __future__ import annotations

import pytest

from vidpipe.bench.e2e import run_e2e_bench, targets
from vidpipe.bench.generate import parse_presets
from vidpipe.errors import ConfigError


def test_track_rows_on_real_footage(tmp_path):
    result = run_e2e_bench(generate="street-720p", frames=40, device="cpu", cpu_frames=40, batch_size=8,
                           peers=("vidpipe-cpu",), track=True, work_dir=tmp_path)  # fmt: skip
    rows = {r["peer"]: r for r in result.rows}
    assert list(rows) == ["vidpipe-cpu", "vidpipe-cpu+track"]
    plain, tracked = rows["vidpipe-cpu"], rows["vidpipe-cpu+track"]
    assert plain["frames"] == tracked["frames"] == 40
    assert tracked["detections"] == plain["detections"] > 0  # the street clip has people and bicycles
    assert "track " in tracked["stages"] and "ms/frame" in tracked["note"] and "tracks" in tracked["note"], tracked
    assert "track" not in plain["stages"]
    assert list(tmp_path.glob("bikes-1280x720-*f-*.mp4"))  # the real clip, kept in the work folder


def test_track_target_reads_the_gpu_rows():
    out = targets([{"peer": "vidpipe-gpu", "fps": 1000.0}, {"peer": "vidpipe-gpu+track", "fps": 950.0}])
    assert out["gpu_track_over_untracked"] == 0.95 and out["target_track_0.9x"] is True
    out = targets([{"peer": "vidpipe-gpu", "fps": 1000.0}, {"peer": "vidpipe-gpu+track", "fps": 630.0}])
    assert out["target_track_0.9x"] is False


def test_real_presets_are_named_in_the_error():
    names = ["street-1080p", "1080p-h264", "street-crowd-1080p"]
    assert parse_presets(",".join(names)) == names
    with pytest.raises(ConfigError, match="street-1080p"):
        parse_presets("street-4k")
