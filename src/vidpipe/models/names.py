"""Class names: from a ``--names`` file, from a model's metadata, or the COCO default.

Accepted files:

- ``.names`` / ``.txt``: one name per line (Darknet); blank lines are skipped.
- ``.json``: a list of names, a ``{"0": "person", ...}`` mapping, or an object with a ``names`` key
  holding either.
- ``.yaml`` / ``.yml``: the Ultralytics dataset format, ``names:`` as a block mapping
  (``  0: person``), a block list (``  - person``) or a flow list (``names: [person, car]``).
  Parsed by hand (no PyYAML needed); other keys are ignored.

Metadata strings (ONNX ``metadata_props``, TorchScript ``config.txt``) may be JSON or a Python
literal such as Ultralytics' ``"{0: 'person', 1: 'bicycle'}"`` (read with ``ast.literal_eval``).
A model with 80 classes and no names gets the COCO-80 names bundled with vidpipe.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from vidpipe.errors import ModelError

logger = logging.getLogger(__name__)

NAMES_SUFFIXES = (".names", ".txt", ".json", ".yaml", ".yml")

def normalize_names(obj: Any, *, source: str = "names") -> tuple[str, ...]:
    """A list/tuple of names or an ``{index: name}`` mapping -> a tuple indexed by class id.

    Mapping keys may be ints or digit strings; missing ids in ``0..max`` are filled with the id
    as text (``"7"``).
    """
    if isinstance(obj, Mapping):
        if "names" in obj and not any(str(k).lstrip("-").isdigit() for k in obj):
            return normalize_names(obj["names"], source=source)
        table: dict[int, str] = {}
        for k, v in obj.items():
            try:
                table[int(k)] = str(v)
            except (TypeError, ValueError):
                raise ModelError(f"{source}: class names mapping has a non-integer key {k!r}") from None
        if not table:
            return ()
        if min(table) < 0:
            raise ModelError(f"{source}: class ids must be >= 0, got {min(table)}")
        return tuple(table.get(i, str(i)) for i in range(max(table) + 1))
    if isinstance(obj, (list, tuple)):
        return tuple(str(v) for v in obj)
    raise ModelError(f"{source}: expected a list of class names or an {{id: name}} mapping, got {type(obj).__name__}")


def parse_names_text(text: str, *, source: str = "names") -> tuple[str, ...]:
    """Parse a names metadata string: JSON, or a Python literal (Ultralytics' dict repr)."""
    text = text.strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            return normalize_names(parse(text), source=source)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    raise ModelError(f"{source}: cannot parse class names from {text[:80]!r}")


def _yaml_scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return re.sub(r"\s+#.*$", "", value)


def _parse_flow(rest: str, source: str) -> tuple[str, ...]:
    """``[a, 'b']`` or ``{0: a, 1: b}`` (quoted or not) on one line."""
    try:
        return normalize_names(ast.literal_eval(rest), source=source)
    except (ValueError, SyntaxError):
        pass
    inner = rest[1:-1].strip() if len(rest) >= 2 else ""
    items = [v.strip() for v in inner.split(",") if v.strip()]
    if rest.startswith("[") and rest.endswith("]") and items:
        return tuple(_yaml_scalar(v) for v in items)
    if rest.startswith("{") and rest.endswith("}") and items:
        table = {}
        for item in items:
            key, sep, value = item.partition(":")
            if not sep or not key.strip().isdigit():
                break
            table[int(key)] = _yaml_scalar(value)
        else:
            return normalize_names(table, source=source)
    raise ModelError(f"{source}: cannot parse 'names: {rest[:60]}'")


def _parse_yaml_names(text: str, source: str) -> tuple[str, ...]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^names\s*:\s*(.*)$", line)
        if not m:
            continue
        rest = m.group(1).strip()
        if rest and not rest.startswith("#"):
            return _parse_flow(rest, source)
        table: dict[int, str] = {}
        items: list[str] = []
        for body in lines[i + 1 :]:
            if not body.strip() or body.lstrip().startswith("#"):
                continue
            if not body[0].isspace():
                break
            entry = body.strip()
            km = re.match(r"^(\d+)\s*:\s*(.*)$", entry)
            if km:
                table[int(km.group(1))] = _yaml_scalar(km.group(2))
            elif entry.startswith("- "):
                items.append(_yaml_scalar(entry[2:]))
            else:
                raise ModelError(f"{source}: cannot parse the names entry {entry[:60]!r}")
        if table and items:
            raise ModelError(f"{source}: 'names' mixes a list and a mapping")
        return normalize_names(table or items, source=source)
    raise ModelError(f"{source}: no 'names:' entry found")


def load_names(path: str | os.PathLike) -> tuple[str, ...]:
    """Read class names from a ``.names``/``.txt``, ``.json`` or ``.yaml`` file (see module doc)."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ModelError(f"{p}: cannot read the class names file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError:
        raise ModelError(f"{p}: the class names file is not UTF-8 text") from None
    suffix = os.path.splitext(p)[1].lower()
    if suffix == ".json":
        try:
            names = normalize_names(json.loads(text), source=p)
        except json.JSONDecodeError as exc:
            raise ModelError(f"{p}: not valid JSON ({exc})") from None
    elif suffix in (".yaml", ".yml"):
        names = _parse_yaml_names(text, p)
    else:
        names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not names:
        raise ModelError(f"{p}: the class names file lists no names")
    return names


@lru_cache(maxsize=1)
def coco80_names() -> tuple[str, ...]:
    """The 80 COCO class names shipped with vidpipe.

    Read from ``vidpipe/models/data/coco.names`` when present, else from the metadata of the bundled
    yolov3-tiny model (only its header is read, not the weights).
    """
    from importlib import resources

    ref = resources.files("vidpipe").joinpath("models", "data", "coco.names")
    names: tuple[str, ...] = ()
    if ref.is_file():
        names = tuple(line.strip() for line in ref.read_text(encoding="utf-8").splitlines() if line.strip())
    else:
        from safetensors import safe_open

        from vidpipe.models.zoo import bundled_path

        path = bundled_path("yolov3-tiny")
        with safe_open(str(path), framework="pt") as f:
            names = tuple(json.loads((f.metadata() or {}).get("names", "[]")))
    if len(names) != 80:
        raise ModelError(
            f"the COCO class names shipped with vidpipe have {len(names)} entries, not 80; reinstall vidpipe"
        )
    return names


@lru_cache(maxsize=1)
def torchvision_coco_names() -> tuple[str, ...]:
    """torchvision's 91 COCO category names (index = label id; ``__background__``, ``N/A`` gaps)."""
    from torchvision.models.detection import FasterRCNN_ResNet50_FPN_Weights

    return tuple(FasterRCNN_ResNet50_FPN_Weights.COCO_V1.meta["categories"])


def default_names(num_classes: int) -> tuple[str, ...]:
    """COCO-80 names for an 80-class model, else the ids as text (``"0"``, ``"1"``, ...)."""
    if num_classes == 80:
        return coco80_names()
    return tuple(str(i) for i in range(num_classes))


def resolve_names(
    names: Any = None,
    *,
    metadata: Any = None,
    num_classes: int | None = None,
    model: str = "model",
) -> tuple[str, ...]:
    """Pick the class names of a model: ``names`` (a file path or sequence) > ``metadata`` > default.

    ``metadata`` may be a string (JSON or Python literal), a list or a mapping. With
    ``num_classes`` known, names given explicitly must cover it (more names than classes is
    allowed, fewer is a ModelError); metadata names of the wrong length are ignored with a warning.
    """
    if names is not None:
        if isinstance(names, (str, os.PathLike)):
            table = load_names(names)
            source = os.fspath(names)
        else:
            table = normalize_names(names)
            source = "names"
        if num_classes is not None and len(table) < num_classes:
            raise ModelError(
                f"{source} has {len(table)} class names but {model} predicts {num_classes} classes"
            )
        return table
    if metadata is not None:
        where = f"{model} metadata"
        if isinstance(metadata, str):
            table = parse_names_text(metadata, source=where)
        else:
            table = normalize_names(metadata, source=where)
        if num_classes is None or len(table) >= num_classes:
            return table
        logger.warning(
            "%s: its metadata lists %d class names but it predicts %d classes; using default names",
            model, len(table), num_classes,
        )
    if num_classes is None:
        raise ModelError(f"{model}: the number of classes is unknown; pass names= (a list or a names file)")
    return default_names(num_classes)
