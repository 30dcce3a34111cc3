"""``vidpipe.decoder_service`` on a GPU: the calls in its block decode in its processes (a file far
shorter than the length where a call starts them itself), with the detections of threads; the
processes stop at the block's end, but not under a run still open, nor when the service did not
start them. Skipped without CUDA and PyNvVideoCodec."""

from __future__ import annotations

import os

import pytest

import vidpipe

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture(autouse=True)
def _no_pool_before_or_after():
    pytest.importorskip("PyNvVideoCodec")
    from vidpipe.decode.procpool import close_pools

    close_pools()
    yield
    close_pools()


def _pool(device="cuda:0"):
    from vidpipe.decode.procpool import get_pool

    return get_pool(device, None, start=False)


def _ready(device="cuda:0"):
    """Wait for the service's processes, which start in the background."""
    from vidpipe.decode.procpool import START_TIMEOUT, get_pool

    assert get_pool(device, None, start=False, wait_s=START_TIMEOUT) is not None


def _gone(pids) -> bool:
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        try:  # a zombie not reaped yet counts as gone
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    return False
        except OSError:
            continue
    return True


def _run(path, **kw):
    run = vidpipe.detect(path, device="cuda", decoder="nvdec", batch_size=16, **kw)
    results = list(run)
    src = run.summary().sources[0]
    dets = [(r.index, r.detections.boxes.cpu().tolist(), r.detections.class_ids.cpu().tolist()) for r in results]
    return src, dets


def test_calls_in_the_block_share_its_processes(make_clip):
    clip = make_clip(".mp4", frames=600, gop=10, width=640, height=360)
    threads_src, want = _run(clip.path, decoder_processes=0)
    assert "decoder_processes" not in threads_src.extra
    with vidpipe.decoder_service(2, device="cuda", warm_for=clip.path) as svc:
        assert svc.device == "cuda:0" and svc.processes == 2 and svc.started
        _ready()  # (a call before that starts with threads here, and they join it: test_proc_late_gpu.py)
        for _ in range(2):  # 600 frames: alone, a call decodes them with threads
            src, got = _run(clip.path)
            assert src.status == "ok" and src.extra.get("decoder_processes") == 2, src
            assert got == want
        pids = [p.pid for p in _pool().procs]
        assert len(pids) == 2
    assert _pool() is None and _gone(pids)


def test_a_run_left_open_keeps_them_until_it_ends(make_clip):
    clip = make_clip(".mp4", frames=600, gop=10, width=640, height=360)
    with vidpipe.decoder_service(2, device="cuda"):
        _ready()
        # a decode window of 16 frames: the decode cannot run to the end while the run waits
        run = vidpipe.detect(clip.path, device="cuda", decoder="nvdec", batch_size=16,
                             decode_buffer_bytes=16 * 640 * 360 * 3 // 2)  # fmt: skip
        it = iter(run)
        first = [next(it)]
    pool = _pool()
    assert pool is not None and any(pool.alive)  # still decoding for the open run
    rest = list(it)
    assert [r.index for r in first + rest] == list(range(600))
    assert run.summary().sources[0].extra.get("decoder_processes") == 2


def test_processes_it_did_not_start_keep_running(make_clip):
    from vidpipe.decode.procpool import get_pool

    clip = make_clip(".mp4", frames=600, gop=10, width=640, height=360)
    pool = get_pool("cuda:0", 2, start=True)
    with vidpipe.decoder_service(3, device="cuda") as svc:
        assert not svc.started
        src, _ = _run(clip.path)
        assert src.extra.get("decoder_processes") == 2  # the running pool, as it is
    assert _pool() is pool and all(pool.alive)
