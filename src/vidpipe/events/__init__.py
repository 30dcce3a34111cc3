"""Where the events of a run's stages go (:class:`~vidpipe.stages.Event`: zone entered or left,
line crossed, dwell over a threshold): an events table beside the detections, an HTTP webhook,
an MQTT broker. Each is a :class:`~vidpipe.sinks.Sink` fed the same batches of results as the
detection tables (it takes the ``events`` of each result)::

    run = vidpipe.detect("door.mp4", stages=[...])           # stages that emit events
    with EventTableSink("door.events.csv") as table, WebhookSink("https://hooks.example/x") as hook:
        for batch in run.batches():
            table.write(batch)
            hook.write(batch)                                # queued; POSTed by a background thread
        summary = run.summary()
        hook.close(summary)                                  # flushes (bounded wait)
        table.close(summary)
    hook.stats                                               # delivered / dropped / failed / ...

``vidpipe detect`` and ``vidpipe serve`` build them from ``--events``/``--webhook``/``--mqtt``
and the ``events:`` block of the config file (:mod:`vidpipe.events.outputs`).
"""

from vidpipe.events._writers import EVENT_COLUMN_TYPES, EVENT_COLUMNS
from vidpipe.events.mqtt import MqttSink, topic_of
from vidpipe.events.outputs import EventOutputs, events_path
from vidpipe.events.table import EventTableSink, RotatingEventTableSink, events_of
from vidpipe.events.webhook import WebhookSink

__all__ = [
    "EventTableSink",
    "RotatingEventTableSink",
    "WebhookSink",
    "MqttSink",
    "EventOutputs",
    "events_path",
    "events_of",
    "topic_of",
    "EVENT_COLUMNS",
    "EVENT_COLUMN_TYPES",
]
