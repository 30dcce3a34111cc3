"""vidpipe.detect / DetectionRun end to end on generated clips and the bundled sample."""

from __future__ import annotations

import threading

import pytest

import vidpipe
from conftest import device_params
from media import corrupt_middle, make_audio, make_empty, make_text, truncate

SMALL = dict(width=160, height=96, frames=12, fps=12, gop=6)


@pytest.mark.parametrize("device", device_params())
def test_one_result_per_frame_in_order(make_clip, device):
    clip = make_clip(**SMALL)
    run = vidpipe.detect(clip.path, device=device, batch_size=5)
    results = list(run)
    assert [r.index for r in results] == list(range(clip.frames))
    assert [r.pts for r in results] == pytest.approx(clip.pts)
    assert all(r.source == str(clip.path) for r in results)
    assert all(r.size == (96, 160) for r in results)
    assert all(r.detections.device.type == device for r in results)
    s = run.summary()
    assert s.frames == clip.frames and s.status == "ok"
    assert s.sources[0].decoder == "pyav" if device == "cpu" else s.sources[0].decoder in ("nvdec", "pyav")


def test_several_sources_each_in_order(make_clip):
    a = make_clip(**SMALL)
    b = make_clip(width=128, height=128, frames=9, fps=10, gop=3)
    run = vidpipe.detect([a.path, b.path], device="cpu", batch_size=4)
    seen: dict[str, list[int]] = {}
    for r in run:
        seen.setdefault(r.source, []).append(r.index)
    assert seen == {str(a.path): list(range(a.frames)), str(b.path): list(range(b.frames))}
    assert [s.status for s in run.summary().sources] == ["ok", "ok"]


def test_frame_selection_options(make_clip):
    clip = make_clip(width=160, height=96, frames=30, fps=10, gop=10)
    idx = [r.index for r in vidpipe.detect(clip.path, device="cpu", frame_skip=4)]
    assert idx == list(range(0, 30, 4))
    idx = [r.index for r in vidpipe.detect(clip.path, device="cpu", max_frames=7)]
    assert idx == list(range(7))
    res = list(vidpipe.detect(clip.path, device="cpu", start=1.25, end=2.0))
    assert [r.index for r in res] == list(range(7))  # frames 13..19 of the file, numbered in the range
    assert all(1.25 <= r.pts < 2.0 for r in res)


def test_bad_input_among_good_ones_is_reported_and_others_run(make_clip, tmp_path):
    good = make_clip(**SMALL)
    bad = make_text(tmp_path / "notes.mp4")
    empty = make_empty(tmp_path / "empty.mp4")
    audio = make_audio(tmp_path / "tone.m4a")
    missing = tmp_path / "missing.mp4"
    run = vidpipe.detect([bad, good.path, empty, audio, missing], device="cpu")
    frames = [r for r in run]
    assert len(frames) == good.frames
    by_source = {s.source: s for s in run.summary().sources}
    assert by_source[str(good.path)].status == "ok"
    for path, words in [(bad, "not a video"), (empty, "empty"), (audio, "no video stream"), (missing, "no such file")]:
        s = by_source[str(path)]
        assert s.status == "failed", s
        assert str(path) in s.error and words in s.error


def test_truncated_file_keeps_decoded_frames_and_is_partial(make_clip, tmp_path):
    clip = make_clip(suffix=".mkv", width=160, height=96, frames=40, fps=10, gop=5)
    cut = truncate(clip.path, 0.5, dst=tmp_path / "cut.mkv")
    run = vidpipe.detect(cut, device="cpu")
    idx = [r.index for r in run]
    assert 0 < len(idx) < clip.frames
    assert idx == list(range(len(idx)))
    s = run.summary().sources[0]
    assert s.status == "partial" and s.error


def test_corrupt_middle_never_hangs(make_clip, tmp_path):
    clip = make_clip(suffix=".mkv", width=160, height=96, frames=30, fps=10, gop=5)
    bad = corrupt_middle(clip.path, dst=tmp_path / "bad.mkv")
    run = vidpipe.detect(bad, device="cpu")
    idx = [r.index for r in run]
    assert idx == sorted(idx) and len(set(idx)) == len(idx)
    assert run.summary().sources[0].status in ("ok", "partial")


def test_early_break_stops_workers(make_clip):
    clip = make_clip(width=160, height=96, frames=60, fps=30, gop=10)
    before = {t.name for t in threading.enumerate()}
    run = vidpipe.detect(clip.path, device="cpu", batch_size=2, queue_depth=1)
    for i, _ in enumerate(run):
        if i == 3:
            break
    run.close()
    left = [t for t in threading.enumerate() if t.name.startswith("vidpipe-src") and t.name not in before]
    assert not left
    assert run.summary().sources[0].status == "partial"


def test_sample_video_has_persons_and_bicycles(bikes_path):
    """The bundled model sees what is in the bundled street video (every 5th frame, 40 frames)."""
    run = vidpipe.detect(bikes_path, device="cpu", frame_skip=5, max_frames=40, classes="person,bicycle,car")
    counts: dict[str, int] = {}
    for r in run:
        for name in r.labels():
            counts[name] = counts.get(name, 0) + 1
    assert counts.get("person", 0) >= 10, counts
    assert counts.get("bicycle", 0) >= 5, counts
    assert set(counts) <= {"person", "bicycle", "car"}


def test_more_batches_in_flight_give_the_same_results_in_order(bikes_path, device):
    """Batches launched before the oldest is post-processed (``batches_in_flight``) change
    neither the results nor each source's order, with two sources sharing batches, on every
    device."""
    def run(**kw):
        per: dict[int, list] = {0: [], 1: []}
        for r in vidpipe.detect([bikes_path, bikes_path], device=device, max_frames=12, batch_size=4,
                                results_on_host=True, **kw):  # fmt: skip
            d = r.detections
            per[r.stream_id].append((r.index, d.class_ids.tolist(), d.boxes.round(decimals=1).tolist()))
        return per

    one = run()
    assert [i for i, _, _ in one[0]] == list(range(12)) and sum(len(c) for _, c, _ in one[0]) > 0
    assert run(batches_in_flight=3) == one


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(batch_size=0), "batch_size"),
        (dict(conf=1.5), "conf"),
        (dict(iou=-0.1), "iou"),
        (dict(device="gpu"), "device"),
        (dict(decoder="ffmpeg"), "decoder"),
        (dict(frame_skip=0), "frame_skip"),
        (dict(classes="person,dragon"), "dragon"),
        (dict(model="no-such-model"), "no-such-model"),
        (dict(start=5, end=2), "end"),
        (dict(batches_in_flight=0), "batches_in_flight"),
    ],
)
def test_invalid_options_raise_config_errors(make_clip, kwargs, words):
    clip = make_clip(**SMALL)
    with pytest.raises(vidpipe.VidpipeError) as err:
        vidpipe.detect(clip.path, **kwargs)
    assert isinstance(err.value, ValueError)
    assert words in str(err.value)


def test_image_folder_rows_per_image_and_bad_files_skipped(tmp_path):
    import shutil

    from conftest import DATA_DIR

    for name in ("dog.jpg", "person.jpg"):
        shutil.copy(DATA_DIR / "images" / name, tmp_path / name)
    (tmp_path / "broken.jpg").write_bytes((DATA_DIR / "images" / "dog.jpg").read_bytes()[:2000])
    (tmp_path / "notes.jpg").write_text("not an image")
    run = vidpipe.detect(tmp_path, device="cpu")
    labels = {r.source.rsplit("/", 1)[-1]: set(r.labels()) for r in run}
    assert {"dog", "bicycle"} <= labels["dog.jpg"]
    assert {"person", "horse"} <= labels["person.jpg"]
    summary = run.summary()
    skipped = {s["path"].rsplit("/", 1)[-1]: s["reason"] for s in summary.skipped}
    assert skipped.get("notes.jpg") == "not_image"
    # A truncated JPEG is either decoded with its missing part grey (libjpeg's behaviour) or skipped.
    assert "broken.jpg" in skipped or "broken.jpg" in labels
    assert summary.sources[0].status == "ok"


def test_names_file_overrides_class_names(tmp_path):
    from conftest import DATA_DIR

    names = tmp_path / "my.names"
    names.write_text("\n".join(f"thing{i}" for i in range(80)) + "\n")
    run = vidpipe.detect(DATA_DIR / "images" / "dog.jpg", device="cpu", names=names)
    labels = [lab for r in run for lab in r.labels()]
    assert labels and all(lab.startswith("thing") for lab in labels)
    assert "thing16" in labels  # COCO id 16 is "dog"
    with pytest.raises(vidpipe.ModelError, match="yolov5"):
        vidpipe.detect(DATA_DIR / "images" / "dog.jpg", device="cpu", head="detr")


@pytest.mark.gpu
@pytest.mark.parametrize("decoder", ["nvdec", "pyav"])
def test_cuda_graph_model_gives_the_eager_results(bikes_path, decoder):
    """accel="auto" (the default on a GPU) runs the model as a CUDA graph: same detections, to
    within one FP16 step of the scores (4.9e-4 below 1.0; on PyAV's frames the two differed by
    that much on an H200, on NVDEC's not at all)."""
    import torch

    runs = {}
    for accel in ("none", "auto"):
        run = vidpipe.detect(bikes_path, device="cuda", batch_size=16, max_frames=40, accel=accel, decoder=decoder)
        runs[accel] = [(r.index, r.detections.cpu()) for r in run]
        assert run.summary().frames == 40
    assert [i for i, _ in runs["auto"]] == [i for i, _ in runs["none"]] == list(range(40))
    assert sum(len(d) for _, d in runs["none"]) > 0
    for (_, a), (_, b) in zip(runs["none"], runs["auto"]):
        assert len(a) == len(b) and torch.equal(a.class_ids, b.class_ids)
        assert torch.allclose(a.boxes, b.boxes, atol=1e-3) and torch.allclose(a.scores, b.scores, atol=5e-4)


def test_accel_option_is_validated():
    from vidpipe.errors import ConfigError
    from vidpipe.pipeline import PipelineConfig

    assert PipelineConfig().accel == "auto" and PipelineConfig(accel="none").accel == "none"
    with pytest.raises(ConfigError, match="accel"):
        PipelineConfig(accel="fast")


def test_out_of_memory_backs_off_to_smaller_batches(make_clip, caplog):
    """A model that runs out of memory above 2 frames still gives every frame, and says so."""
    import torch

    from vidpipe.models.base import Model
    from vidpipe.models.detector import Detector
    from vidpipe.models.zoo import load_model

    class SmallMemory(Model):
        def __init__(self, inner: Model) -> None:
            self.inner, self.info, self.device, self.dtype = inner, inner.info, inner.device, inner.dtype
            self.batches: list[int] = []

        def forward(self, x):
            self.batches.append(x.shape[0])
            if x.shape[0] > 2:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return self.inner.forward(x)

    clip = make_clip(**SMALL)
    model = SmallMemory(load_model("yolov3-tiny", device="cpu"))
    run = vidpipe.detect(clip.path, model=Detector(model), batch_size=4)
    assert [r.index for r in run] == list(range(clip.frames))
    assert max(b for b in model.batches if b <= 2) == 2 and 4 in model.batches
    assert run.summary().stats["model_batch_limit"] == 2
    assert "out of memory" in caplog.text


def test_time_to_first_result_counts_from_the_call(bikes_path):
    """``stats["first_result_s"]``: from ``vidpipe.detect``'s call (the model's loading
    included) to the first result handed over; shown in the summary's text."""
    import time

    t0 = time.monotonic()
    run = vidpipe.detect(bikes_path, device="cpu", max_frames=8, batch_size=4)
    results = iter(run)
    first = next(results)
    waited = time.monotonic() - t0
    rest = list(results)
    assert first.index == 0 and len(rest) == 7
    s = run.summary()
    assert 0 < s.stats["first_result_s"] <= waited + 0.001  # (the summary rounds to ms)
    assert s.stats["first_result_s"] > (run.created_mono - t0) - 0.001  # the model's loading is in it
    assert f"first result {s.stats['first_result_s']:.2f} s after the call" in s.format_text()


def test_decoder_processes_on_the_cpu_are_ignored_with_a_warning(bikes_path, caplog):
    """Decoder processes run NVDEC sessions: a CPU run says it ignores them, and runs."""
    with caplog.at_level("WARNING", logger="vidpipe.pipeline"):
        run = vidpipe.detect(bikes_path, device="cpu", max_frames=4, batch_size=4, decoder_processes=2)
        assert len(list(run)) == 4
    said = [r.getMessage() for r in caplog.records if "decoder_processes=2" in r.getMessage()]
    assert said and "ignored" in said[0] and "CPU" in said[0], [r.getMessage() for r in caplog.records]
