"""accelerate(): a no-op on the CPU; CUDA-graph capture and compile on a GPU give eager's outputs."""

from __future__ import annotations

import known_nets as kn
import pytest
import torch

from vidpipe.errors import ConfigError, ModelError
from vidpipe.models.backends import accelerate, from_module


class _Conv(torch.nn.Module):
    """A small real network: conv + pooling into a YOLOv8-shaped output [B, 4 + 3, N]."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 7, 3, stride=4, padding=1)

    def forward(self, x):
        y = self.conv(x).flatten(2)  # [B, 7, H/4 * W/4]
        return torch.cat([y[:, :4].abs() * 10, y[:, 4:].sigmoid()], dim=1)


@pytest.mark.parametrize("mode", ["none", "compile", "cudagraph", "auto"])
def test_cpu_is_a_no_op(mode):
    model = from_module(_Conv(), input_size=64, device="cpu")
    assert accelerate(model, mode, batch_size=4) is model


def test_invalid_arguments():
    model = from_module(_Conv(), input_size=64, device="cpu")
    with pytest.raises(ConfigError, match="'cudagraph'"):
        accelerate(model, "graphs", batch_size=4)
    with pytest.raises(ModelError, match="batch_size"):
        accelerate(model, "auto", batch_size=0)


def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


@pytest.mark.gpu
def test_cudagraph_matches_eager_and_outputs_survive_the_next_call():
    _cuda()
    model = from_module(_Conv(), input_size=64, device="cuda")
    fast = accelerate(model, "cudagraph", batch_size=4)
    assert fast is not model and fast.mode == "cudagraph" and (4, 3, 64, 64) in fast.graphs
    a = torch.rand(4, 3, 64, 64, device="cuda", dtype=model.dtype)
    b = torch.rand(4, 3, 64, 64, device="cuda", dtype=model.dtype)
    ra = fast(a)
    rb = fast(b)  # replays into the same static buffers: ra must be a copy
    torch.testing.assert_close(ra, model(a))
    torch.testing.assert_close(rb, model(b))
    big = torch.rand(5, 3, 64, 64, device="cuda", dtype=model.dtype)  # more rows than captured: eager
    torch.testing.assert_close(fast(big), model(big))


@pytest.mark.gpu
def test_a_shorter_batch_replays_the_graph_on_its_rows():
    """A partial batch (a live deadline's) replays the captured graph: eager's outputs, whatever
    the rows it does not use hold (here NaN from the batch before), and no eager first call."""
    _cuda()
    model = from_module(_Conv(), input_size=64, device="cuda")
    fast = accelerate(model, "cudagraph", batch_size=4)
    graph = fast.graphs[(4, 3, 64, 64)]
    assert graph.partial
    poison = torch.full((4, 3, 64, 64), float("nan"), device="cuda", dtype=model.dtype)
    assert torch.isnan(fast(poison)).all()
    eager = []
    real_forward = model.forward
    for n in (3, 1, 2):
        x = torch.rand(n, 3, 64, 64, device="cuda", dtype=model.dtype)
        model.forward = lambda t: (eager.append(t.shape[0]), real_forward(t))[1]
        out = fast(x)
        model.forward = real_forward
        assert out.shape[0] == n and not torch.isnan(out).any()
        torch.testing.assert_close(out, model(x), atol=1e-2, rtol=1e-2)  # cuDNN may pick another algorithm per batch
    assert eager == []
    # outputs whose first dimension is not the batch cannot be sliced: shorter batches run eagerly
    from vidpipe.models.backends.accel import _CapturedForward

    example = torch.rand(4, 3, 64, 64, device="cuda", dtype=model.dtype)
    batch_last = _CapturedForward(lambda t: t.mean(dim=(2, 3)).t().contiguous(), example)
    assert not batch_last.partial and batch_last.takes(example) and not batch_last.takes(example[:3])


@pytest.mark.gpu
def test_cudagraph_with_dict_outputs():
    _cuda()
    model = from_module(kn.DetrNet(), input_size=(kn.H, kn.W), device="cuda", names=["a", "b", "c"])
    fast = accelerate(model, "auto", batch_size=2)
    x = kn.batch_of_two(model.dtype, "cuda")
    out, ref = fast(x), model(x)
    for k in ref:
        torch.testing.assert_close(out[k], ref[k])


@pytest.mark.gpu
@pytest.mark.slow
def test_compile_matches_eager():
    _cuda()
    pytest.importorskip("triton")
    model = from_module(_Conv(), input_size=64, device="cuda")
    fast = accelerate(model, "compile", batch_size=2, compile_mode="default")
    x = torch.rand(2, 3, 64, 64, device="cuda", dtype=model.dtype)
    torch.testing.assert_close(fast(x), model(x), atol=1e-2, rtol=1e-2)
