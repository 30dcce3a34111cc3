"""The ``embed`` stage: crops of real decoded frames through small generated models (no downloads),
rows aligned with the detections, file-loaded models equal to the module, the Parquet output and
the ``--embeddings`` flag."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import warnings

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

import vidpipe
from vidpipe.crops import ColorGridEmbedder, EmbedStage, load_embedder
from vidpipe.crops.parquet import EMBEDDING_COLUMNS, EmbeddingsParquet
from vidpipe.data import sample_video
from vidpipe.errors import ConfigError, ModelError
from vidpipe.types import Detections

COLOURS = ("red", "green", "blue")


class TinyNet(torch.nn.Module):
    """A small conv net with fixed seeded weights: (N, 3, h, w) -> (N, 16)."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2)
        self.fc = torch.nn.Linear(8, 16)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.conv(x)).mean((2, 3)))


@pytest.fixture(scope="module")
def boxes_results(make_clip):
    """Kept frames of a real run over a clip of three moving coloured boxes, with the clip's
    ground-truth boxes as detections (class = colour: 0 red, 1 green, 2 blue)."""
    clip = make_clip(".mp4", frames=12, gop=6, width=320, height=192)
    out = []
    for r in vidpipe.detect(clip.path, device="cpu", keep_frames=True, batch_size=6):
        gt = clip.boxes[r.index]
        b = torch.tensor([gt[c] for c in COLOURS], dtype=torch.float32)
        det = Detections(b, torch.ones(3), torch.arange(3), torch.zeros(3, dtype=torch.int64))
        out.append(dataclasses.replace(r, detections=det, names=COLOURS))
    return out


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(F.cosine_similarity(a[None], b[None]))


@pytest.mark.parametrize("model", [None, TinyNet()], ids=["colour-grid", "tiny-net"])
def test_same_object_similar_different_objects_apart(boxes_results, model):
    stage = EmbedStage(model, size=(32, 32))
    out = stage.process(boxes_results)
    assert len(out) == len(boxes_results)
    embs = torch.stack([r.embeddings for r in out])  # (frames, 3 objects, D)
    assert embs.dtype == torch.float32 and embs.shape[1] == 3 and not torch.isnan(embs).any()
    torch.testing.assert_close(embs.norm(dim=2), torch.ones(embs.shape[:2]))  # L2-normalised
    same = min(_cos(embs[0, k], embs[f, k]) for k in range(3) for f in range(1, len(out)))
    apart = max(_cos(embs[f, a], embs[f, b]) for f in range(len(out)) for a in range(3) for b in range(a + 1, 3))
    assert same > 0.99, same
    assert apart < same - 0.05, (apart, same)
    if model is None:  # mean colours: red, green and blue are orthogonal
        assert apart < 0.2, apart
    rep = stage.report()
    assert rep["frames"] == len(out) and rep["crops"] == 3 * len(out) and rep["dim"] == embs.shape[2]


def test_rows_of_other_classes_are_nan(boxes_results):
    out = EmbedStage(classes="green,blue", size=(16, 16), normalize=False).process(boxes_results[:3])
    for r in out:
        e = r.embeddings
        assert e.shape == (3, 24)
        assert torch.isnan(e[0]).all() and not torch.isnan(e[1:]).any()
    green = out[0].embeddings[1].view(3, 8).mean(1)  # mean colour per channel, not normalised
    assert green[1] > 0.9 and green[0] < 0.1 and green[2] < 0.1, green


def test_mean_std_and_batches_of_crops(boxes_results):
    a = EmbedStage(TinyNet(), size=(24, 24), batch_size=2).process(boxes_results[:4])
    b = EmbedStage(TinyNet(), size=(24, 24), batch_size=512).process(boxes_results[:4])
    for x, y in zip(a, b):
        torch.testing.assert_close(x.embeddings, y.embeddings, rtol=1e-5, atol=1e-5)
    c = EmbedStage(TinyNet(), size=(24, 24), mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)).process(boxes_results[:1])
    ref = EmbedStage(lambda x: TinyNet()((x - 0.5) / 0.25), size=(24, 24)).process(boxes_results[:1])
    torch.testing.assert_close(c[0].embeddings, ref[0].embeddings, rtol=1e-5, atol=1e-5)


def test_model_files_embed_like_the_module(boxes_results, tmp_path):
    net = TinyNet().eval()
    x = torch.rand((2, 3, 32, 32))
    ts, ex = tmp_path / "tiny.torchscript", tmp_path / "tiny.pt2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.trace(net, x), str(ts))
        batch = torch.export.Dim("batch", min=1, max=1024)
        torch.export.save(torch.export.export(net, (x,), dynamic_shapes={"x": {0: batch}}), str(ex))
    files = [ts, ex]
    try:
        import onnxruntime  # noqa: F401

        onnx = tmp_path / "tiny.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, (x,), str(onnx), dynamo=False, input_names=["crops"],
                              dynamic_axes={"crops": {0: "n"}}, opset_version=17)  # fmt: skip
        files.append(onnx)
    except ImportError:
        pass
    want = EmbedStage(net, size=(32, 32)).process(boxes_results[:3])
    for path in files:
        got = EmbedStage(str(path), size=(32, 32)).process(boxes_results[:3])
        for g, w in zip(got, want):
            torch.testing.assert_close(g.embeddings, w.embeddings, rtol=1e-4, atol=1e-4, msg=str(path))
    emb = load_embedder(str(ts))
    assert emb.name == "tiny.torchscript" and emb.dtype == torch.float32


def test_bad_models_and_options(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        EmbedStage(str(tmp_path / "missing.onnx"))
    pickled = tmp_path / "net.pt"
    torch.save(TinyNet(), pickled)
    with pytest.raises(ModelError, match="pickled"):
        load_embedder(str(pickled))
    with pytest.raises(ConfigError, match="not a torch module"):
        load_embedder(42)
    with pytest.raises(ConfigError, match="mean and std"):
        EmbedStage(mean=(0.5, 0.5, 0.5))
    bad = EmbedStage(lambda x: x.mean((2, 3)).repeat(2, 1), size=(8, 8))  # 2N rows for N crops
    with pytest.raises(ModelError, match="expected"):
        bad.process([_one_result()])
    with pytest.raises(ConfigError, match="^classes: unknown class .giraffe-ish"):
        EmbedStage(classes="giraffe-ish").process([_one_result()])


def _one_result():
    from vidpipe.types import FrameMeta, FrameResult

    img = torch.full((3, 16, 16), 100, dtype=torch.uint8)
    det = Detections(torch.tensor([[0.0, 0.0, 8.0, 8.0]]), torch.ones(1), torch.zeros(1, dtype=torch.int64),
                     torch.zeros(1, dtype=torch.int64))  # fmt: skip
    return FrameResult(FrameMeta("x", 0, 0, None, 16, 16), det, names=("person",), image=img)


def test_colour_grid_embedder():
    x = torch.zeros((2, 3, 8, 4))
    x[0, 0] = 1.0  # all red
    x[1, 2, :4] = 1.0  # blue top half
    e = ColorGridEmbedder((2, 1))(x)
    assert e.shape == (2, 6)
    assert e[0].tolist() == [1, 1, 0, 0, 0, 0] and e[1].tolist() == [0, 0, 0, 0, 1, 0]


def test_run_with_embed_stage_and_parquet_file(tmp_path):
    """A real run (bundled street clip): the run keeps frames because the stage needs them,
    embeddings align with the detections, people only; the file has one row per person."""
    path = tmp_path / "emb.parquet"
    stage, writer = EmbedStage(classes="person", size=(64, 32)), EmbeddingsParquet(path)
    run = vidpipe.detect(str(sample_video()), device="cpu", frame_skip=10, batch_size=8, stages=[stage, writer])
    results = list(run)
    assert run.config.keep_frames
    people = 0
    for r in results:
        assert r.embeddings.shape == (len(r.detections), 24)
        is_person = r.detections.class_ids == 0
        assert torch.equal(torch.isnan(r.embeddings[:, 0]), ~is_person)
        people += int(is_person.sum())
    assert people > 5  # the clip has people in several of these frames
    summary = run.summary().to_dict()
    assert summary["embed"]["crops"] == people and summary["embeddings_file"]["rows"] == people
    table = pq.read_table(path)
    assert table.column_names == list(EMBEDDING_COLUMNS) and table.num_rows == people
    assert str(table.schema.field("embedding").type) == "fixed_size_list<element: float>[24]"
    rows = table.to_pylist()
    by_frame = {r.index: r for r in results}
    for row in rows:
        r = by_frame[row["frame"]]
        assert row["class_name"] == "person" and row["track_id"] is None and row["stream_id"] == 0
        assert row["pts"] == pytest.approx(r.pts)
        np.testing.assert_allclose(row["embedding"], r.embeddings[row["det"]].numpy(), rtol=1e-6)
    assert not list(tmp_path.glob(".*tmp*"))  # the temporary file was renamed into place


def test_cli_embeddings_flag(tmp_path):
    out, emb = tmp_path / "d.csv", tmp_path / "e.parquet"
    p = subprocess.run(
        [sys.executable, "-m", "vidpipe", "detect", "--device", "cpu", "--frame-skip", "25", "-q", "-o", str(out),
         "--embeddings", str(emb), "--embed-classes", "person,bicycle", "--embed-size", "64x32"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    t = pq.read_table(emb)
    assert t.num_rows > 0 and set(t.column("class_name").to_pylist()) <= {"person", "bicycle"}
    meta = json.loads((tmp_path / "d.csv.meta.json").read_text())
    assert meta["embed"]["size"] == [64, 32] and meta["embeddings_file"]["rows"] == t.num_rows
    bad = subprocess.run(
        [sys.executable, "-m", "vidpipe", "detect", "--device", "cpu", "-q", "-o", str(out), "--embeddings", "x.csv"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert bad.returncode == 2 and "--embeddings x.csv" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_cli_stage_order(tmp_path):
    """embed first (a tracker after it reads the embeddings), the writer after the others (it
    sees track ids), then the command drops the frames it does not need."""
    import argparse

    from vidpipe.cli._embed_args import add_embed_args, with_embed_stages

    p = argparse.ArgumentParser()
    add_embed_args(p)
    assert with_embed_stages(p.parse_args([]), ["tracker"]) == ["tracker"]
    stages = with_embed_stages(p.parse_args(["--embeddings", str(tmp_path / "e.parquet")]), ["tracker"])
    assert [getattr(s, "name", s) for s in stages] == ["embed", "tracker", "embeddings_file", "release_frames"]
    r = _one_result()
    (out,) = stages[-1].process([r])
    assert out.image is None and r.image is not None and out.detections is r.detections
