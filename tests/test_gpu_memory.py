"""``max_gpu_memory`` on the CPU: parsing the budget, splitting it among the run's parts, the error
when batch 1 does not fit, the decoders' buffer back-off arithmetic, the CLI flag, the summary line.
(The bound itself, on real GPU memory: tests/test_gpu_memory_gpu.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from vidpipe.errors import ConfigError, GpuMemoryError
from vidpipe.gpu_memory import MIN_DECODE_BUFFERS, GpuMemoryPlan, parse_gpu_memory, plan_gpu_memory, resolve_budget

MiB = 1 << 20
GiB = 1 << 30


@pytest.mark.parametrize(
    ("text", "want"),
    [("4GiB", 4 * GiB), ("512MiB", 512 * MiB), ("512M", 512 * MiB), ("1.5G", int(1.5 * GiB)), ("4GB", 4 * 10**9),
     ("2000000000", 2_000_000_000), ("0.5", 0.5), ("1", 1.0), (" 3 gib ", 3 * GiB), (0.25, 0.25), (GiB, GiB),
     (None, None)],
)  # fmt: skip
def test_parse_sizes_and_fractions(text, want):
    got = parse_gpu_memory(text)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("bad", ["lots", "0", "-1", "1.5", "4", "4XB", "", 0, -5, 1.5, 0.0, True, [1]])
def test_parse_rejects_with_the_argument_named(bad):
    with pytest.raises(ConfigError, match="max_gpu_memory"):
        parse_gpu_memory(bad)


def test_resolve_budget():
    assert resolve_budget(0.5, 80 * GiB) == 40 * GiB
    assert resolve_budget(4 * GiB, 80 * GiB) == 4 * GiB
    with pytest.raises(ConfigError, match="more than the GPU has"):
        resolve_budget(100 * GiB, 80 * GiB)


# a YOLOv3-tiny-like model at 416x416 FP16, a 1080p NV12 input
MODEL = dict(held=40 * MiB, act_fixed=20 * MiB, act_per_frame=12 * MiB, cuda_graph=True,
             input_frame_bytes=3 * 416 * 416 * 2, decode_frame_bytes=1620 * 1920, source_frame_bytes=3 * 1080 * 1920,
             queue_depth=4, decode_cap=4 * GiB)  # fmt: skip


def plan(budget, *, batch=32, sources=1, keep=False, **kw):
    return plan_gpu_memory(
        budget, total=80 * GiB, batch_size=batch, open_sources=sources, keep_frames=keep, **{**MODEL, **kw}
    )


def test_the_parts_add_up_to_the_budget_and_each_says_why():
    for budget in (512 * MiB, GiB, 4 * GiB, 16 * GiB):
        p = plan(budget)
        assert isinstance(p, GpuMemoryPlan)
        names = [name for name, _, _ in p.parts]
        assert names == ["held", "model", "inputs", "decode", "margin"]
        assert sum(n for _, n, _ in p.parts) <= budget
        assert all(why for _, _, why in p.parts)
        # the decoder gets at least its fewest buffers at the chosen batch
        assert p.decode_bytes >= MIN_DECODE_BUFFERS * p.batch_size * MODEL["decode_frame_bytes"]
        d = p.to_dict()
        assert d["budget_mib"] == budget // MiB and set(d["parts"]) == set(names)


def test_a_large_budget_keeps_the_batch_and_caps_the_decode_window():
    p = plan(40 * GiB)
    assert p.batch_size == 32
    assert p.decode_bytes == 4 * GiB  # never more than the default window


def test_a_small_budget_lowers_the_batch_but_not_below_what_fits():
    big, small = plan(4 * GiB), plan(GiB)
    assert big.batch_size == 32 and 1 <= small.batch_size < 32
    assert plan(GiB, batch=small.batch_size).batch_size == small.batch_size
    assert "lowered from 32" in small.describe()
    # batch + 1 would not have fitted with the decoder's fewest buffers
    p1 = plan(GiB, batch=small.batch_size + 1)
    assert p1.batch_size == small.batch_size


def test_more_sources_and_kept_frames_cost_more():
    one, four = plan(2 * GiB), plan(2 * GiB, sources=4)
    assert four.batch_size <= one.batch_size and four.decode_bytes < one.decode_bytes
    kept = plan(2 * GiB, keep=True)
    assert "kept frames" in [n for n, _, _ in kept.parts] and kept.batch_size <= one.batch_size


def test_each_batch_in_flight_costs_one_batch_of_inputs():
    one, three = plan(40 * GiB), plan(40 * GiB, in_flight=3)
    inputs = {p: dict((n, b) for n, b, _ in p.parts)["inputs"] for p in (one, three)}
    assert inputs[three] - inputs[one] == 2 * 32 * MODEL["input_frame_bytes"]
    assert "3 in flight" in dict((n, why) for n, _, why in three.parts)["inputs"]


def test_too_small_names_the_minimum_and_the_minimum_works():
    with pytest.raises(GpuMemoryError, match=r"too small .* even at batch 1.*give at least (\d+) MiB") as e:
        plan(100 * MiB)
    assert isinstance(e.value, MemoryError)  # a VidpipeError that is also the builtin
    minimum = int(str(e.value).rsplit("at least ", 1)[1].split()[0]) * MiB
    assert plan(minimum).batch_size >= 1
    with pytest.raises(GpuMemoryError):
        plan(minimum - 2 * MiB)


def test_the_pipeline_config_checks_the_budget():
    from vidpipe.pipeline_config import PipelineConfig

    assert PipelineConfig(max_gpu_memory="4GiB").max_gpu_memory == "4GiB"
    with pytest.raises(ConfigError, match="max_gpu_memory"):
        PipelineConfig(max_gpu_memory="lots")
    cfg = PipelineConfig(decode_buffer_bytes=64 * MiB)
    assert cfg.decode_options().gpu_buffer_bytes == 64 * MiB


# ------------------------------------------------------------------ decode buffers


def test_fit_batch():
    from vidpipe.decode.gpu_buffers import fit_batch

    frame = 1620 * 1920
    assert fit_batch(32, 4 * GiB, frame, source="x") == 32
    assert fit_batch(32, 40 * frame, frame, source="x") == 10  # 4 buffers of 10 frames
    with pytest.raises(GpuMemoryError, match="cannot hold 4 frames"):
        fit_batch(32, 3 * frame, frame, source="x")


class _TightPool:
    """A CPU BufferPool that fails like CUDA's allocator past ``limit`` bytes (the GPU tests use
    real CUDA out-of-memory errors; this checks the arithmetic of the back-off in CI)."""

    def __init__(self, limit: int) -> None:
        from vidpipe.ops.pool import BufferPool

        self.inner = BufferPool("cpu")
        self.device = self.inner.device
        self.limit = limit

    def acquire(self, shape, dtype, **kw):
        n = dtype.itemsize
        for s in shape:
            n *= s
        if self.inner.stats.allocated_bytes + n > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate (test pool)")
        return self.inner.acquire(shape, dtype, **kw)

    def release(self, buf, event=None):
        self.inner.release(buf, event)

    def clear(self):
        self.inner.clear()


def test_reserve_buffers_backs_off_window_then_batch(caplog):
    from vidpipe.decode.gpu_buffers import reserve_buffers

    row = (24, 16)  # 384 bytes a frame
    pool = _TightPool(limit=10 * 8 * 384)  # room for 10 buffers of 8 frames
    assert reserve_buffers(pool, row, torch.uint8, 8, 64, source="x") == (8, 64)  # 10 buffers: fits
    pool = _TightPool(limit=5 * 8 * 384)
    with caplog.at_level("WARNING"):
        assert reserve_buffers(pool, row, torch.uint8, 8, 64, source="clip.mp4") == (8, 16)  # 4 buffers
    assert "out of GPU memory" in caplog.text and "clip.mp4" in caplog.text
    pool = _TightPool(limit=4 * 3 * 384)
    assert reserve_buffers(pool, row, torch.uint8, 8, 64, source="x") == (2, 4)  # batch halved twice
    with pytest.raises(GpuMemoryError, match="even at batch 1"):
        reserve_buffers(_TightPool(limit=3 * 384), row, torch.uint8, 8, 64, source="x")


def test_ring_backs_off_slots_then_batch():
    from vidpipe.decode.gpu_buffers import ring_with_backoff

    tried = []

    def make(batch, slots):
        tried.append((batch, slots))
        if batch * slots > 12:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (test)")
        return ("ring", batch, slots)

    ring, batch = ring_with_backoff(make, 8, 16, 100, source="x")
    assert ring == ("ring", 4, 3) and batch == 4
    assert tried == [(8, 16), (8, 8), (8, 4), (8, 3), (4, 3)]
    with pytest.raises(ValueError):  # other errors are not out-of-memory: raised as they are
        ring_with_backoff(lambda b, k: (_ for _ in ()).throw(ValueError("no")), 8, 4, 1, source="x")


# ------------------------------------------------------------------ CLI and summary


def test_cli_rejects_a_bad_size_naming_the_flag():
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", "x.mp4", "--max-gpu-memory", "lots"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2
    assert "--max-gpu-memory" in p.stderr and "4GiB" in p.stderr


def test_cli_on_the_cpu_ignores_the_budget(bikes_path, tmp_path):
    out = tmp_path / "d.csv"
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(bikes_path), "--device", "cpu",
                        "--max-frames", "4", "--max-gpu-memory", "1GiB", "-o", str(out)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert out.exists() and "gpu memory" not in p.stdout  # nothing held on a GPU


def test_summary_line():
    from vidpipe.summary import RunSummary, gpu_memory_text

    report = plan(GiB).to_dict() | {"peak_reserved_mib": 700, "peak_allocated_mib": 500}
    line = gpu_memory_text(report)
    assert line.startswith("gpu memory: budget 1024 MiB: held 40, model ")
    assert "decode" in line and "peak reserved 700 MiB" in line and "lowered from 32" in line
    assert gpu_memory_text({"budget_mib": None, "reserved_mib": 5, "allocated_mib": 1}).startswith(
        "gpu memory: no budget"
    )
    assert gpu_memory_text(None) == ""
    assert "rings" not in line  # none: the decode ran in this process
    rings = gpu_memory_text(report | {"decode_rings_mib": 150})
    assert rings.endswith("peak reserved 700 MiB, allocated 500 MiB, decoder processes' rings 150 MiB")
    text = RunSummary(stats={"gpu_memory": report}).format_text()
    assert "gpu memory: budget 1024 MiB" in text


def test_the_letterbox_work_buffer_is_one_batch_for_the_whole_run():
    per_frame = 3 * 1080 * 416 * 4  # float32, source height x resized width
    p = plan(16 * GiB, sources=3, scratch_frame_bytes=per_frame)
    parts = {name: n for name, n, _ in p.parts}
    assert parts["preprocess"] == p.batch_size * per_frame  # not per source
    assert "preprocess" not in {name for name, _, _ in plan(16 * GiB).parts}
    assert plan(GiB, scratch_frame_bytes=per_frame).batch_size < plan(GiB).batch_size


def test_the_run_counts_the_work_buffer_of_its_largest_input(bikes_path):
    from vidpipe.pipeline_memory import _frame_sizes
    from vidpipe.sources.spec import classify_one

    nv12, rgb, scratch = _frame_sizes([], (416, 416))  # no inputs: a nominal 1080p frame
    assert (nv12, rgb, scratch) == (1620 * 1920, 3 * 1080 * 1920, 3 * 1080 * 416 * 4)
    nv12, rgb, scratch = _frame_sizes(classify_one(str(bikes_path)), (416, 416))  # 640x272
    assert (nv12, rgb, scratch) == (408 * 640, 3 * 272 * 640, 3 * 272 * 416 * 4)
