"""``build_real_clip``: the bundled street footage scaled and looped, and its crowded ``tiles`` form
(each frame a grid of the footage at several moments), checked against PyAV's own scaling of the
source frames."""

from __future__ import annotations

import av
import numpy as np
import pytest

from vidpipe.bench.realclip import build_real_clip, bundled_street_clip


def _frames(path, n=None):
    with av.open(str(path)) as c:
        out = []
        for f in c.decode(video=0):
            out.append(f)
            if n is not None and len(out) >= n:
                break
        return out


def _source_tile(i, w, h):
    return _frames(bundled_street_clip(), i + 1)[i].to_ndarray(width=w, height=h, format="rgb24").astype(float)


def test_tiles_show_the_footage_at_different_moments(tmp_path):
    clip = build_real_clip(tmp_path, width=320, height=176, frames=300, tiles=2, crf=12)
    assert clip.name == "bikes-320x176-tiles2-30fps-300f-gop30.mp4"
    frames = _frames(clip)
    assert len(frames) == 300  # 250 encoded, then the first 50 again
    assert (frames[0].width, frames[0].height) == (320, 176)
    img = frames[3].to_ndarray(format="rgb24").astype(float)
    tiles = {(0, 0): img[:88, :160], (0, 1): img[:88, 160:], (1, 0): img[88:, :160], (1, 1): img[88:, 160:]}
    # tile t shows source frame 3 + t * 250 // 4: compare each with every candidate moment
    for t, (key, tile) in enumerate(tiles.items()):
        want = 3 + t * 250 // 4
        errors = {i: np.abs(tile - _source_tile(i, 160, 88)).mean() for i in (3, 65, 128, 190)}
        assert min(errors, key=errors.get) == want, (key, errors)
        assert errors[want] < 6, errors  # H.264 at crf 12 against PyAV's scaling
    # the loop repeats the encoded frames: frame 253 is frame 3
    again = frames[253].to_ndarray(format="rgb24").astype(float)
    assert np.abs(again - img).max() == 0


def test_one_tile_keeps_the_old_name_and_frames(tmp_path):
    clip = build_real_clip(tmp_path, width=320, height=176, frames=10)
    assert clip.name == "bikes-320x176-30fps-10f-gop30.mp4"
    frames = _frames(clip)
    assert len(frames) == 10
    err = np.abs(frames[5].to_ndarray(format="rgb24").astype(float) - _source_tile(5, 320, 176)).mean()
    assert err < 8


@pytest.mark.parametrize("tiles", [0, 9, 2.0, True])
def test_bad_tiles_are_refused(tmp_path, tiles):
    with pytest.raises(ValueError, match="tiles"):
        build_real_clip(tmp_path, width=320, height=176, frames=10, tiles=tiles)


def test_tiles_too_small_are_refused(tmp_path):
    with pytest.raises(ValueError, match="too small"):
        build_real_clip(tmp_path, width=64, height=64, frames=10, tiles=8)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("frames", [0, -5, 2.5])
def test_bad_frame_counts_are_refused(tmp_path, frames):
    with pytest.raises(ValueError, match="frames"):
        build_real_clip(tmp_path, width=320, height=176, frames=frames)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["e2e", "decode"])
@pytest.mark.parametrize("frames", ["0", "-5"])
def test_cli_frames_must_be_positive(kind, frames):
    """``--frames 0`` silently meant the preset's count and ``-5`` built a one-frame clip."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", kind, "--generate", "street-1080p", "--frames", frames],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2 and "--frames" in p.stderr, p.stderr
