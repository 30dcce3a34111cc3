"""``vidpipe detect`` on a file of :data:`~vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES` frames,
with the default options, starts four decoder processes while it imports PyTorch and decodes in
them (the decode waits for them: they were started for this run); every frame FFmpeg counts, once,
and the detections of the same command with threads (``--decoder-processes 0``)."""

from __future__ import annotations

import json
import subprocess
import sys

import av
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture(scope="module")
def street(tmp_path_factory):
    pytest.importorskip("PyNvVideoCodec")
    from vidpipe.bench.realclip import build_real_clip
    from vidpipe.decode.prestart import COMMAND_PROCESS_FRAMES

    return build_real_clip(tmp_path_factory.mktemp("procs"), frames=COMMAND_PROCESS_FRAMES)


def _detect(clip, out, *extra) -> dict:
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(clip), "--device", "cuda", "--progress", "off",
                        "-o", str(out), "--debug", *extra], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(out.with_name(out.name + ".meta.json").read_text())["summary"]
    return {"summary": summary, "log": p.stderr}


def test_the_command_decodes_a_file_of_that_length_in_processes(street, tmp_path):
    with av.open(str(street)) as c:
        ffmpeg = sum(1 for _ in c.decode(video=0))
    got = _detect(street, tmp_path / "auto.csv")
    s = got["summary"]
    assert s["frames"] == ffmpeg and s["sources"][0]["status"] == "ok" and s["sources"][0]["decoder"] == "nvdec"
    assert s["sources"][0]["extra"].get("decoder_processes") == 4, got["log"][-3000:]
    assert "decoder processes for cuda:0 started" in got["log"]
    threads = _detect(street, tmp_path / "threads.csv", "--decoder-processes", "0")["summary"]
    assert threads["frames"] == ffmpeg and "decoder_processes" not in threads["sources"][0]["extra"]
    assert threads["detections"] == s["detections"]
