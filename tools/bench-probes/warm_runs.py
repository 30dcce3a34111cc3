"""Probe helper: five ``vidpipe.detect`` runs of one file in one process (NVDEC in threads), the
median of runs 2-5 and the post-processing's stage times; run it alternately from two checkouts to
compare them warm (``docs/bench/h200/host-results``). GPU host.

    PYTHONPATH=CHECKOUT/src python3 tools/bench-probes/warm_runs.py CLIP 1|0 LABEL

``1``: ``results_on_host=True`` (as ``vidpipe detect`` and ``bench e2e``); ``0``: results on the GPU."""
import sys, statistics
import torch  # noqa: F401 - imported first, as a user script does
import vidpipe
clip, on_host, label = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
runs = []
for i in range(5):
    run = vidpipe.detect(clip, device="cuda", decoder_processes=0, results_on_host=on_host)
    n = sum(len(b) for b in run.batches())
    run.close()
    s = run.summary(); st = run.get_stats().get("stages_ms_per_frame") or {}
    if i: runs.append((s.seconds, st.get("postprocess", 0), st.get("d2h", 0)))
med = statistics.median(r[0] for r in runs)
print(f"{label:4s} host={int(on_host)}: runs {' '.join('%.2f' % r[0] for r in runs)} median {med:.3f} s ({n / med:.0f} fps) "
      f"post {statistics.median(r[1] for r in runs):.3f} d2h {statistics.median(r[2] for r in runs):.3f} ms/frame dets {s.detections}", flush=True)
