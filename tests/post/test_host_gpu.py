"""``results_on_host`` on a GPU: a run's detections copied to the host per batch and mapped to
source pixels there (:mod:`vidpipe.post.host`) are those a run that leaves them on the GPU, mapped
there by ``to_source``, gives: bit-equal, on real 1080p street footage and the bundled clip with
NVDEC (CUDA graph, decode threads); and the host's float32 steps are CUDA's, for batches that mix
letterboxes."""

from __future__ import annotations

import pytest
import torch

import vidpipe

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture(scope="module")
def street(tmp_path_factory):
    pytest.importorskip("PyNvVideoCodec")
    from vidpipe.bench.realclip import build_real_clip

    return build_real_clip(tmp_path_factory.mktemp("host"), frames=400)


def _results(inputs, *, on_host: bool) -> dict:
    out = {}
    run = vidpipe.detect(inputs, device="cuda", decoder="nvdec", results_on_host=on_host, decoder_processes=0)
    for batch in run.batches():
        for r in batch:
            d = r.detections
            assert d.device.type == ("cpu" if on_host else "cuda")
            d = d.cpu()
            out[(r.meta.stream_id, r.meta.index)] = (d.boxes, d.scores, d.class_ids, d.frame)
    return out


@pytest.mark.parametrize("clip", ["street", "bikes"])
def test_host_mapping_equals_the_gpu_mapping(clip, street, bikes_path):
    inputs = str(street if clip == "street" else bikes_path)  # 1920x1080; 640x272 (padded top and bottom)
    host, gpu = _results(inputs, on_host=True), _results(inputs, on_host=False)
    assert host.keys() == gpu.keys() and len(host) == (400 if clip == "street" else 250)
    rows = 0
    for key, (boxes, scores, class_ids, frame) in gpu.items():
        got = host[key]
        assert torch.equal(got[0], boxes), key
        assert torch.equal(got[1], scores) and torch.equal(got[2], class_ids) and torch.equal(got[3], frame), key
        rows += len(boxes)
    assert rows > 200  # people, bicycles and cars in most frames


def test_host_arithmetic_is_cudas_for_mixed_letterboxes():
    from vidpipe.post.boxes import to_source
    from vidpipe.post.host import results_on_host
    from vidpipe.types import Detections, FrameMeta, ModelInput

    g = torch.Generator(device="cuda").manual_seed(0)
    b, k = 32, 5000
    sizes = [(1920, 1080), (640, 272), (1280, 720), (480, 640)] * 8  # landscape, wide, portrait
    frames = tuple(FrameMeta("x", i, i, None, w, h) for i, (w, h) in enumerate(sizes))
    scale = torch.tensor([[416 / w, 416 / w] if w >= h else [416 / h, 416 / h] for w, h in sizes], device="cuda")
    pad = torch.tensor([[(416 - w * s[0].item()) / 2, (416 - h * s[1].item()) / 2] for (w, h), s in zip(sizes, scale)],
                       device="cuda")  # fmt: skip
    inp = ModelInput(torch.zeros((b, 3, 416, 416), device="cuda"), frames, scale, pad)
    xy = torch.rand((k, 2), generator=g, device="cuda") * 480 - 30
    dets = Detections(torch.cat([xy, xy + torch.rand((k, 2), generator=g, device="cuda") * 200], 1),
                      torch.rand((k,), generator=g, device="cuda"), torch.randint(0, 80, (k,), device="cuda"),
                      torch.randint(0, b, (k,), device="cuda").sort().values)  # fmt: skip
    want = to_source(dets, inp).cpu()
    per_frame, _ = results_on_host(dets, inp)
    for i, got in enumerate(per_frame):
        m = want.frame == i
        assert torch.equal(got.boxes, want.boxes[m]), (i, (got.boxes - want.boxes[m]).abs().max())
        assert torch.equal(got.scores, want.scores[m]) and torch.equal(got.class_ids, want.class_ids[m])
