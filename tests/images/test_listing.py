from __future__ import annotations

import os

import pytest

from vidpipe.errors import SourceError
from vidpipe.images import list_images


def _names(paths, root):
    return [os.path.relpath(p, root) for p in paths]


def test_folder_recursive_sorted_case_insensitive(jpeg_folder):
    (jpeg_folder / "notes.txt").write_text("not listed")
    (jpeg_folder / ".hidden.jpg").write_bytes(b"x")
    (jpeg_folder / ".git").mkdir()
    (jpeg_folder / ".git" / "x.jpg").write_bytes(b"x")
    assert _names(list_images(jpeg_folder), jpeg_folder) == ["a.jpg", "b.JPG", "c.jpeg", "sub/d.jpg", "sub/e.jpg"]
    assert _names(list_images(jpeg_folder, recursive=False), jpeg_folder) == ["a.jpg", "b.JPG", "c.jpeg"]


def test_glob_and_list(jpeg_folder):
    got = list_images(str(jpeg_folder / "**" / "*.jpg"))
    assert _names(got, jpeg_folder) == ["a.jpg", "sub/d.jpg", "sub/e.jpg"]
    listed = [jpeg_folder / "sub" / "e.jpg", jpeg_folder / "a.jpg", jpeg_folder / "gone.jpg"]
    # A list keeps its order, and a missing file in it is kept (skipped and reported on read).
    assert _names(list_images(listed), jpeg_folder) == ["sub/e.jpg", "a.jpg", "gone.jpg"]


def test_explicit_file_with_any_extension_is_kept(tmp_path):
    p = tmp_path / "photo.data"
    p.write_bytes(b"\xff\xd8\xff")
    assert list_images(p) == [str(p)]


@pytest.mark.parametrize("kind", ["missing", "empty_folder", "no_match"])
def test_user_errors_raise_source_error(tmp_path, kind):
    target = {
        "missing": tmp_path / "nope",
        "empty_folder": tmp_path,
        "no_match": tmp_path / "*.png",
    }[kind]
    with pytest.raises(SourceError) as e:
        list_images(target)
    assert str(tmp_path) in str(e.value)


def test_symlink_loop_does_not_hang(jpeg_folder):
    os.symlink(jpeg_folder, jpeg_folder / "sub" / "loop")
    assert len(list_images(jpeg_folder)) == 5
