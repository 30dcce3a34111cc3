"""Outputs of the pipeline: detection tables (CSV, JSONL, Parquet), callbacks, fan-out.

See :mod:`vidpipe.sinks.base` for the life cycle (write batches, then close or abort) and
:mod:`vidpipe.sinks.table` for the table format and its live, crash-safe, metadata-carrying
files.
"""

from vidpipe.sinks._writers import CAPTURE_COLUMNS, COLUMN_TYPES, COLUMNS, TRACK_COLUMN
from vidpipe.sinks.base import Sink
from vidpipe.sinks.callback import CallbackSink
from vidpipe.sinks.factory import make_sink
from vidpipe.sinks.multi import MultiSink
from vidpipe.sinks.paths import TABLE_EXTENSIONS, TABLE_FORMATS, default_output_path, table_format
from vidpipe.sinks.rotate import RotatingTableSink
from vidpipe.sinks.table import TableSink, metadata_path

__all__ = [
    "Sink",
    "TableSink",
    "RotatingTableSink",
    "CallbackSink",
    "MultiSink",
    "make_sink",
    "default_output_path",
    "metadata_path",
    "table_format",
    "COLUMNS",
    "TRACK_COLUMN",
    "CAPTURE_COLUMNS",
    "COLUMN_TYPES",
    "TABLE_FORMATS",
    "TABLE_EXTENSIONS",
]
