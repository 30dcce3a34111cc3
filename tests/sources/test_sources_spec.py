"""classify_inputs: files, live URLs, image folders, video folders, globs."""

from __future__ import annotations

import pytest

from vidpipe.errors import ConfigError, SourceError
from vidpipe.sources import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS, SourceSpec, classify_inputs


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


@pytest.mark.parametrize(
    "url", ["rtsp://cam/1", "rtsps://cam/1", "rtmp://h/app", "rtmps://h/a", "http://h/s.m3u8", "HTTPS://h/x",
            "srt://h:9000", "udp://@:1234", "tcp://h:5000"],
)
def test_live_urls(url):
    assert classify_inputs([url]) == [SourceSpec("live", url)]


def test_files_and_images(tmp_path):
    video = touch(tmp_path / "a.MP4")
    image = touch(tmp_path / "b.JPG")
    missing = tmp_path / "missing.mkv"
    specs = classify_inputs([video, str(image), str(missing)])
    assert specs == [SourceSpec("file", str(video)), SourceSpec("images", str(image)), SourceSpec("file", str(missing))]


def test_folder_of_images(tmp_path):
    touch(tmp_path / "shots" / "day1" / "x.png")
    touch(tmp_path / "shots" / "a.jpg")
    assert classify_inputs([tmp_path / "shots"]) == [SourceSpec("images", str(tmp_path / "shots"))]


def test_folder_of_images_and_videos_gives_both(tmp_path, caplog):
    """Each video is a source of its own (sorted by path), then the folder's images as one source;
    other files are left out and named in the log."""
    for name in ("b.jpg", "z.mp4", "day1/x.png", "day1/a.mkv", "notes.txt", ".hidden.mp4"):
        touch(tmp_path / "mixed" / name)
    with caplog.at_level("WARNING", logger="vidpipe.sources.spec"):
        specs = classify_inputs([tmp_path / "mixed"])
    root = tmp_path / "mixed"
    assert specs == [
        SourceSpec("file", str(root / "day1" / "a.mkv")),
        SourceSpec("file", str(root / "z.mp4")),
        SourceSpec("images", str(root)),
    ]
    assert classify_inputs([root]) == specs  # deterministic
    assert "notes.txt" in caplog.text and "hidden" not in caplog.text


def test_folder_of_videos_sorted(tmp_path):
    for name in ("b.mkv", "a.mp4", "sub/c.mov", ".hidden.mp4", "notes.txt"):
        touch(tmp_path / "v" / name)
    specs = classify_inputs([tmp_path / "v"])
    assert specs == [SourceSpec("file", str(tmp_path / "v" / n)) for n in ("a.mp4", "b.mkv", "sub/c.mov")]


def test_empty_folder(tmp_path):
    touch(tmp_path / "f" / "readme.txt")
    with pytest.raises(SourceError, match=r"^folder .*f holds no images or videos"):
        classify_inputs([tmp_path / "f"])


def test_glob(tmp_path):
    for name in ("a.mp4", "b.mp4", "c.jpg", "d.txt"):
        touch(tmp_path / name)
    assert classify_inputs([str(tmp_path / "*.mp4")]) == [
        SourceSpec("file", str(tmp_path / "a.mp4")),
        SourceSpec("file", str(tmp_path / "b.mp4")),
    ]
    mixed = classify_inputs([str(tmp_path / "*")])
    assert mixed[-1] == SourceSpec("images", str(tmp_path / "*")) and len(mixed) == 3
    with pytest.raises(SourceError, match="matches no files"):
        classify_inputs([str(tmp_path / "*.webm")])
    with pytest.raises(SourceError, match="no images or videos"):
        classify_inputs([str(tmp_path / "*.txt")])


def test_order_is_kept_and_inputs_checked(tmp_path):
    a, b = touch(tmp_path / "z.mp4"), touch(tmp_path / "a.mp4")
    assert [s.location for s in classify_inputs([str(a), str(b)])] == [str(a), str(b)]
    with pytest.raises(SourceError, match="no inputs"):
        classify_inputs([])
    with pytest.raises(SourceError, match="expected a path"):
        classify_inputs([3])


def test_spec_validates_kind():
    with pytest.raises(ConfigError, match="kind"):
        SourceSpec("stream", "x")


def test_extension_lists():
    assert {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"} <= IMAGE_EXTENSIONS
    assert {".mp4", ".mkv", ".avi", ".webm", ".mov"} <= VIDEO_EXTENSIONS
    assert not IMAGE_EXTENSIONS & VIDEO_EXTENSIONS
