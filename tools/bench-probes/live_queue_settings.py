"""Probe (GPU host): N RTMP streams (nginx unpacked in /root/ngx, see tools/debs-for-gpu) read by
vidpipe.detect with different live queue and batch-deadline settings: results/s, batches,
latency, drops and stage times per setting. Usage: python live_queue_settings.py N.
Result on an H100: docs/bench/h100/live-streams/README.md."""
import sys, time, statistics
import vidpipe
from vidpipe.bench.rtmp_server import RtmpServer
from vidpipe.bench.realclip import build_real_clip
from vidpipe.bench.streams import _start_publishers, _stop_publishers
from vidpipe.api import build_detector
from vidpipe.sources.options import LiveOptions

N = int(sys.argv[1])
clip = build_real_clip('/root/media', frames=300)
det = build_detector('yolov3-tiny', device='cuda')
configs = [dict(), dict(queue_frames=64), dict(batch_timeout=0.1), dict(queue_frames=64, batch_timeout=0.1)]
with RtmpServer(root='/root/ngx') as srv:
    urls = [srv.url(f'c{i}') for i in range(N)]
    pubs = _start_publishers(clip, urls, 8)
    time.sleep(2)
    for cfg in configs:
        for accel in ("auto",):
            run = vidpipe.detect(urls, model=det, batch_size=N, live=LiveOptions(**cfg), accel=accel)
            t0 = time.monotonic(); n = 0; lat = []; sizes = []
            for batch in run.batches():
                now = time.monotonic()
                if now - t0 > 6:
                    n += len(batch); sizes.append(len(batch))
                    lat += [now - r.meta.captured_mono for r in batch if r.meta.captured_mono]
                if now - t0 > 14: break
            st = run.status(); run.close()
            lat.sort()
            print(f"N={N} {cfg} fps={n/8:.0f} batches={len(sizes)} mean_batch={statistics.mean(sizes) if sizes else 0:.1f} "
                  f"p50={1e3*lat[len(lat)//2] if lat else -1:.0f}ms p99={1e3*lat[int(len(lat)*0.99)] if lat else -1:.0f}ms "
                  f"drops={sum(s['drops'] for s in st['streams'])} stages={ {k: round(v,1) for k,v in st['stats']['stages_ms_per_frame'].items() if v} }", flush=True)
    _stop_publishers(pubs)
