"""Class names from files, metadata strings and the COCO default."""

from __future__ import annotations

import json

import pytest

from vidpipe.errors import ModelError
from vidpipe.models.names import (
    coco80_names,
    default_names,
    load_names,
    parse_names_text,
    resolve_names,
)


@pytest.mark.parametrize(
    ("filename", "text"),
    [
        ("a.names", "cat\ndog\n\nbird\n"),
        ("a.txt", "cat\r\ndog\r\nbird"),
        ("a.json", json.dumps(["cat", "dog", "bird"])),
        ("a.json", json.dumps({"names": {"0": "cat", "1": "dog", "2": "bird"}})),
        ("a.yaml", "path: ../data\nnames:\n  0: cat\n  1: 'dog'\n  2: bird  # comment\nnc: 3\n"),
        ("a.yml", "names:\n  - cat\n  - \"dog\"\n  - bird\n"),
        ("a.yaml", "train: x\nnames: ['cat', 'dog', 'bird']\n"),
        ("a.yaml", "names: {0: cat, 1: dog, 2: bird}\n"),
        ("a.yaml", "names: [cat, dog, bird]\n"),
    ],
)
def test_names_files(tmp_path, filename, text):
    path = tmp_path / filename
    path.write_text(text)
    assert load_names(path) == ("cat", "dog", "bird")


def test_mapping_with_gaps_fills_ids():
    assert parse_names_text("{0: 'a', 2: 'c'}") == ("a", "1", "c")


def test_ultralytics_metadata_literal():
    assert parse_names_text("{0: 'person', 1: 'bicycle'}") == ("person", "bicycle")
    assert parse_names_text('{"0": "person"}') == ("person",)
    with pytest.raises(ModelError, match="cannot parse"):
        parse_names_text("person bicycle")


@pytest.mark.parametrize(
    ("filename", "text", "match"),
    [
        ("e.names", "\n\n", "no names"),
        ("e.json", "{not json", "not valid JSON"),
        ("e.yaml", "nc: 3\n", "no 'names:'"),
        ("e.yaml", "names:\n  zero: a\n", "cannot parse"),
    ],
)
def test_bad_names_files(tmp_path, filename, text, match):
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(ModelError, match=match):
        load_names(path)


def test_missing_names_file(tmp_path):
    with pytest.raises(ModelError, match="cannot read"):
        load_names(tmp_path / "none.names")


def test_resolve_order_and_checks(tmp_path, caplog):
    assert resolve_names(["x", "y"], metadata="{0: 'a', 1: 'b'}", num_classes=2) == ("x", "y")
    assert resolve_names(None, metadata="{0: 'a', 1: 'b'}", num_classes=2) == ("a", "b")
    assert resolve_names(None, metadata=None, num_classes=3) == ("0", "1", "2")
    with pytest.raises(ModelError, match="1 class names but m predicts 2"):
        resolve_names(["x"], num_classes=2, model="m")
    assert resolve_names(None, metadata="{0: 'a'}", num_classes=2) == ("0", "1")  # wrong length: ignored
    assert "metadata lists 1 class names" in caplog.text
    with pytest.raises(ModelError, match="number of classes is unknown"):
        resolve_names(None)


def test_coco_default():
    names = coco80_names()
    assert len(names) == 80 and names[0] == "person" and names[-1] == "toothbrush"
    assert default_names(80) == names
    assert default_names(2) == ("0", "1")
