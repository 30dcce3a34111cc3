"""Credentials in URLs never leave the process (issue 12, item 8).

A real HTTP server on loopback (tests/auth_http.py) serves an MPEG-TS clip only to requests with
the right Basic credentials, so a run that reads it proves the URL was opened *with* them; then
the password (and its Base64 form) must appear nowhere: stdout, stderr (with and without
``--debug`` tracebacks), the table, its metadata, log records (vidpipe's and FFmpeg's own, which
PyAV routes to the ``libav.*`` loggers), exception messages and their chained causes, reprs,
the summary.
"""

from __future__ import annotations

import base64
import csv
import json
import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from auth_http import AuthHTTPServer

USER, PASSWORD = "admin", "s3cret-Pw"
SECRETS = (PASSWORD, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())


def assert_clean(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} shows a credential: ...{text[max(0, text.find(secret) - 80):][:200]}"


def exception_texts(exc: BaseException | None) -> list[str]:
    """str and repr of an exception and of every exception chained to it (cause and context)."""
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out += [str(exc), repr(exc)]
        exc = exc.__cause__ or exc.__context__
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A folder with ``clip.ts`` (the first second of the bundled sample, remuxed: it has
    detections) and ``notvideo.ts`` (text), served with credentials."""
    import av

    from vidpipe.data import sample_video

    root = tmp_path_factory.mktemp("www")
    with av.open(str(sample_video())) as inp, av.open(str(root / "clip.ts"), "w", format="mpegts") as out:
        stream = inp.streams.video[0]
        ostream = out.add_stream_from_template(stream)
        for packet in inp.demux(stream):
            if packet.dts is None:
                continue
            if packet.pts is not None and packet.pts * stream.time_base > 1.0:
                break
            packet.stream = ostream
            out.mux(packet)
    (root / "notvideo.ts").write_text("this is not a video\n")
    with AuthHTTPServer(root, USER, PASSWORD) as server:
        yield server


def url(server: AuthHTTPServer, name: str, password: str = PASSWORD) -> str:
    return f"http://{USER}:{password}@127.0.0.1:{server.port}/{name}"


# ------------------------------------------------------------------------------- the rules


def test_redact_text_masks_userinfo_query_secrets_and_authorization_headers():
    from vidpipe.sources.redact import redact_text

    assert redact_text("rtsp://admin:s3cret@10.0.0.5:554/x") == "rtsp://***@10.0.0.5:554/x"
    assert redact_text("rtsp://admin:p@ss@cam:554/x") == "rtsp://***@cam:554/x"  # unencoded "@"
    assert redact_text("srt://h:9000?mode=caller&passphrase=abc") == "srt://h:9000?mode=caller&passphrase=***"
    # FFmpeg's RTSP client logs its requests at trace level, Base64 credentials included
    assert redact_text("OPTIONS rtsp://h/x RTSP/1.0\r\nAuthorization: Basic YWRtaW46czNj\r\nCSeq: 2") == (
        "OPTIONS rtsp://h/x RTSP/1.0\r\nAuthorization: ***\r\nCSeq: 2"
    )
    assert redact_text("/videos/a@b.mp4") == "/videos/a@b.mp4"
    assert redact_text("rtsp://cam/x user@example.com") == "rtsp://cam/x user@example.com"


def test_vidpipe_errors_and_stream_info_never_carry_credentials():
    from fractions import Fraction

    from vidpipe.decode.base import StreamInfo
    from vidpipe.errors import SinkError, SourceError
    from vidpipe.types import ColorSpec

    secret_url = f"rtsp://{USER}:{PASSWORD}@cam:554/live"
    err = SourceError(f"cannot open {secret_url}")
    assert isinstance(err, OSError) and str(err) == "cannot open rtsp://***@cam:554/live"
    assert_clean(repr(SinkError(secret_url)), "SinkError")
    info = StreamInfo(
        source=secret_url, container="rtsp", codec="h264", profile=None, width=320, height=240,
        pix_fmt="yuv420p", bit_depth=8, chroma="420", fps=15.0, frame_count=None, frame_count_exact=False,
        duration=None, time_base=Fraction(1, 90000), start_time=None, bit_rate=None,
        color=ColorSpec(matrix="bt601", range="limited"), color_specified=False,
    )
    assert info.source == "rtsp://***@cam:554/live" and info.location == secret_url
    assert_clean(repr(info), "StreamInfo repr")
    import dataclasses

    again = dataclasses.replace(info, rotation=90)
    assert again.location == secret_url and again.source == info.source


def test_summary_and_its_dict_text_and_repr_are_redacted():
    from vidpipe.summary import RunSummary, SourceSummary

    secret_url = f"rtsp://{USER}:{PASSWORD}@cam/x"
    s = SourceSummary(secret_url, kind="live", status="failed", error=f"cannot open {secret_url}",
                      extra={"note": f"from {secret_url}"})
    run = RunSummary(sources=(s,), skipped=({"path": secret_url, "reason": "x"},),
                     stats={"streams": [{"source": secret_url}]})
    for text in (json.dumps(run.to_dict()), run.format_text(), repr(run), s.source, s.error):
        assert_clean(text, "summary")
    assert run.to_dict()["sources"][0]["source"] == "rtsp://***@cam/x"


def test_redacting_filter_masks_tracebacks_and_arguments(caplog):
    from vidpipe.sources.redact import RedactingFilter

    handler_filter = RedactingFilter()
    record = logging.LogRecord("vidpipe.x", logging.ERROR, __file__, 1, "open %s", (url_text := f"http://{USER}:{PASSWORD}@h/x",), None)
    try:
        raise OSError(f"failed: {url_text}")
    except OSError:
        record.exc_info = sys.exc_info()
    assert handler_filter.filter(record)
    text = logging.Formatter("%(message)s").format(record)
    assert "http://***@h/x" in text and "OSError: failed: http://***@h/x" in text
    assert_clean(text, "formatted record")


# ------------------------------------------------------------------- the library, real server


def test_probe_and_decode_through_a_password_protected_server(served, caplog):
    import vidpipe
    from vidpipe.decode.probe import probe

    caplog.set_level(logging.DEBUG)
    secret_url = url(served, "clip.ts")
    info = probe(secret_url)
    assert served.authorized  # opened with the URL's credentials, not a redacted copy
    assert info.location == secret_url and info.source == f"http://***@127.0.0.1:{served.port}/clip.ts"
    frames = 0
    with vidpipe.open_video(secret_url, device="cpu") as video:
        assert_clean(repr(video), "Video repr")
        for batch in video.batches(8):
            frames += len(batch.frames)
            assert {m.source for m in batch.frames} == {info.source}
    assert frames > 10
    assert_clean(caplog.text, "log")


@pytest.mark.parametrize("name, password, words", [
    ("missing.ts", PASSWORD, "404"),
    ("notvideo.ts", PASSWORD, "Invalid data"),
    ("clip.ts", "wrong-pw", "401"),
    (None, PASSWORD, "refused"),  # nothing listens on the port
])
def test_open_errors_name_the_redacted_url_and_chain_no_secret(served, caplog, name, password, words):
    from vidpipe.decode.probe import probe
    from vidpipe.errors import SourceError

    caplog.set_level(logging.DEBUG)
    target = url(served, name, password) if name else f"rtsp://{USER}:{PASSWORD}@127.0.0.1:{free_port()}/cam"
    with pytest.raises(SourceError) as info:
        probe(target)
    assert words in str(info.value) and "://***@127.0.0.1:" in str(info.value)
    for text in exception_texts(info.value):
        assert_clean(text, "exception chain")
    import traceback

    assert_clean("".join(traceback.format_exception(info.value)), "traceback")
    assert_clean(caplog.text, "log")


class _Rtsp401:
    """A minimal RTSP responder on loopback that answers every request 401 with a Basic
    challenge, so FFmpeg's RTSP client sends (and, at trace level, logs) its Authorization."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                buf = b""
                try:
                    while not self.stop.is_set():
                        data = conn.recv(4096)
                        if not data:
                            break
                        buf += data
                        while b"\r\n\r\n" in buf:
                            head, buf = buf.split(b"\r\n\r\n", 1)
                            cseq = next((ln.split(b":", 1)[1].strip() for ln in head.split(b"\r\n")
                                         if ln.lower().startswith(b"cseq:")), b"1")
                            conn.sendall(b"RTSP/1.0 401 Unauthorized\r\nCSeq: " + cseq
                                         + b'\r\nWWW-Authenticate: Basic realm="cam"\r\n\r\n')
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def test_ffmpeg_own_messages_are_redacted_when_pyav_logging_is_on(caplog):
    """PyAV's logging is off by default (vidpipe leaves it so); a user who turns it on gets
    FFmpeg's messages as ``libav.*`` records, the RTSP client's requests with their
    ``Authorization`` header among them at trace level: vidpipe masks them when it opens a URL."""
    import av.logging

    from vidpipe.decode.probe import probe
    from vidpipe.errors import SourceError

    server = _Rtsp401()
    libav = logging.getLogger("libav")
    old_level = libav.level
    caplog.set_level(1)
    libav.setLevel(1)
    av.logging.set_level(56)  # AV_LOG_TRACE
    try:
        with pytest.raises(SourceError, match="401"):
            probe(f"rtsp://{USER}:{PASSWORD}@127.0.0.1:{server.port}/cam")
    finally:
        av.logging.set_level(None)
        libav.setLevel(old_level)
        server.close()
    sent = [r for r in caplog.records if r.name == "libav.rtsp" and "Authorization" in r.getMessage()]
    assert sent, "FFmpeg did not log its authorised request; the test proves nothing"
    assert all("Authorization: ***" in r.getMessage() for r in sent)
    assert_clean(caplog.text, "FFmpeg's log")


# ------------------------------------------------------------------------------------ the CLI


def vidpipe_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidpipe", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_cli_end_to_end_never_shows_the_password(served, tmp_path, debug):
    good = url(served, "clip.ts")
    # a server that answers "no" (404, not a video, wrong password) fails the input at once; an
    # unreachable one is an offline camera, retried until the run ends (the probe test above
    # covers its message); --max-frames ends the live good input
    bad = [url(served, "missing.ts"), url(served, "notvideo.ts"), url(served, "clip.ts", "wrong-pw")]
    out = tmp_path / "dets.csv"
    p = vidpipe_cli("detect", good, *bad, "-o", str(out), "--device", "cpu", "--max-frames", "30",
                    *(["--debug"] if debug else []), cwd=tmp_path)
    assert p.returncode == 2, p.stderr  # three inputs failed
    assert served.authorized
    assert_clean(p.stdout, "stdout")
    assert_clean(p.stderr, "stderr")
    if debug:
        assert "Traceback" in p.stderr  # the tracebacks are there, masked (the live reader raises without a cause)
    assert p.stderr.count("vidpipe: error: cannot open") == 3
    for words in ("404", "Invalid data", "401"):
        assert words in p.stderr
    rows = list(csv.DictReader(out.open()))
    assert rows, "no detections: the clip should have some"
    # an http:// input is live: the table has the capture-time columns (filled by the live sources)
    assert list(rows[0])[-2:] == ["captured_at", "latency_ms"]
    assert {r["source"] for r in rows} == {f"http://***@127.0.0.1:{served.port}/clip.ts"}
    meta_text = (tmp_path / "dets.csv.meta.json").read_text()
    assert_clean(out.read_text(), "table")
    assert_clean(meta_text, "meta.json")
    meta = json.loads(meta_text)
    assert meta["sources"][0]["source"].startswith("http://***@")
    assert len(meta["summary"]["sources"]) == 4


def test_importing_vidpipe_leaves_logging_alone():
    """No filter, handler or level is installed at import: only opening a URL guards the
    ``libav`` loggers, and only the CLI configures handlers."""
    code = (
        "import logging, vidpipe, vidpipe.decode.probe, vidpipe.sinks, vidpipe.sources.redact;"
        "names = ['libav', 'libav.rtsp', 'libav.http', 'vidpipe'];"
        "print([(len(logging.getLogger(n).filters), len(logging.getLogger(n).handlers)) for n in names],"
        " len(logging.getLogger().handlers))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[(0, 0), (0, 0), (0, 0), (0, 0)] 0"
