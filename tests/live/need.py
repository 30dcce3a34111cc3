"""Skip a live test when a package is missing, but fail it under ``CI=true`` (``.ci/run`` installs them)."""

from __future__ import annotations

import os

import pytest

__all__ = ["in_ci", "require", "require_nginx"]


def in_ci() -> bool:
    """Whether the environment variable ``CI`` is ``true`` (any case)."""
    return os.environ.get("CI", "").lower() == "true"


def require(reason: str | None) -> None:
    """Skip with ``reason`` (a missing package), or fail under ``CI=true``; nothing when ``None``."""
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"{reason}; CI must install it (.ci/run)", pytrace=False)
    pytest.skip(reason)


def require_nginx() -> tuple:
    """nginx with its RTMP module (``vidpipe.bench.rtmp_server.find_nginx``), or skip/fail as
    :func:`require` does."""
    from vidpipe.bench.rtmp_server import find_nginx

    try:
        return find_nginx()
    except FileNotFoundError as exc:
        require(str(exc))
        raise
