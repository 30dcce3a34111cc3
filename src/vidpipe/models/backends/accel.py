"""Opt-in speed-ups for PyTorch models on a GPU: CUDA graphs or ``torch.compile``.

``accelerate(model, mode, batch_size=, input_size=)`` returns a :class:`Model` that gives the same
outputs as ``model``:

- ``"none"``: ``model`` itself.
- ``"cudagraph"``: the forward at ``(batch_size, 3, H, W)`` is captured once into a CUDA graph
  (after a warm-up on a side stream) and replayed from a static input buffer; the outputs are
  cloned out of the graph's static buffers, so a result stays valid after the next call. A
  shorter batch (a deadline's partial batch of live streams, a file's last one) replays the same
  graph on its rows of the static input, when every output has the batch as its first dimension:
  the other rows hold an earlier batch's frames, computed and ignored (a detector's samples do
  not interact in eval mode). Any other shape runs eagerly. Removes the per-kernel launch cost
  that dominates small networks at large batch, and the first-call cost of every new batch size
  in eager mode: a live run's deadlines make batches of every size from 1 to ``batch_size``,
  and on an H100 at 64 streams the first eager call of each of those 31 sizes held the model's
  thread 40-140 ms (1-32 ms once they replay the graph; ``tools/bench-probes/drop_timeline.py``).
- ``"compile"``: ``torch.compile(model.forward, mode=compile_mode)`` (default
  ``"max-autotune-no-cudagraphs"``), compiled at once on a grey batch so the first real batch is
  not slow. Needs Triton.
- ``"auto"``: ``"cudagraph"`` for PyTorch-backed models (eager nn.Module, TorchScript,
  torch.export, Darknet); ``"none"`` for onnxruntime and TensorRT, which do their own graph
  optimisation.

On the CPU every mode returns ``model`` unchanged. When capture or compilation fails the model
runs eagerly and a warning says why. Not yet measured on a GPU: the lead's
``notes/gpu_models.py`` compares eager, this CUDA-graph wrapper and both ``torch.compile`` modes on
yolov3-tiny; until then ``"auto"``'s choice of CUDA graphs is provisional.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from vidpipe._capture_turns import capturing
from vidpipe._validate import check_choice
from vidpipe.errors import ModelError
from vidpipe.models.backends.batching import slice_raw
from vidpipe.models.backends.common import check_input_size, probe_input
from vidpipe.models.base import Model

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

AccelMode = Literal["none", "compile", "cudagraph", "auto"]
ACCEL_MODES = ("none", "compile", "cudagraph", "auto")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def clone_raw(raw: Any) -> Any:
    """A copy of every tensor in a raw output (same structure)."""
    import torch

    if isinstance(raw, torch.Tensor):
        return raw.clone()
    if isinstance(raw, Mapping):
        return {k: clone_raw(v) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return type(raw)(clone_raw(v) for v in raw)
    return raw


def _leading_dims(raw: Any) -> set[int]:
    """The first dimension of every tensor in a raw output (0 for a scalar tensor)."""
    import torch

    if isinstance(raw, torch.Tensor):
        return {raw.shape[0] if raw.dim() else 0}
    if isinstance(raw, Mapping):
        raw = list(raw.values())
    if isinstance(raw, (list, tuple)):
        return set().union(*(_leading_dims(v) for v in raw)) if raw else set()
    return {0}  # not a tensor: cannot be sliced by batch


class _CapturedForward:
    """One CUDA graph of ``fn`` for one input shape, with its static input and output buffers.

    ``batch`` is the captured batch size; ``partial`` says whether a shorter batch may replay it
    (every output tensor has ``batch`` rows first)."""

    def __init__(self, fn: Callable[["torch.Tensor"], Any], example: "torch.Tensor", *, warmup: int = 3) -> None:
        import torch

        self.static_in = example.clone()
        side = torch.cuda.Stream(device=example.device)
        side.wait_stream(torch.cuda.current_stream(example.device))
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(warmup):
                fn(self.static_in)
        torch.cuda.current_stream(example.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        # side threads' NVDEC driver calls wait (they would invalidate the capture)
        with capturing(), torch.inference_mode(), torch.cuda.graph(self.graph):
            self.static_out = fn(self.static_in)
        self.batch = int(example.shape[0])
        self.partial = _leading_dims(self.static_out) == {self.batch}

    def __call__(self, x: "torch.Tensor") -> Any:
        n = x.shape[0]
        self.static_in[:n].copy_(x)
        self.graph.replay()
        return clone_raw(self.static_out if n == self.batch else slice_raw(self.static_out, n))

    def takes(self, x: "torch.Tensor") -> bool:
        """Whether ``x`` (same dtype and device) can be run by this graph: its shape, or fewer
        rows of it when the outputs allow."""
        if x.shape[1:] != self.static_in.shape[1:]:
            return False
        n = x.shape[0]
        return n == self.batch or (self.partial and 0 < n < self.batch)


class AcceleratedModel(Model):
    """``inner`` behind a CUDA graph (per captured shape) or a compiled forward; same outputs.

    ``mode`` is what actually runs (``"cudagraph"``, ``"compile"`` or ``"none"`` after a failure);
    ``graphs`` maps captured input shapes ``(B, 3, H, W)`` to their graphs.
    """

    def __init__(self, inner: Model, mode: str) -> None:
        self.inner = inner
        self.info = inner.info
        self.device = inner.device
        self.dtype = inner.dtype
        self.mode = mode
        self.graphs: dict[tuple[int, ...], _CapturedForward] = {}
        self._compiled: Callable[["torch.Tensor"], Any] | None = None

    def forward(self, x: "torch.Tensor") -> Any:
        import torch

        graph = self._graph_for(x) if x.dtype == self.dtype and x.device == self.device else None
        with torch.inference_mode():
            if graph is not None:
                return graph(x)
            if self._compiled is not None:
                return self._compiled(x)
            return self.inner.forward(x)

    def _graph_for(self, x: "torch.Tensor") -> "_CapturedForward | None":
        """The graph of ``x``'s shape, else the smallest one that takes ``x``'s rows."""
        exact = self.graphs.get(tuple(x.shape))
        if exact is not None:
            return exact
        fits = [g for g in self.graphs.values() if g.takes(x)]
        return min(fits, key=lambda g: g.batch) if fits else None

    def __repr__(self) -> str:
        shapes = ", ".join(str(s) for s in self.graphs)
        return f"AcceleratedModel({self.inner!r}, mode={self.mode!r}, graphs=[{shapes}])"


def _capturable(model: Model) -> bool:
    from vidpipe.models.backends.onnx import OnnxModel
    from vidpipe.models.backends.tensorrt import TensorRTModel

    return not isinstance(model, (OnnxModel, TensorRTModel))


def accelerate(
    model: Model,
    mode: AccelMode = "auto",
    *,
    batch_size: int,
    input_size: Any = None,
    compile_mode: str = "max-autotune-no-cudagraphs",
) -> Model:
    """Wrap ``model`` for faster static-shape inference on CUDA (see the module docstring).

    Args:
        model: a loaded model (its ``forward`` takes ``(B, 3, H, W)`` ``model.dtype`` on ``model.device``).
        mode: ``"none"``, ``"compile"``, ``"cudagraph"`` or ``"auto"``.
        batch_size: the batch size to capture/compile for (the pipeline's batch size).
        input_size: ``(H, W)`` (default ``model.info.input_size``).
        compile_mode: ``torch.compile`` mode for ``mode="compile"``.
    """
    import torch

    check_choice("mode", mode, ACCEL_MODES)
    check_choice("compile_mode", compile_mode, COMPILE_MODES)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ModelError(f"accelerate: batch_size must be a positive int, got {batch_size!r}")
    size = check_input_size(input_size) or model.info.input_size
    if mode == "none" or model.device.type != "cuda":
        if mode not in ("none", "auto"):
            logger.info("accelerate(mode=%r): %s runs on %s, nothing to do", mode, model.info.name, model.device)
        return model
    if mode == "auto":
        mode = "cudagraph" if _capturable(model) else "none"
        if mode == "none":
            return model
    if not model.info.dynamic_batch and model.info.max_batch:
        batch_size = model.info.max_batch
    out = AcceleratedModel(model, mode)
    example = probe_input(batch_size, size, model.device, model.dtype)
    start = time.perf_counter()
    try:
        if mode == "cudagraph":
            out.graphs[tuple(example.shape)] = _CapturedForward(model.forward, example)
        else:
            compiled = torch.compile(model.forward, mode=compile_mode, dynamic=False)
            with torch.inference_mode():
                compiled(example)
            out._compiled = compiled
    except Exception as exc:  # noqa: BLE001 - any capture/compile failure falls back to eager
        logger.warning(
            "accelerate(mode=%r) failed for %s (%s: %s); running eagerly",
            mode, model.info.name, type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "",
        )
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
        return model
    logger.info(
        "accelerate: %s with %s at %s in %.1f s",
        model.info.name, mode, tuple(example.shape), time.perf_counter() - start,
    )
    return out
