"""Probe (GPU host, DALI installed): what DALI's video reader gives for RGB and for YCbCr, against
PyAV on the same BT.709 test clip: DALI RGB vs PyAV rgb24, DALI YCbCr vs PyAV's yuv444p planes, and
vidpipe's conversion of DALI's YCbCr vs PyAV rgb24 (mean and max absolute difference, levels).
Usage: python3 dali_colour.py CLIP."""
import sys

import av
import numpy as np
import torch
from nvidia.dali import fn, pipeline_def, types
from nvidia.dali.plugin.pytorch import feed_ndarray

from vidpipe.decode.probe import probe
from vidpipe.ops.color import ycbcr444_to_rgb

path = sys.argv[1]
info = probe(path)
with av.open(path) as c:
    frames = list(c.decode(video=0))
rgb_ref = np.stack([f.to_ndarray(format="rgb24") for f in frames])
yuv_ref = np.stack([np.stack(list(f.reformat(format="yuv444p").to_ndarray()), -1) for f in frames])  # (F, H, W, 3)
print("stream colour", info.color, "specified", info.color_specified, "frames", len(frames))


def dali(kind):
    @pipeline_def(batch_size=1, num_threads=2, device_id=0)
    def pipe():
        return fn.readers.video(device="gpu", filenames=[path], sequence_length=len(frames), image_type=kind,
                                random_shuffle=False, skip_vfr_check=True)
    p = pipe()
    p.build()
    (v,) = p.run()
    t = v.as_tensor()
    buf = torch.empty(t.shape(), dtype=torch.uint8, device="cuda")
    feed_ndarray(t, buf, cuda_stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    return buf[0]


def diff(a, b, what):
    d = np.abs(a.astype(np.int32) - b.astype(np.int32))
    print(f"{what}: mean {d.mean():.2f}, max {d.max()}, per channel {[round(float(d[..., i].mean()), 2) for i in range(3)]}")


rgb = dali(types.RGB).cpu().numpy()
diff(rgb, rgb_ref, "DALI RGB vs PyAV rgb24")
ycc = dali(types.YCbCr)
diff(ycc.cpu().numpy(), yuv_ref, "DALI YCbCr vs PyAV yuv444p")
ours = ycbcr444_to_rgb(ycc, info.color).permute(0, 2, 3, 1).cpu().numpy()
diff(ours, rgb_ref, "vidpipe's conversion of DALI YCbCr vs PyAV rgb24")
