"""``results_on_host``: a batch's detections to the host per frame, the letterbox undone in NumPy,
held against ``to_source`` (PyTorch) and a boolean mask per frame."""

from __future__ import annotations

import pytest
import torch

from vidpipe.post.boxes import to_source
from vidpipe.post.host import results_on_host
from vidpipe.types import Detections, FrameMeta, ModelInput


def _input(b: int) -> ModelInput:
    g = torch.Generator().manual_seed(b)
    frames = tuple(FrameMeta("clip.mp4", i, i, None, 640 + 16 * i, 360 + 9 * i) for i in range(b))
    return ModelInput(
        tensor=torch.zeros((b, 3, 8, 8)), frames=frames,
        scale=torch.rand((b, 2), generator=g) + 0.3, pad=torch.rand((b, 2), generator=g) * 60,
    )  # fmt: skip


def _dets(frames: list[int]) -> Detections:
    n = len(frames)
    g = torch.Generator().manual_seed(100 + n)
    xy = torch.rand((n, 2), generator=g) * 700 - 100  # some outside the frame: clipped
    return Detections(
        torch.cat([xy, xy + torch.rand((n, 2), generator=g) * 300], 1),
        torch.rand((n,), generator=g),
        torch.randint(0, 80, (n,), generator=g),
        torch.tensor(frames, dtype=torch.int64),
    )


@pytest.mark.parametrize(
    "frames", [[0, 0, 1, 3, 3, 3], [2, 0, 2, 1, 0], [5, 5], [1, 9, 0, -1, 1], []],
    ids=["sorted", "interleaved", "one-frame", "rows-past-the-batch", "none"],
)
def test_matches_to_source_and_a_mask_per_frame(frames):
    inp, d = _input(6), _dets(frames)
    per_frame, nbytes = results_on_host(d, inp)
    assert len(per_frame) == 6
    valid = (d.frame >= 0) & (d.frame < 6)
    mapped = to_source(d.select(valid), inp)  # (to_source indexes by frame: only rows of the batch)
    for i, got in enumerate(per_frame):
        m = mapped.frame == i
        assert got.device.type == "cpu"
        assert got.boxes.dtype == torch.float32 and got.class_ids.dtype == torch.int64
        assert torch.equal(got.boxes, mapped.boxes[m])  # the same float32 steps: bit-equal
        assert torch.equal(got.scores, mapped.scores[m]) and torch.equal(got.class_ids, mapped.class_ids[m])
        assert got.frame.tolist() == [0] * int(m.sum()) and got.track_ids is None
        Detections(got.boxes, got.scores, got.class_ids, got.frame)  # what the checks would say: valid
    assert nbytes == (4 * (7 * len(frames) + 4 * 6) if frames else 0)


def test_large_class_ids_and_rows_survive_the_float32_copy():
    b = 3000
    frames = tuple(FrameMeta("x", i, i, None, 100, 100) for i in range(b))
    inp = ModelInput(torch.zeros((b, 3, 1, 1)), frames, torch.ones((b, 2)), torch.zeros((b, 2)))
    d = Detections(torch.tensor([[1.0, 2.0, 3.0, 4.0]] * 2), torch.tensor([0.5, 0.25]),
                   torch.tensor([16_000_000, 7]), torch.tensor([2999, 1234]))  # fmt: skip
    per_frame, _ = results_on_host(d, inp)
    assert per_frame[2999].class_ids.tolist() == [16_000_000] and per_frame[1234].class_ids.tolist() == [7]
    assert per_frame[2999].boxes.tolist() == [[1.0, 2.0, 3.0, 4.0]]
