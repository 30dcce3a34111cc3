"""A Darknet model in one safetensors file: folded weights plus cfg text, class names, provenance.

Written by ``tools/convert_darknet.py``; the bundled default model is one of these. Metadata keys
(all strings, as safetensors requires):

- ``vidpipe.format``: ``"darknet-folded"``; ``vidpipe.format_version``: ``"1"``
- ``name``: the model's short name; ``cfg``: the Darknet cfg text it was built from
- ``names``: JSON list of class names; ``dtype``: ``"float16"`` or ``"float32"``
- ``provenance``: JSON (source, sha256 of the original files, converter)
- ``agreement``: JSON, measured agreement of the stored dtype with the FP32 original (optional)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidpipe.errors import ModelError
from vidpipe.models.darknet.cfg import DarknetCfg, parse_cfg

__all__ = ["FORMAT", "Bundle", "build_net", "read_bundle", "write_bundle"]

FORMAT = "darknet-folded"
FORMAT_VERSION = "1"


@dataclass(frozen=True)
class Bundle:
    """A bundle read from disk (tensors on the CPU, in the stored dtype)."""

    path: str
    name: str
    cfg: DarknetCfg
    names: tuple[str, ...]
    state: dict[str, Any] = field(repr=False)
    metadata: dict[str, str] = field(repr=False)

    @property
    def provenance(self) -> dict[str, Any]:
        return json.loads(self.metadata.get("provenance", "{}"))

    @property
    def agreement(self) -> dict[str, Any]:
        return json.loads(self.metadata.get("agreement", "{}"))


def write_bundle(
    net: Any,
    path: str | Path,
    *,
    name: str,
    names: tuple[str, ...] | list[str],
    fp16: bool,
    provenance: dict[str, Any],
    agreement: dict[str, Any] | None = None,
) -> Path:
    """Store ``net`` (a :class:`DarknetNet`) with its cfg and names in ``path`` (safetensors)."""
    import torch
    from safetensors.torch import save_file

    dtype = torch.float16 if fp16 else torch.float32
    state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in net.state_dict().items()}
    meta = {
        "vidpipe.format": FORMAT,
        "vidpipe.format_version": FORMAT_VERSION,
        "name": name,
        "cfg": net.cfg.text,
        "names": json.dumps(list(names)),
        "dtype": "float16" if fp16 else "float32",
        "provenance": json.dumps(provenance, sort_keys=True),
    }
    if agreement is not None:
        meta["agreement"] = json.dumps(agreement, sort_keys=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata=meta)
    return path


def read_bundle(path: str | Path) -> Bundle:
    """Read a bundle written by :func:`write_bundle` (ModelError if it is not one)."""
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
            if meta.get("vidpipe.format") != FORMAT:
                raise ModelError(
                    f"{path}: not a vidpipe Darknet bundle (metadata vidpipe.format="
                    f"{meta.get('vidpipe.format')!r}); make one with tools/convert_darknet.py"
                )
            state = {k: f.get_tensor(k) for k in f.keys()}
    except ModelError:
        raise
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise ModelError(f"cannot read model file {str(path)!r}: {type(exc).__name__}: {exc}") from exc
    if meta.get("vidpipe.format_version") != FORMAT_VERSION:
        raise ModelError(
            f"{path}: bundle format version {meta.get('vidpipe.format_version')!r} is not supported "
            f"(this vidpipe reads version {FORMAT_VERSION})"
        )
    cfg = parse_cfg(meta.get("cfg", ""), source=f"{path}[cfg]", check_anchors=False)  # checked when converted
    try:
        names = tuple(json.loads(meta.get("names", "[]")))
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path}: metadata 'names' is not JSON: {exc}") from exc
    return Bundle(str(path), meta.get("name") or path.stem, cfg, names, state, meta)


def build_net(bundle: Bundle) -> Any:
    """The :class:`DarknetNet` of ``bundle`` with its weights loaded (CPU, float32)."""
    import torch

    from vidpipe.models.darknet.net import DarknetNet

    net = DarknetNet(bundle.cfg)
    try:
        net.load_state_dict({k: v.float() for k, v in bundle.state.items()}, strict=True)
    except RuntimeError as exc:
        raise ModelError(f"{bundle.path}: weights do not match the cfg stored with them: {exc}") from exc
    net.to(torch.float32)
    return net
