"""``vidpipe detect --decoder-processes 4`` starts its decoder processes with the command and
decodes in them (vidpipe.decode.prestart); ``--decoder-processes 0`` keeps threads. Every frame
once either way, and the same detections (the same decoder in both). (Without the option a file
of 15,000+ frames starts them: too long to make here.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]

FRAMES = 1200


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory):
    from vidpipe.bench.generate import generate_video

    return generate_video("1080p-h264", tmp_path_factory.mktemp("prestart"), frames=FRAMES)


def _detect(clip, out, *extra) -> dict:
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(clip), "--device", "cuda", "--progress", "off",
                        "-o", str(out), *extra], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(out.with_name(out.name + ".meta.json").read_text())["summary"]
    return {"summary": summary, "log": p.stderr}


def test_processes_asked_for_start_with_the_command(long_clip, tmp_path):
    got = _detect(long_clip, tmp_path / "procs.csv", "--decoder-processes", "4", "--debug")
    s = got["summary"]
    assert s["frames"] == FRAMES and s["sources"][0]["decoder"] == "nvdec"
    assert s["sources"][0]["extra"]["decoder_processes"] == 4, got["log"][-3000:]
    assert "decoder processes for cuda:0 started" in got["log"]
    # each child started its sessions in a thread beside its own start (vidpipe.decode.nvdec_early)
    assert got["log"].count("NVDEC sessions started beside the start") == 4, got["log"][-3000:]
    threads = _detect(long_clip, tmp_path / "threads.csv", "--decoder-processes", "0")["summary"]
    assert threads["frames"] == FRAMES and "decoder_processes" not in threads["sources"][0]["extra"]
    assert threads["detections"] == s["detections"]
