from __future__ import annotations

import os

import pytest
from imgtools import jpeg_folder

from vidpipe.errors import SourceError
from vidpipe.images import list_images


def _names(paths, root):
    return [os.path.relpath(p, root) for p in paths]


def test_folder_recursive_sorted_case_insensitive(tmp_path):
    folder = jpeg_folder(tmp_path)
    (folder / "notes.txt").write_text("not listed")
    (folder / ".hidden.jpg").write_bytes(b"x")
    (folder / ".git").mkdir()
    (folder / ".git" / "x.jpg").write_bytes(b"x")
    assert _names(list_images(folder), folder) == ["a.jpg", "b.JPG", "c.jpeg", "sub/d.jpg", "sub/e.jpg"]
    assert _names(list_images(folder, recursive=False), folder) == ["a.jpg", "b.JPG", "c.jpeg"]


def test_glob_and_list(tmp_path):
    folder = jpeg_folder(tmp_path)
    got = list_images(str(folder / "**" / "*.jpg"))
    assert _names(got, folder) == ["a.jpg", "sub/d.jpg", "sub/e.jpg"]
    listed = [folder / "sub" / "e.jpg", folder / "a.jpg", folder / "gone.jpg"]
    # A list keeps its order, and a missing file in it is kept (skipped and reported on read).
    assert _names(list_images(listed), folder) == ["sub/e.jpg", "a.jpg", "gone.jpg"]


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


def test_symlink_loop_does_not_hang(tmp_path):
    folder = jpeg_folder(tmp_path)
    os.symlink(folder, folder / "sub" / "loop")
    assert len(list_images(folder)) == 5
