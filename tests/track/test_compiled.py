"""The compiled tracker (numba) against the numpy ByteTrack, the readable reference: the same ids
on generated scenes under every option that changes a step, per frame or many frames per call;
capacity growth; timestamps; engine choice and the fallback to numpy."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from vidpipe.bench.track_scenes import SceneSpec, make_scene
from vidpipe.errors import ConfigError
from vidpipe.track import ByteTrack, TrackConfig
from vidpipe.track import compiled as compiled_mod
from vidpipe.track.book import PackedFrames, TrackBook
from vidpipe.track.compiled import CompiledByteTrack, resolve_engine

pytest.importorskip("numba", reason="numba (a dependency of vidpipe) is not importable")


def _frames(scene, *, emb_dim=0, seed=0):
    """The scene's frames as arrays: ``(t, boxes, scores, classes, embeddings)``; embeddings are a
    unit vector per ground-truth object plus noise (false positives: random)."""
    rng = np.random.default_rng(seed)
    protos = rng.normal(size=(1000, max(emb_dim, 1))).astype(np.float32)
    out = []
    for f in scene.frames:
        emb = None
        if emb_dim:
            gt = np.asarray(f.det_gt)
            emb = np.where((gt >= 0)[:, None], protos[np.maximum(gt, 0) % 1000], rng.normal(size=(len(gt), emb_dim)))
            emb = (emb + 0.3 * rng.normal(size=emb.shape)).astype(np.float32)
        out.append((f.t, f.boxes.astype(np.float64), f.scores.astype(np.float64), f.class_ids.astype(np.int64), emb))
    return out


def _numpy_ids(frames, config):
    tr = ByteTrack(config)
    return np.concatenate([tr.update(b, s, c, t=t, embeddings=e) for t, b, s, c, e in frames]), tr


def _compiled_ids(frames, config, batch=32):
    tr = CompiledByteTrack(config)
    out = []
    for i in range(0, len(frames), batch):
        part = frames[i : i + batch]
        emb = None if part[0][4] is None else np.concatenate([f[4] for f in part])
        out.append(tr.update_frames(
            np.array([f[0] for f in part]), np.array([len(f[2]) for f in part]),
            np.concatenate([f[1] for f in part]).reshape(-1, 4), np.concatenate([f[2] for f in part]),
            np.concatenate([f[3] for f in part]), emb,
        ))  # fmt: skip
    return np.concatenate(out), tr


CONFIGS = {
    "defaults": TrackConfig(),
    "class-agnostic": TrackConfig(per_class=False),
    "fused scores": TrackConfig(fuse_score=True),
    "min_hits 1": TrackConfig(min_hits=1),
    "min_hits 3, short buffer": TrackConfig(min_hits=3, track_buffer=0.2),
    "thresholds": TrackConfig(high_thresh=0.6, low_thresh=0.2, match_thresh=0.7, low_match_thresh=0.4),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_ids_as_the_numpy_tracker_on_generated_scenes(name):
    config = CONFIGS[name]
    for scene_name in ("crossing", "crowd", "drops"):
        for seed in range(2):
            frames = _frames(make_scene(scene_name, seed=seed))
            ref, ref_tr = _numpy_ids(frames, config)
            got, tr = _compiled_ids(frames, config)
            assert (ref >= 0).sum() > 100, (scene_name, seed)  # the scene confirms tracks at all
            np.testing.assert_array_equal(got, ref, err_msg=f"{scene_name} seed {seed}")
            assert (tr.next_id, tr.started, tr.active(), len(tr)) == (
                ref_tr.next_id, ref_tr.started, ref_tr.active(), len(ref_tr))


def test_same_ids_with_many_objects_and_classes():
    """Dense frames (ambiguous associations solved exactly) and several classes."""
    spec = SceneSpec(objects=60, frames=200, size=(20.0, 60.0), speed=3.0, false_positives=2.0, classes=3,
                     crossing=True, drop=0.05, burst=0.3)  # fmt: skip
    frames = _frames(make_scene(spec=spec, seed=3))
    for config in (TrackConfig(), TrackConfig(per_class=False, fuse_score=True)):
        ref, _ = _numpy_ids(frames, config)
        got, _ = _compiled_ids(frames, config, batch=7)
        assert (ref >= 0).sum() > 5000
        np.testing.assert_array_equal(got, ref)


def test_same_ids_with_embeddings():
    """Appearance in the first association and the tracks' embeddings (momentum), from the first
    frame on (see the module docstring of vidpipe.track.compiled for the one difference)."""
    for weight in (0.5, 0.9):
        config = TrackConfig(appearance_weight=weight)
        frames = _frames(make_scene("crossing", seed=1), emb_dim=16)
        ref, _ = _numpy_ids(frames, config)
        got, _ = _compiled_ids(frames, config)
        np.testing.assert_array_equal(got, ref)


def test_one_frame_per_call_equals_many():
    frames = _frames(make_scene("drops", seed=0))
    many, _ = _compiled_ids(frames, TrackConfig())
    tr = CompiledByteTrack()
    one = np.concatenate([tr.update(b, s, c, t=t) for t, b, s, c, _ in frames])
    np.testing.assert_array_equal(one, many)


def test_capacity_grows_and_reset_keeps_ids_counting():
    tr = CompiledByteTrack(min_hits=1)
    xs = np.arange(200, dtype=np.float64) * 30
    boxes = np.stack([xs, xs * 0, xs + 20, xs * 0 + 50], axis=1)
    ids = tr.update(boxes, np.full(200, 0.9), t=0.0)
    assert ids.tolist() == list(range(1, 201)) and len(tr) == 200
    assert tr.update(boxes + 1, np.full(200, 0.9), t=1 / 30).tolist() == list(range(1, 201))
    tr.reset()
    assert len(tr) == 0 and tr.active() == 0
    assert tr.update(boxes[:3], np.full(3, 0.9), t=5.0).tolist() == [201, 202, 203]


def test_repeated_and_earlier_timestamps_step_once_as_numpy_does():
    box = np.array([[10.0, 10.0, 50.0, 90.0]])
    times = [0.0, 1 / 30, 1 / 30, 0.01, 0.2, 0.2 + 1e-7, 0.5]
    ref, got = ByteTrack(), CompiledByteTrack()
    for k, t in enumerate(times):
        a = ref.update(box + 3 * k, [0.9], t=t)
        b = got.update(box + 3 * k, [0.9], t=t)
        assert a.tolist() == b.tolist() == [1]
    assert got.frames == len(times) and got.active() == 1


def test_empty_frames_and_mismatched_counts():
    tr = CompiledByteTrack()
    assert tr.update(np.zeros((0, 4)), np.zeros(0), t=0.0).shape == (0,)
    out = tr.update_frames(np.array([0.1, 0.2]), np.array([0, 0]), np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.int64))
    assert out.shape == (0,) and tr.frames == 3
    with pytest.raises(ValueError, match="counts add up to 2, but there are 1 boxes"):
        tr.update_frames(np.array([0.3]), np.array([2]), np.zeros((1, 4)), np.zeros(1), np.zeros(1, np.int64))


def test_non_finite_times_are_refused_by_both_trackers():
    box = np.array([[10.0, 10.0, 50.0, 90.0]])
    for tracker in (ByteTrack(), CompiledByteTrack()):
        tracker.update(box, [0.9], t=0.0)
        for bad in (float("inf"), float("nan"), float("-inf")):
            with pytest.raises(ValueError, match="finite"):
                tracker.update(box, [0.9], t=bad)
        assert tracker.update(box, [0.9], t=1 / 30).tolist() == [1]  # the state is untouched


def test_engine_choice_and_fallback(monkeypatch, caplog):
    assert resolve_engine("auto") == "compiled"
    assert resolve_engine("numpy") == "numpy"
    with pytest.raises(ConfigError, match="invalid engine='fast'"):
        resolve_engine("fast")  # type: ignore[arg-type]
    monkeypatch.setattr(compiled_mod, "available", lambda: False)
    with pytest.raises(ConfigError, match="needs numba"):
        resolve_engine("compiled")
    with caplog.at_level(logging.INFO, logger="vidpipe.track.compiled"):
        assert resolve_engine("auto") == "numpy"
    assert "numba is not installed here" in caplog.text


def test_a_book_whose_compiled_tracker_fails_to_build_tracks_with_numpy(monkeypatch, caplog):
    def broken(self):
        raise RuntimeError("no LLVM here")

    monkeypatch.setattr(CompiledByteTrack, "warm_up", broken)
    book = TrackBook(TrackConfig())
    assert book.engine == "compiled"
    with caplog.at_level(logging.WARNING, logger="vidpipe.track.book"):
        book.wait_built()
    assert book.engine == "numpy" and "failed to build (RuntimeError: no LLVM here)" in caplog.text
    rows = np.array([[10, 10, 50, 90, 0.9, 0]], dtype=np.float32)
    got = book.track(PackedFrames(0, np.array([0.0]), np.array([1]), rows), first_id=1)
    assert got.ids.tolist() == [1] and got.next_id == 2


def _assert_same_state(got, ref):
    a, b = got.snapshot(), ref.snapshot()
    assert len(a) == len(b) > 0
    np.testing.assert_allclose(a.kf, b.kf, rtol=1e-12, atol=1e-12)
    for name in ("state", "ids", "hits", "last_t", "cls"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.t, a.frames, a.first_id, a.next_id) == (b.t, b.frames, b.first_id, b.next_id)


def test_kalman_state_equals_the_numpy_trackers():
    """Ids are robust to small errors; the filter's state is held to the numpy one directly (which
    tests/track/test_kalman.py holds to the textbook matrix form), dropped frames included."""
    for scene_name in ("drops", "crowd"):
        frames = _frames(make_scene(scene_name, seed=1))
        for stop in (57, 150, len(frames)):
            _, ref = _numpy_ids(frames[:stop], TrackConfig())
            _, got = _compiled_ids(frames[:stop], TrackConfig(), batch=10)
            _assert_same_state(got, ref)


def test_a_numpy_tracker_hands_over_to_the_compiled_one():
    """from_snapshot goes on with the numpy tracker's tracks: the ids and state of the whole run
    are the numpy tracker's alone, embeddings included."""
    for emb_dim, cut in ((0, 40), (8, 95)):
        config = TrackConfig(appearance_weight=0.5 if emb_dim else 0.0)
        frames = _frames(make_scene("drops", seed=2), emb_dim=emb_dim)
        ref_ids, ref = _numpy_ids(frames, config)
        first_ids, first = _numpy_ids(frames[:cut], config)
        rest = CompiledByteTrack.from_snapshot(config, first.snapshot())
        assert len(rest) == len(first) and rest.next_id == first.next_id and rest.frames == cut
        more = [rest.update(b, s, c, t=t, embeddings=e) for t, b, s, c, e in frames[cut:]]
        np.testing.assert_array_equal(np.concatenate([first_ids, *more]), ref_ids)
        _assert_same_state(rest, ref)
        if emb_dim:
            np.testing.assert_allclose(rest.snapshot().emb, ref.snapshot().emb, rtol=1e-5, atol=1e-6)


def test_a_book_tracks_with_numpy_until_the_compiled_tracker_is_built(monkeypatch, caplog):
    """The run never waits for the build: the numpy tracker tracks the first batches and hands
    over once it is ready; the ids are the compiled (and numpy) tracker's over the whole run."""
    import threading

    gate = threading.Event()
    real = CompiledByteTrack.warm_up

    def slow(self):
        gate.wait(10)
        real(self)

    monkeypatch.setattr(CompiledByteTrack, "warm_up", slow)
    frames = _frames(make_scene("crossing", seed=0))
    want, _ = _compiled_ids(frames, TrackConfig())
    book = TrackBook(TrackConfig())
    got = []
    with caplog.at_level(logging.INFO, logger="vidpipe.track.book"):
        for k in range(0, len(frames), 32):
            if k == 96:
                gate.set()
                assert book.wait_built(10) and book.engine == "compiled"
            part = frames[k : k + 32]
            rows = np.concatenate([np.concatenate([f[1], f[2][:, None], f[3][:, None]], axis=1) for f in part])
            packed = PackedFrames(0, np.array([f[0] for f in part]), np.array([len(f[2]) for f in part]), rows.astype(np.float32))
            got.append(book.track(packed, first_id=1).ids)
    np.testing.assert_array_equal(np.concatenate(got), want)
    assert "stream 0: the compiled tracker takes over after 96 frames" in caplog.text


def test_assignment_and_match_equal_the_numpy_ones():
    """The compiled solver and gated match against vidpipe.track.assign's (which the assign tests
    hold to scipy's), on random matrices with ties (small integers), forbidden pairs and NaN."""
    from vidpipe.track import _kernel
    from vidpipe.track.assign import _sap_small, match

    rng = np.random.default_rng(0)
    for _ in range(400):
        n, m = sorted(rng.integers(1, 9, size=2))
        c = rng.integers(0, 4, size=(n, m)).astype(np.float64)
        assert _kernel._sap(c).tolist() == _sap_small(c.tolist(), n, m)
        t, d = rng.integers(0, 9, size=2)
        cost = rng.integers(0, 10, size=(t, d)) / 10.0
        cost[rng.random((t, d)) < 0.3] = np.inf
        cost[rng.random((t, d)) < 0.05] = np.nan
        r, c2 = np.empty(max(t, 1), np.int64), np.empty(max(t, 1), np.int64)
        k = _kernel._match(cost, 0.75, r, c2)
        want = match(cost, 0.75)
        assert (r[:k].tolist(), c2[:k].tolist()) == (want[0].tolist(), want[1].tolist())
