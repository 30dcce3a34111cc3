"""Run accounting with several inputs, on every decoder path: per-source frame counts, order,
statuses and summaries, held against PyAV's own count of each file's frames.

The class of bug these catch: a decoder that labels its frames with the wrong stream id (every
NVDEC frame used to say stream 0), so that one input gets all frames and the others are
"partial after 0 frames". CPU paths run here; the NVDEC path runs on the GPU host (``gpu`` +
``nvdec`` markers).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import av
import pytest
from conftest import DATA_DIR

import vidpipe
from vidpipe.decode import registry


def pyav_frame_count(path) -> int:
    """Frames FFmpeg decodes from the file (the reference: not vidpipe's probe or decoders)."""
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def run_and_count(sources, **kwargs):
    """Iterate a run; per input (by the stream id each result carries): the frame indices."""
    from pathlib import Path

    run = vidpipe.detect([str(s) for s in sources], results_on_host=True, **kwargs)
    per_source: dict[str, list[int]] = defaultdict(list)
    for r in run:
        src = run.states[r.stream_id].spec.location
        # the stream id and the frame's own source must agree (a video: the file; a folder: a file in it)
        assert r.source == src or Path(r.source).parent == Path(src), (r.source, r.stream_id, src)
        per_source[src].append(r.index)
    return run, per_source


def check_exact(run, per_source, expected: dict[str, int]) -> None:
    summary = run.summary()
    assert summary.status == "ok", summary.format_text()
    by_source = {s.source: s for s in summary.sources}
    assert list(by_source) == list(expected)  # input order
    for src, n in expected.items():
        assert len(per_source[src]) == n, f"{src}: {len(per_source[src])} frames yielded, FFmpeg decodes {n}"
        s = by_source[src]
        assert (s.status, s.frames, s.error) == ("ok", n, None), s
    assert summary.frames == sum(expected.values())


@pytest.fixture
def clips(make_clip):
    """Three distinct clips: other sizes, lengths, GOPs (B-frames on)."""
    return [
        make_clip(width=160, height=96, frames=23, fps=10, gop=5),
        make_clip(width=192, height=108, frames=41, fps=25, gop=12, pattern="bars"),
        make_clip(suffix=".mkv", width=128, height=96, frames=17, fps=15, gop=4, pattern="gradient"),
    ]


def test_several_videos_pyav_exact_counts(clips):
    expected = {str(c.path): pyav_frame_count(c.path) for c in clips}
    run, per_source = run_and_count(expected, device="cpu", decoder="pyav", batch_size=8)
    check_exact(run, per_source, expected)
    for src, n in expected.items():
        assert per_source[src] == list(range(n))  # every frame, in order


@pytest.fixture
def segment_parallel(monkeypatch):
    """The segment-parallel PyAV decoder (several sessions per file) as a registered backend."""
    from vidpipe.decode.parallel import PyAVParallelDecoder

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))

    def create(info, *, device, options):
        return PyAVParallelDecoder(info, device=device, options=options, workers=3, threads=1, segment_frames=8)

    registry.register_backend("pyav-parallel", create, lambda info, device: None, gpu=False)
    return "pyav-parallel"


def test_several_videos_segment_parallel_exact_counts(clips, segment_parallel):
    expected = {str(c.path): pyav_frame_count(c.path) for c in clips}
    run, per_source = run_and_count(expected, device="cpu", decoder=segment_parallel, batch_size=8)
    check_exact(run, per_source, expected)
    assert {s.decoder for s in run.summary().sources} == {"pyav-parallel"}
    for src, n in expected.items():
        assert per_source[src] == list(range(n))


def test_image_folders_and_videos_together_exact_counts(tmp_path, clips):
    import shutil

    photos = sorted((DATA_DIR / "images").glob("*.jpg"))
    assert len(photos) >= 2, "tests/data/images should hold JPEG photos"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for p in photos[:2]:
        shutil.copy(p, a / p.name)
    for p in photos:
        shutil.copy(p, b / p.name)
    sources = [str(a), str(clips[0].path), str(b)]
    expected = {str(a): 2, str(clips[0].path): pyav_frame_count(clips[0].path), str(b): len(photos)}
    run, per_source = run_and_count(sources, device="cpu", batch_size=4)
    check_exact(run, per_source, expected)


def test_stop_accounts_every_yielded_frame(make_clip):
    """stop() after the first batch: the frames counted are exactly the frames received; inputs
    not read to their end are partial (or skipped), never ok."""
    clips = [make_clip(width=160, height=96, frames=60, fps=10, gop=10, pattern=p) for p in ("boxes", "bars")]
    run = vidpipe.detect([str(c.path) for c in clips], device="cpu", batch_size=4, max_open_sources=1)
    got: Counter = Counter()
    for i, batch in enumerate(run.batches()):
        got.update(r.source for r in batch)
        if i == 0:
            run.stop()
    summary = run.summary()
    for s in summary.sources:
        assert s.frames == got[s.source]
        assert s.status in ("partial", "skipped"), s
    assert summary.frames == sum(got.values()) and 0 < summary.frames < 120


def test_finished_source_is_never_partial(make_clip):
    """A short input read to its end is ok even when the run is stopped for a longer one."""
    short = make_clip(width=160, height=96, frames=6, fps=10, gop=3)
    long = make_clip(width=160, height=96, frames=200, fps=10, gop=10, pattern="bars")
    run = vidpipe.detect([str(short.path), str(long.path)], device="cpu", batch_size=4)
    got: Counter = Counter()
    for batch in run.batches():
        got.update(r.source for r in batch)
        if got[str(short.path)] == 6 and run.states[0].drained:
            run.stop()
    by = {s.source: s for s in run.summary().sources}
    assert by[str(short.path)].status == "ok" and by[str(short.path)].frames == 6
    assert by[str(long.path)].status == "partial" and by[str(long.path)].frames == got[str(long.path)] < 200
    assert "stopped after" in by[str(long.path)].error


def test_start_past_the_end_says_so(make_clip):
    clip = make_clip(width=160, height=96, frames=20, fps=10, gop=5)
    run = vidpipe.detect(str(clip.path), device="cpu", start=100.0)
    assert list(run) == []
    (s,) = run.summary().sources
    assert s.status == "ok" and s.frames == 0
    assert "start=100 s" in s.extra["note"] and "past its end" in s.extra["note"]
    assert "past its end" in run.summary().format_text()


# ----------------------------------------------------------------------------- GPU host
@pytest.fixture(scope="module")
def hd_clips(tmp_path_factory):
    """Four distinct 1080p H.264 files (other lengths, patterns and GOPs)."""
    from media import make_video

    folder = tmp_path_factory.mktemp("hd")
    specs = [(48, "boxes", 12), (61, "bars", 24), (37, "gradient", 10), (55, "boxes", 30)]
    return [
        make_video(folder / f"hd{i}.mp4", width=1920, height=1080, frames=n, fps=25, gop=g, pattern=p, crf=28)
        for i, (n, p, g) in enumerate(specs)
    ]


@pytest.mark.gpu
@pytest.mark.nvdec
@pytest.mark.parametrize("count", [2, 4])
def test_nvdec_several_inputs_exact_counts(hd_clips, count):
    clips = hd_clips[:count]
    expected = {str(c.path): pyav_frame_count(c.path) for c in clips}
    run, per_source = run_and_count(expected, device="cuda", decoder="nvdec", batch_size=32)
    check_exact(run, per_source, expected)
    assert {s.decoder for s in run.summary().sources} == {"nvdec"}
    for src, n in expected.items():
        assert sorted(per_source[src]) == list(range(n)) and per_source[src] == sorted(per_source[src])


@pytest.mark.gpu
@pytest.mark.nvdec
def test_nvdec_several_inputs_cli_exit_0(hd_clips, tmp_path):
    import json
    import subprocess
    import sys

    expected = {str(c.path): pyav_frame_count(c.path) for c in hd_clips}
    out = tmp_path / "all.csv"
    p = subprocess.run(
        [sys.executable, "-m", "vidpipe", "detect", *expected, "--device", "cuda", "--decoder", "nvdec", "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert p.returncode == 0, (p.stdout, p.stderr)
    meta = json.loads(out.with_name(out.name + ".meta.json").read_text())
    assert meta["status"] == "complete"
    got = {s["source"]: (s["status"], s["frames"]) for s in meta["summary"]["sources"]}
    assert got == {src: ("ok", n) for src, n in expected.items()}
