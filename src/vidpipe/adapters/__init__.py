"""Adapters from vidpipe's types to other ecosystems' types, one module per ecosystem.

Each adapter imports its ecosystem lazily and fails with an install hint
(:class:`~vidpipe.errors.BackendUnavailableError`) when it is missing; nothing here is imported by
``import vidpipe``. The core types expose them as thin methods
(:meth:`vidpipe.types.Detections.to_supervision`, :meth:`vidpipe.types.FrameResult.to_supervision`).

- :mod:`vidpipe.adapters.supervision`: ``supervision.Detections`` (annotators, zones, trackers).
"""
