"""A run whose decoder processes are still starting: waiting for them (the code before
``vidpipe.decode.proclate``) against starting with threads here and letting them join.

In one process, a warm detector (built and run once, as ``bench e2e`` warms up); then, for each
delay D and each policy in turn: close the decoder processes, start 4 in the background for the
clip (as ``vidpipe detect`` does at its first step), sleep D seconds, run
``vidpipe.detect(CLIP, model=det)`` to the end. "wait" is the policy before: the decode waits for
the pool (patched in here: ``NvdecDecoder._process_pool`` waits while the pool starts, then
takes it, as ``get_pool(wait_s=START_TIMEOUT)`` did); "join" is the code as it is. Prints one
JSON line per run: the policy, D, the seconds from the call until the pool was ready (seen at a
result; how late the children were), the call's wall time, the summary's frames/s, and what the
decode logged about its processes.

    python3 tools/bench-probes/late_children.py CLIP [DELAYS=0,3.5,4.5] [REPEAT=2]

``cold POLICY DELAY`` instead: one run in this fresh process, nothing warmed (no NVDEC session
pooled here, the model captured in the call), as a command's first decode; POLICY ``wait``,
``join``, or ``joinN``: join with at most N threads here.

    python3 tools/bench-probes/late_children.py CLIP cold join4 4.5
"""

import json
import logging
import sys
import time

logging.basicConfig(level=logging.WARNING)
import torch  # noqa: E402

import vidpipe  # noqa: E402
from vidpipe.api import build_detector  # noqa: E402
from vidpipe.decode import nvdec, proclate  # noqa: E402
from vidpipe.decode.procpool import close_pools, is_starting, start_in_background  # noqa: E402

clip = sys.argv[1]
cold = len(sys.argv) > 2 and sys.argv[2] == "cold"
if cold:
    policies, delays, repeat = [sys.argv[3]], [float(sys.argv[4])], 1
else:
    policies = ["wait", "join"]
    delays = [float(d) for d in (sys.argv[2] if len(sys.argv) > 2 else "0,3.5,4.5").split(",")]
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 2
det = build_detector("yolov3-tiny", device="cuda")
if not cold:
    for _ in vidpipe.detect(clip, model=det, max_frames=1600):  # warm: kernels, graph, sessions here
        pass
original = nvdec.NvdecDecoder._process_pool
late_init = proclate.LateLease.__init__


def capped(most):
    def init(self, *args, **kwargs):
        late_init(self, *args, **kwargs)
        self.here = min(self.here, most)

    return init


class Said(logging.Handler):
    """The decode's lines about its processes."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        text = record.getMessage()
        if "process" in text and ("joined" in text or "decoding" in text):
            self.lines.append(text.split(": ", 1)[-1][:160])


said = Said()
for name in ("vidpipe.decode.procrun", "vidpipe.decode.parallel"):
    logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger(name).addHandler(said)


def waiting(self, plan):
    while is_starting(self.device):
        time.sleep(0.002)
    return original(self, plan)


for _ in range(repeat):
    for delay in delays:
        for policy in policies:
            close_pools()
            nvdec.NvdecDecoder._process_pool = waiting if policy == "wait" else original
            proclate.LateLease.__init__ = capped(int(policy[4:])) if policy[4:] else late_init
            start_in_background("cuda:0", 4, warm_for=clip)
            time.sleep(delay)
            said.lines = []
            t0 = time.perf_counter()
            ready = None
            run = vidpipe.detect(clip, model=det)
            for _ in run:
                if ready is None and not is_starting("cuda:0"):
                    ready = time.perf_counter() - t0
            wall = time.perf_counter() - t0
            s = run.summary().to_dict()
            print(json.dumps({"policy": policy, "delay_s": delay, "children_ready_s": ready, "wall_s": round(wall, 3),
                              "fps": round(s["fps"], 1), "frames": s["frames"], "said": said.lines}), flush=True)  # fmt: skip
            said.lines = []
            torch.cuda.synchronize()
nvdec.NvdecDecoder._process_pool = original
close_pools()
