"""Where a fresh ``vidpipe detect`` process spends its wall time, phase by phase.

    python3 tools/bench-probes/cli_phases.py CLIP [detect options...]

Runs ``vidpipe detect CLIP -o TMP.csv --progress off [options]`` in a fresh Python process that
stamps: interpreter start -> ``vidpipe.cli`` imported -> ``main()`` returned (the run, its table
and summary written) -> the decoder processes closed at exit (``_close_at_exit``, timed) -> the
process gone (measured here). With the summary's own first-result, GPU warm-up and run seconds.
Prints one line of seconds per phase.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import time, sys, json
t_start = float(sys.argv[1])
t0 = time.time()
import vidpipe.cli as cli
t_import = time.time()
import atexit
from vidpipe.decode import procpool
stamps = {"python_start_s": t0 - t_start, "import_cli_s": t_import - t0}
at_exit = "_close_at_exit" if hasattr(procpool, "_close_at_exit") else "close_pools"  # (older code: close_pools)
orig = getattr(procpool, at_exit)
def timed_close():
    if "t_after_close" in stamps:
        return
    a = time.time()
    orig()
    stamps["close_pools_s"] = time.time() - a
    stamps["t_after_close"] = time.time()
    print("PHASES " + json.dumps(stamps), flush=True)
setattr(procpool, at_exit, timed_close)  # what a pool registers at exit when it starts (runs first)
atexit.register(timed_close)  # a run without decoder processes
rc = cli.main(sys.argv[2:])
stamps["main_s"] = time.time() - t_import
stamps["rc"] = rc
sys.exit(rc)
"""


def main() -> None:
    clip, extra = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "o.csv")
        t_start = time.time()
        p = subprocess.run([sys.executable, "-c", CHILD, repr(t_start), "detect", clip, "-o", out, "--progress", "off",
                            *extra], capture_output=True, text=True)  # fmt: skip
        t_end = time.time()
        line = next((x for x in p.stdout.splitlines() if x.startswith("PHASES ")), None)
        if line is None:
            print("no phases:", p.returncode, p.stderr[-2000:])
            return
        st = json.loads(line[7:])
        summary = json.load(open(out + ".meta.json"))["summary"]
        stats = summary.get("stats", {})
        st["exit_after_close_s"] = t_end - st.pop("t_after_close")
        st["wall_s"] = t_end - t_start
        st.update(first_result_s=stats.get("first_result_s"), warmup_s=stats.get("warmup_s"),
                  run_s=summary.get("seconds"), fps=summary.get("fps"))
        print(" ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in st.items()))


if __name__ == "__main__":
    main()
