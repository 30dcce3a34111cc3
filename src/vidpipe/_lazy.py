"""Lazy imports of heavy optional packages, failing with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType

from vidpipe.errors import BackendUnavailableError


def optional_import(module: str, *, purpose: str, install: str) -> ModuleType:
    """Import ``module`` or raise :class:`BackendUnavailableError` naming what to install.

    Any exception at import time counts as "unavailable" (PyNvVideoCodec raises ``RuntimeError``
    when the NVIDIA driver libraries are missing); the original is chained.
    """
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure means the backend is unusable
        raise BackendUnavailableError(
            f"{purpose} needs the Python package '{module}', which cannot be imported here "
            f"({type(exc).__name__}: {exc}); install it with: {install}"
        ) from exc
