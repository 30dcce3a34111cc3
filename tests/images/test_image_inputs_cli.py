"""Image inputs through the command and the API: an input none of whose images can be read is a
failed source with one clear error line (exit 2), while bad files among good ones stay skips."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from imgfactory import encode, pattern, write

import vidpipe


def vidpipe_cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vidpipe", *map(str, args)], capture_output=True, text=True, timeout=600
    )


def test_lone_truncated_jpeg_is_a_clear_error(tmp_path):
    data = encode(pattern(120, 160, seed=7))
    bad = write(tmp_path / "photo.jpg", data[: len(data) // 2])
    out = tmp_path / "dets.csv"
    p = vidpipe_cli("detect", bad, "--device", "cpu", "-o", out)
    assert p.returncode == 2, (p.stdout, p.stderr)
    errors = [line for line in p.stderr.splitlines() if line.startswith("vidpipe: error:")]
    assert len(errors) == 1, p.stderr
    assert str(bad) in errors[0] and "truncated" in errors[0]
    assert "Traceback" not in p.stderr
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    (src,) = meta["summary"]["sources"]
    assert src["status"] == "failed" and src["frames"] == 0


def test_folder_of_unreadable_images_fails_but_bad_files_among_good_are_skipped(tmp_path):
    bad_dir = tmp_path / "bad"
    data = encode(pattern(64, 64, seed=3))
    write(bad_dir / "a.jpg", data[:300])
    write(bad_dir / "b.png", b"not a png")
    run = vidpipe.detect(bad_dir, device="cpu")
    assert list(run) == []
    (src,) = run.summary().sources
    assert src.status == "failed"
    assert str(bad_dir) in src.error and "none of its 2 image files" in src.error

    good_dir = tmp_path / "good"
    write(good_dir / "a.jpg", data[:300])
    write(good_dir / "b.jpg", data)
    run = vidpipe.detect(good_dir, device="cpu")
    assert [r.source for r in run] == [str(good_dir / "b.jpg")]
    summary = run.summary()
    assert summary.sources[0].status == "ok"
    assert [Path(s["path"]).name for s in summary.skipped] == ["a.jpg"]


def test_image_source_names_its_decoder_like_video_sources(tmp_path):
    """The summary's decode backends are names (``cpu``, ``pyav``, ``nvdec``, ``nvjpeg-hw``), the
    how in each source's reason: not ``decode=cpu (2 threads, CPU),pyav``."""
    write(tmp_path / "a.jpg", encode(pattern(96, 128, seed=3)))
    run = vidpipe.detect(str(tmp_path / "a.jpg"), device="cpu")
    assert len(list(run)) == 1
    summary = run.summary()
    assert summary.backends["decode"] == "cpu"
    assert summary.sources[0].decoder == "cpu"
    assert "CPU threads" in summary.sources[0].decoder_reason
