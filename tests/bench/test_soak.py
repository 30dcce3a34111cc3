"""``vidpipe bench soak``: live streams from a real local server, the verdict as the issue words
it, samples that survive a killed run, and the GPU memory numbers on the GPU host.

- live: one stream of a camera-like clip published to nginx-rtmp on loopback (real server, real
  publisher process, real decoder and model on the CPU) for ~12 s: every sample sees the server
  and the publisher as its two children, frames flow, and both are gone when the soak returns;
  ``bench_soak.jsonl`` holds every sample and gives the same report back.
- the verdict: within 2% at *every* sample after the first minute, not only the last; the GPU
  number judged is the process's (NVML), else the device's used memory, and it says which.
- GPU host: the process's GPU memory seen by NVML (or ``nvidia-smi``) is at least what PyTorch
  reserved (it also holds the CUDA context), and the device's used memory at least that.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from live.need import require_nginx




@pytest.mark.slow
def test_soak_of_live_streams_from_a_local_server(tmp_path):
    require_nginx()
    from vidpipe.bench.procstats import children
    from vidpipe.bench.soak import SoakResult, run_soak_bench

    before = children()
    result = run_soak_bench(minutes=0.2, interval=2.0, settle=0.0, device="cpu", batch_size=4, streams=1,
                            stream_size=(160, 96), stream_fps=15, work_dir=tmp_path / "media", out_dir=tmp_path)
    assert children() == before, "the server or the publisher outlived the soak"
    rows = result.rows
    assert len(rows) >= 3 and result.machine["mode"] == "one live run"
    assert all(r["children"] == len(before) + 2 for r in rows)  # nginx and one publisher process
    assert rows[-1]["frames"] > rows[0]["frames"] > 0 and all(r["runs"] == 1 for r in rows)
    assert all(r["reconnects"] == 0 for r in rows)
    assert "1 live RTMP streams" in result.inputs[0]["name"]
    lines = (tmp_path / "bench_soak.jsonl").read_text().splitlines()
    assert len(lines) == 1 + len(rows) and "meta" in json.loads(lines[0])
    again = SoakResult.from_samples(tmp_path / "bench_soak.jsonl")
    assert again.rows == rows and again.targets == result.targets
    # a run killed while writing a sample: the samples before it still make a report
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    cut = SoakResult.from_samples(tmp_path / "cut.jsonl")
    assert cut.rows == rows[:2] and "interrupted" in cut.machine["ended"]
    assert all(p.exists() for p in cut.write(tmp_path / "cut", "soak").values())


def _rows(rss, gpu_process=None, gpu_device=None):
    out = []
    for i, v in enumerate(rss):
        row = {"minutes": 0.5 * i, "rss_mib": v, "threads": 3, "tasks": 9, "fds": 20, "children": 0}
        if gpu_process is not None:
            row["gpu_process_mib"] = gpu_process[i]
        if gpu_device is not None:
            row["gpu_device_used_mib"] = gpu_device[i]
        out.append(row)
    return out


def test_soak_verdict_is_every_sample_within_two_percent_of_the_first_minute():
    from vidpipe.bench.soak import judge

    key = "host RSS and GPU memory within 2% of their value after 1 min (every sample)"
    flat = _rows([900, 950, 1000, 1010, 995, 1015])  # the warm-up may grow; after 1 min within 2%
    assert judge(flat, settle_min=1.0, cuda=False)[key] == "yes"
    bump = _rows([900, 950, 1000, 1050, 1000, 1000])  # back at the end, +5% in between: not flat
    assert judge(bump, settle_min=1.0, cuda=False)[key] == "no: host RSS 5.00%"
    gpu = _rows([1000] * 6, gpu_process=[3000, 3000, 3000, 3000, 3100, 3000], gpu_device=[4000] * 6)
    targets = judge(gpu, settle_min=1.0, cuda=True)
    assert targets[key].startswith("no: GPU memory of the process") and "(NVML)" in targets["GPU memory judged"]
    no_nvml = _rows([1000] * 6, gpu_process=[None] * 6, gpu_device=[4000, 4000, 4000, 4020, 4000, 4000])
    targets = judge(no_nvml, settle_min=1.0, cuda=True)
    assert targets[key] == "yes" and "other processes on the GPU count too" in targets["GPU memory judged"]
    assert judge(flat[:3], settle_min=1.0, cuda=False)[key] == "not enough samples after the warm-up"


@pytest.mark.gpu
def test_soak_gpu_memory_numbers_agree_with_each_other():
    from vidpipe.bench.gpumem import gpu_memory

    dev = torch.device("cuda")
    held = torch.empty(256 << 20, dtype=torch.uint8, device=dev)  # 256 MiB through the caching allocator
    gm = gpu_memory(dev, [os.getpid()])
    assert gm.allocated_mib >= 256 and gm.reserved_mib >= gm.allocated_mib
    assert gm.device_used_mib >= gm.reserved_mib
    if gm.process_mib is None:
        pytest.skip("NVML lists no process of this pid namespace; soak judges the device's used memory")
    assert gm.process_source in ("nvml", "nvidia-smi")
    assert gm.reserved_mib <= gm.process_mib <= gm.device_used_mib + 1
    del held


def test_soak_cli_errors_and_report_from_samples(tmp_path):
    """``--option`` takes only ``vidpipe.detect`` arguments (exit 2, the flag named);
    ``--from-samples`` makes the report of an earlier run's samples without running anything."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "vidpipe", "bench", "soak", *args], capture_output=True,
                              text=True, env=env, timeout=120)  # fmt: skip

    bad = cli("--option", "bogus=1", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "vidpipe bench soak: error: --option: bogus" in bad.stderr
    rows = [{"minutes": 0.5 * i, "runs": i, "frames": 10 * i, "fps": 5.0, "rss_mib": 1000.0 + i, "anon_mib": 500.0,
             "threads": 3, "tasks": 9, "fds": 20, "children": 0} for i in range(5)]  # fmt: skip
    samples = tmp_path / "bench_soak.jsonl"
    samples.write_text("\n".join(json.dumps(x) for x in [{"meta": {"settle": 1.0, "cuda": False, "machine":
                       {"minutes": 5}}}, *({"row": r} for r in rows)]) + "\n")  # fmt: skip
    done = cli("--from-samples", str(samples), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    assert "host RSS and GPU memory within 2% of their value after 1 min (every sample): yes" in done.stdout
    assert "interrupted" in done.stdout
    assert {p.name for p in (tmp_path / "report").iterdir()} == {"bench_soak.md", "bench_soak.json", "bench_soak.png",
                                                                 "bench_soak_fps.png"}


def test_a_soak_of_an_input_that_fails_ends_at_once_with_its_error(tmp_path):
    """A missing input is not soaked for minutes of failing runs: the first run's failure ends the
    soak with the input's error (the CLI: exit 2)."""
    from vidpipe.bench.soak import run_soak_bench
    from vidpipe.errors import SourceError

    with pytest.raises(SourceError, match="soak: .*missing.mp4: no such file"):
        run_soak_bench([str(tmp_path / "missing.mp4")], minutes=5, interval=1, device="cpu", out_dir=tmp_path)
