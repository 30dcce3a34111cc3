"""``vidpipe detect`` on a file of :data:`~vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES` frames,
with the default options, starts four decoder processes while it imports PyTorch and decodes in
them (the decode waits for them: they were started for this run); every frame FFmpeg counts, once,
and the detections of the same command with threads (``--decoder-processes 0``). So does
``vidpipe.detect`` from a script, which starts them at its call (:mod:`vidpipe.prewarm`), by
default (MP4: the length from the index; Matroska, or a run cut by ``max_frames``: from PyAV in a
thread) and when asked for."""

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


_SCRIPT = """
import json, logging, sys
import vidpipe
logging.basicConfig(level=logging.DEBUG)
clip, processes, most = sys.argv[1], sys.argv[2], sys.argv[3]
options = {} if processes == "auto" else {"decoder_processes": int(processes)}
if most:
    options["max_frames"] = int(most)
run = vidpipe.detect(clip, device="cuda", **options)
for frame in run:
    pass
print(json.dumps(run.summary().to_dict()))
"""


@pytest.fixture(scope="module")
def street_mkv(street, tmp_path_factory):
    """The same clip remuxed to Matroska: no index read at once, its length read with PyAV."""
    dst = tmp_path_factory.mktemp("mkv") / "street.mkv"
    with av.open(str(street)) as i, av.open(str(dst), "w") as o:
        s = o.add_stream_from_template(i.streams.video[0])
        for pkt in i.demux(i.streams.video[0]):
            if pkt.dts is not None:
                pkt.stream = s
                o.mux(pkt)
    return dst


@pytest.fixture(scope="module")
def street_longer(tmp_path_factory):
    """A clip a quarter longer than the length, for a run cut to it by ``max_frames``."""
    from vidpipe.bench.realclip import build_real_clip
    from vidpipe.decode.prestart import COMMAND_PROCESS_FRAMES

    return build_real_clip(tmp_path_factory.mktemp("longer"), frames=COMMAND_PROCESS_FRAMES * 5 // 4)


@pytest.mark.parametrize(("processes", "container"),
                         [("auto", "mp4"), ("2", "mp4"), ("auto", "mkv"), ("auto", "mp4-cut")])  # fmt: skip
def test_a_scripts_call_decodes_it_in_processes_started_at_the_call(request, processes, container):
    from vidpipe.decode.prestart import COMMAND_PROCESS_FRAMES

    street = request.getfixturevalue({"mp4": "street", "mkv": "street_mkv", "mp4-cut": "street_longer"}[container])
    most = str(COMMAND_PROCESS_FRAMES) if container == "mp4-cut" else ""  # its length from PyAV, cut
    with av.open(str(street)) as c:
        ffmpeg = sum(1 for _ in c.decode(video=0))
    if most:
        assert ffmpeg > int(most)
        ffmpeg = int(most)

    def call(n: str) -> tuple[dict, str]:
        p = subprocess.run([sys.executable, "-c", _SCRIPT, str(street), n, most], capture_output=True, text=True,
                           timeout=300)  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr

    s, log = call(processes)
    src = s["sources"][0]
    assert s["frames"] == ffmpeg and src["status"] == "ok" and src["decoder"] == "nvdec"
    assert src["extra"].get("decoder_processes") == (4 if processes == "auto" else 2), log[-3000:]
    assert "decoder processes for cuda:0 started" in log
    threads, _ = call("0")
    assert threads["frames"] == ffmpeg and "decoder_processes" not in threads["sources"][0]["extra"]
    assert threads["detections"] == s["detections"]
