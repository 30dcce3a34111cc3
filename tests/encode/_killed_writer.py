"""Child process of test_kill.py: writes stamped frames to argv[1] until it is killed."""

import sys
import time

import numpy as np
import torch

from media import _render  # noqa: PLC2701 - the same pattern and stamp the tests read back
from vidpipe.encode import VideoWriter

path = sys.argv[1]
with VideoWriter(path, width=160, height=96, fps=10) as w:
    for i in range(100000):
        rgb, _ = _render("boxes", i, 160, 96, 100000, stamp=True)
        w.write(torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1), pts=i / 10)
        if i >= 40:
            print(f"wrote {i + 1}", flush=True)
            time.sleep(0.02)
