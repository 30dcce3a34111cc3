"""``max_gpu_memory`` and out-of-memory back-off on a real GPU (skipped without CUDA / NVDEC).

Out-of-memory errors here are real: PyTorch's allocator is capped
(``torch.cuda.set_per_process_memory_fraction``, by the run itself or by the test) and the
allocation that would pass the cap fails inside CUDA's caching allocator.

- a run under a 1 GiB budget (bikes.mp4, threads and decoder processes; a generated 1080p clip)
  keeps ``torch.cuda.max_memory_reserved()`` within it and finds what an unbounded run at the same
  batch finds; the summary and ``<output>.meta.json`` say what each part got;
- NVDEC's decode buffers (threads) and ring (decoder processes) back off on a real out-of-memory
  error and decode the same bytes; when not even batch 1 fits: one clear GpuMemoryError;
- the model backs off (batch 128 under a cap) and finds what a batch-8 run finds;
- the CLI: ``--max-gpu-memory`` too small -> one line naming the flag and the minimum, exit 2.
"""

from __future__ import annotations

import gc
import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import vidpipe
from vidpipe.errors import GpuMemoryError

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(scope="module", autouse=True)
def _stop_decoder_processes():
    yield
    from vidpipe.decode.procpool import close_pools

    close_pools()


@pytest.fixture(autouse=True)
def _uncapped():
    yield
    torch.cuda.set_per_process_memory_fraction(1.0)


def _fresh() -> None:
    """No cached blocks: the allocator's reserve is what live tensors hold."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.ipc_collect()
    torch.cuda.empty_cache()


def _budget() -> int:
    """1 GiB for the run, plus what earlier tests of this process still hold, if much."""
    held = torch.cuda.memory_allocated()
    return GiB + (-(-held // MiB) * MiB if held > 64 * MiB else 0)


def _cap(limit: int) -> None:
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    torch.cuda.set_per_process_memory_fraction(limit / total)


def _detections(run) -> dict:
    out = {}
    for r in run:
        d = r.detections
        out[r.index] = (d.boxes.cpu().numpy(), d.scores.cpu().numpy(), d.class_ids.cpu().numpy())
    return out


def _unmatched(a: dict, b: dict, conf: float = 0.25) -> list:
    """Detections of ``a`` with no detection of ``b`` in the same frame of the same class, within
    1 px and 0.01 of score (FP16 kernels may differ by batch); boxes at the threshold may flip."""
    missing = []
    for i, (boxes, scores, classes) in a.items():
        ob, os_, oc = b[i]
        for box, s, c in zip(boxes, scores, classes):
            if s < conf + 0.01:
                continue
            hit = (oc == c) & (np.abs(ob - box).max(axis=1, initial=0) <= 1.0) & (np.abs(os_ - s) <= 0.01)
            if not hit.any():
                missing.append((i, int(c), float(s), box.tolist()))
    return missing


def _assert_same(got: dict, want: dict, *, conf: float = 0.25, need_some: bool = True) -> None:
    """The same frames and detections; FP16 kernels of another batch composition may move a
    score by a little, so at most 0.5% of the detections (at least 1) may lack a match."""
    assert sorted(got) == sorted(want)
    total = sum(len(v[1]) for v in want.values())
    if need_some:
        assert total > 0
    allowed = max(1, total // 200)
    miss_a, miss_b = _unmatched(want, got, conf), _unmatched(got, want, conf)
    assert len(miss_a) <= allowed and len(miss_b) <= allowed, (total, miss_a[:5], miss_b[:5])


def _bounded_run(path, processes: int, conf: float = 0.25) -> None:
    _fresh()
    budget = _budget()
    run = vidpipe.detect(path, device="cuda", decoder="nvdec", results_on_host=True, max_gpu_memory=budget,
                         decoder_processes=processes, conf=conf)  # fmt: skip
    got = _detections(run)
    peak = torch.cuda.max_memory_reserved()  # since the run started (it restarts the counters)
    summary = run.summary()
    st = run.states[0]
    assert st.status == "ok" and st.decoder == "nvdec", (st.status, st.error, st.decoder_reason)
    report = summary.stats["gpu_memory"]
    assert report["budget_mib"] == budget // MiB
    rings = report["decode_rings_mib"]  # decoder processes' rings: the driver's memory, not the allocator's
    assert peak + rings * MiB <= budget, (peak / MiB, report)
    assert report["peak_reserved_mib"] + rings <= budget // MiB
    assert {"held", "model", "inputs", "decode", "margin"} <= set(report["parts"])
    assert f"gpu memory: budget {budget // MiB} MiB" in summary.format_text()
    assert torch.cuda.get_per_process_memory_fraction() == 1.0  # the cap ends with the run
    batch = report["batch_size"]
    assert 1 <= batch <= 32
    del run
    _fresh()
    ref = vidpipe.detect(path, device="cuda", decoder="nvdec", results_on_host=True, batch_size=batch,
                         decoder_processes=processes, conf=conf)  # fmt: skip
    want = _detections(ref)
    assert ref.states[0].status == "ok"
    _assert_same(got, want, conf=conf, need_some=conf >= 0.25)


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_bikes_under_1gib_same_detections(bikes_path, processes):
    _bounded_run(bikes_path, processes)


def test_1080p_under_1gib_same_detections(make_clip):
    clip = make_clip(".mp4", width=1920, height=1080, frames=48, gop=12, fps=25)
    _bounded_run(clip.path, 0, conf=0.05)  # coloured boxes: few confident detections


# ------------------------------------------------------------------ decode buffers


def _decode_md5(path, batch: int, processes: int = 0):
    """``(decoder, [(index, md5 of the frame's NV12 bytes)], [batch lengths])``."""
    from vidpipe.decode.nvdec import NvdecDecoder

    dec = NvdecDecoder(str(path), device="cuda", processes=processes)
    sums, sizes = [], []
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the decoder's stream contract
        for b in dec.batches(batch):
            host = b.data.cpu()
            sizes.append(len(b))
            sums += [(m.index, hashlib.md5(host[i].numpy().tobytes()).hexdigest()) for i, m in enumerate(b.frames)]
    return dec, sums, sizes


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_decode_buffers_back_off_on_a_real_oom(make_clip, processes, caplog):
    from vidpipe.decode.procpool import close_pools

    clip = make_clip(".mp4", width=1920, height=1080, frames=96, gop=12, fps=25)
    dec, want, _ = _decode_md5(clip.path, 32)  # unbounded, threads: the reference bytes
    assert len(want) == 96
    del dec
    close_pools()  # no ring of an earlier run to reuse: the capped run allocates its own
    _fresh()
    # 1080p NV12 is 3.1 MB a frame: the window's buffers at batch 32 (5 or 3 x 32 frames, ~300-500
    # MB) cannot be allocated; 4 buffers of 16 frames (threads) or 3 slots of 16 (ring) can
    _cap(torch.cuda.memory_reserved() + 260 * MiB)
    with caplog.at_level("WARNING"):
        dec, got, sizes = _decode_md5(clip.path, 32, processes=processes)
    torch.cuda.set_per_process_memory_fraction(1.0)
    assert dec.stats()["processes"] == processes
    assert dec.backoff is not None and dec.backoff[0] < 32, dec.backoff
    assert dec.stats()["buffer_backoff"]["batch"] == dec.backoff[0]
    assert max(sizes) == dec.backoff[0]
    assert "out of GPU memory" in caplog.text
    assert got == want  # the same frames, byte for byte, in the same order


def test_decode_fails_clearly_when_not_even_batch_1_fits(make_clip):
    clip = make_clip(".mp4", width=1920, height=1080, frames=24, gop=12, fps=25)
    _fresh()
    _cap(torch.cuda.memory_reserved() + 4 * MiB)  # 4 frames of 1080p need 12 MB
    with pytest.raises(GpuMemoryError, match="even at batch 1") as e:
        _decode_md5(clip.path, 8)
    assert "\n" not in str(e.value) and clip.path.name in str(e.value)


# ------------------------------------------------------------------ the model


def test_model_backs_off_under_a_real_cap(bikes_path):
    _fresh()
    common = dict(device="cuda", decoder="nvdec", results_on_host=True, accel="none", decoder_processes=0,
                  max_frames=128)  # fmt: skip
    torch.cuda.reset_peak_memory_stats()
    ref = vidpipe.detect(bikes_path, batch_size=8, **common)
    want = _detections(ref)
    r8 = torch.cuda.max_memory_reserved()  # everything a batch-8 run needs
    del ref
    _fresh()
    # batch 128 (one chunk of 128 frames): decode buffers ~134 MB and the model input ~133 MB fit
    # in the 400 MB above batch 8's needs, YOLOv3-tiny's activations at 128 (~12 MB a frame at
    # 416x416 FP16) do not: the warm-up and the first batches run out of memory, the batch halves
    _cap(r8 + 400 * MiB)
    run = vidpipe.detect(bikes_path, batch_size=128, **common)
    got = _detections(run)
    torch.cuda.set_per_process_memory_fraction(1.0)
    assert run.states[0].status == "ok", run.states[0].error
    assert run.model_batch_limit is not None and run.model_batch_limit < 128
    assert run.summary().stats["model_batch_limit"] == run.model_batch_limit
    assert len(got) == 128
    _assert_same(got, want)


# ------------------------------------------------------------------ the CLI


def test_cli_budget_too_small_and_a_bounded_run(bikes_path, tmp_path):
    out = tmp_path / "d.csv"
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(bikes_path), "--device", "cuda",
                        "--max-gpu-memory", "64MiB", "-o", str(out)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 2, p.stderr
    err = [line for line in p.stderr.splitlines() if line.startswith("vidpipe: error:")]
    assert len(err) == 1 and "--max-gpu-memory 64 MiB is too small" in err[0] and "give at least" in err[0], p.stderr
    assert not out.exists()
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(bikes_path), "--device", "cuda",
                        "--max-gpu-memory", "1GiB", "-o", str(out)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "gpu memory: budget 1024 MiB" in p.stdout
    meta = json.loads((tmp_path / "d.csv.meta.json").read_text())
    gm = meta["summary"]["stats"]["gpu_memory"]
    assert gm["budget_mib"] == 1024 and gm["peak_reserved_mib"] <= 1024 and gm["parts"]["decode"]["mib"] > 0


def test_doctor_says_what_a_run_holds():
    from vidpipe.doctor import run_checks

    note = next(c for c in run_checks() if c.name == "GPU 0 memory")
    assert "GiB free now" in note.detail and "--max-gpu-memory" in note.detail and "MiB of decoded frames" in note.detail


def test_cli_model_out_of_memory_even_at_batch_1_exits_2_with_valid_outputs(bikes_path, tmp_path):
    """A real out-of-memory error in the model at batch 1: the allocator of the CLI's process is
    capped at 1.5 GiB and the model runs at 8192x8192 (YOLOv3-tiny's first layer alone needs
    ~2 GiB a frame there). One line, exit 2, the table and its metadata finished as partial."""
    out = tmp_path / "d.csv"
    script = (
        "import sys, torch\n"
        "total = torch.cuda.get_device_properties(0).total_memory\n"
        "torch.cuda.set_per_process_memory_fraction(1.5 * 2**30 / total)\n"
        "from vidpipe.cli import main\n"
        f"sys.exit(main(['detect', {str(bikes_path)!r}, '--device', 'cuda', '--batch-size', '1', "
        f"'--imgsz', '8192', '--max-frames', '16', '-o', {str(out)!r}]))\n"
    )
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    err = [line for line in p.stderr.splitlines() if line.startswith("vidpipe: error:")]
    assert len(err) == 1 and "out of memory" in err[0], p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    meta = json.loads((tmp_path / "d.csv.meta.json").read_text())
    assert meta["finished"] is True and meta["status"] in ("partial", "failed"), meta["status"]
    assert "out of memory" in (meta["reason"] or "")
    rows = out.read_text().splitlines()
    assert rows[0].startswith("source,frame,") and len(rows) - 1 == meta["rows"]
