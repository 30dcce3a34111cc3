from __future__ import annotations

import pytest
from imgfactory import encode, pattern, with_jpeg_size

from vidpipe.images.formats import ImageFormatError, describe_unknown, parse_exif_orientation, parse_jpeg_header, sniff


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [("JPEG", "jpeg"), ("PNG", "png"), ("WEBP", "webp"), ("BMP", "bmp"), ("TIFF", "tiff")],
)
def test_sniff_recognises_each_format(fmt, expected):
    assert sniff(encode(pattern(8, 8), fmt)[:64]) == expected


@pytest.mark.parametrize(
    ("head", "words"),
    [
        (b"hello, world\n", "text"),
        (b"GIF89a\x01\x00", "GIF"),
        (b"%PDF-1.7\n", "PDF"),
        (b"\x00\x01\x02\x03\x04\x05\x06\x07", "unrecognised"),
        (b"BM this is text, not a bitmap header", "text"),
    ],
)
def test_unsupported_content_is_described(head, words):
    assert sniff(head) is None
    assert words in describe_unknown(head)


def test_jpeg_header_size_components_process():
    rgb = parse_jpeg_header(encode(pattern(30, 50)))
    assert (rgb.width, rgb.height, rgb.components, rgb.process, rgb.precision) == (50, 30, 3, "baseline", 8)
    assert rgb.gpu_friendly
    grey = parse_jpeg_header(encode(pattern(30, 50), mode="L"))
    assert grey.components == 1 and grey.gpu_friendly
    cmyk = parse_jpeg_header(encode(pattern(30, 50), mode="CMYK"))
    assert cmyk.components == 4 and cmyk.adobe_transform is not None and not cmyk.gpu_friendly
    prog = parse_jpeg_header(encode(pattern(30, 50), progressive=True))
    assert prog.process == "progressive" and not prog.gpu_friendly


@pytest.mark.parametrize("orientation", range(1, 9))
def test_jpeg_header_exif_orientation(orientation):
    info = parse_jpeg_header(encode(pattern(30, 50), orientation=orientation))
    assert info.orientation == orientation
    assert info.oriented_size == ((50, 30) if orientation >= 5 else (30, 50))


def test_exif_orientation_big_endian_and_garbage():
    # Big-endian TIFF header, one IFD entry: tag 0x0112, SHORT, count 1, value 6.
    mm = b"MM\x00*\x00\x00\x00\x08" + b"\x00\x01" + b"\x01\x12\x00\x03\x00\x00\x00\x01\x00\x06\x00\x00"
    assert parse_exif_orientation(mm) == 6
    assert parse_exif_orientation(b"garbage") == 1
    assert parse_exif_orientation(mm[:12]) == 1  # IFD cut short
    out_of_range = mm[:-4] + b"\x00\x09\x00\x00"
    assert parse_exif_orientation(out_of_range) == 1


def test_truncated_jpeg_detected_in_scan_data():
    data = encode(pattern(200, 300, seed=3))
    with pytest.raises(ImageFormatError) as e:
        parse_jpeg_header(data[: int(len(data) * 0.8)])
    assert e.value.kind == "truncated"
    # Bytes after the end-of-image marker are allowed (some cameras append data).
    assert parse_jpeg_header(data + b"trailing").width == 300


def test_corrupt_markers_and_crafted_size():
    data = encode(pattern(20, 20))
    with pytest.raises(ImageFormatError) as e:
        parse_jpeg_header(data[:2] + b"\x00\x00" + data[4:])
    assert e.value.kind == "corrupt"
    big = parse_jpeg_header(with_jpeg_size(data, 30000, 20000))
    assert (big.width, big.height) == (30000, 20000)


@pytest.mark.parametrize(("subsampling", "factors"), [(0, (1, 1)), (1, (2, 1)), (2, (2, 2))])
def test_jpeg_sampling_factors_and_hardware_routing(subsampling, factors):
    import io

    from imgfactory import jpeg_segments
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (48, 32), (10, 200, 30)).save(buf, format="JPEG", subsampling=subsampling)
    info = parse_jpeg_header(buf.getvalue())
    assert info.sampling == (factors, (1, 1), (1, 1)) and info.hw_friendly
    # The same file claiming 4:1:1 luma sampling: still for nvJPEG, not for the hardware engines.
    data = bytearray(buf.getvalue())
    start = next(s for m, s, _ in jpeg_segments(bytes(data)) if m == 0xC0)
    data[start + 11] = 0x41
    odd = parse_jpeg_header(bytes(data))
    assert odd.sampling[0] == (4, 1) and odd.gpu_friendly and not odd.hw_friendly
    assert not parse_jpeg_header(encode(pattern(30, 50), progressive=True)).hw_friendly
    assert parse_jpeg_header(encode(pattern(30, 50), mode="L")).hw_friendly


def test_jpeg_header_from_a_memoryview_in_place():
    import numpy as np

    data = encode(pattern(40, 60, seed=4), orientation=6)
    arr = np.frombuffer(bytearray(data + b"tail bytes after EOI"), dtype=np.uint8)
    want = parse_jpeg_header(data)
    assert parse_jpeg_header(memoryview(arr)) == want  # trailing data: the slow search path
    assert parse_jpeg_header(memoryview(np.frombuffer(bytearray(data), dtype=np.uint8))) == want
    assert parse_jpeg_header(memoryview(data).cast("B", (len(data),))) == want
    with pytest.raises(ImageFormatError) as e:
        parse_jpeg_header(memoryview(arr)[: len(data) - 40])
    assert e.value.kind == "truncated"
