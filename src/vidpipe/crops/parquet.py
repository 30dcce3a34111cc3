"""Embeddings to a Parquet file: :class:`EmbeddingsParquet`, a stage placed after the tracker.

One row per embedded detection (rows the ``embed`` stage left NaN, i.e. classes it did not
select, are not written)::

    source: string, stream_id: int32, frame: int64, pts: double (null: none),
    det: int32 (the row in the frame's detections), track_id: int64 (null: not tracked),
    class_id: int32, class_name: string, embedding: fixed_size_list<float>[D]

Like vidpipe's Parquet tables, the file is written to a hidden temporary file beside it
(``.NAME.tmp-<pid>``) in row groups and renamed into place when the run ends (:meth:`close`), so
a reader never sees half a file; a ``kill -9`` leaves the temporary file behind.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    from vidpipe.types import FrameResult

__all__ = ["EmbeddingsParquet", "EMBEDDING_COLUMNS"]

logger = logging.getLogger(__name__)

EMBEDDING_COLUMNS = ("source", "stream_id", "frame", "pts", "det", "track_id", "class_id", "class_name", "embedding")


class EmbeddingsParquet:
    """A stage that writes ``FrameResult.embeddings`` (with track ids when a tracker ran before it)
    to ``path``. Results pass through unchanged. One device->host copy per call.

    Args:
        path: the ``.parquet`` file (replaced when the run ends).
        row_group_size: rows buffered before a row group is written.
    """

    name = "embeddings_file"
    needs_frames = False

    def __init__(self, path: "str | os.PathLike", *, row_group_size: int = 65536) -> None:
        self.path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise ConfigError(f"embeddings file {self.path}: the folder {folder} does not exist")
        self.row_group_size = int(row_group_size)
        self._tmp = os.path.join(folder, f".{os.path.basename(self.path)}.tmp-{os.getpid()}")
        self._writer: Any = None
        self._schema: Any = None
        self._buf: list[dict[str, list]] = []
        self._buffered = 0
        self.dim: int | None = None
        self.rows = 0
        self._closed = False

    # ------------------------------------------------------------------ Stage protocol
    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        import torch

        with_emb = [r for r in results if r.embeddings is not None and len(r.detections)]
        if not with_emb:
            return results
        dim = int(with_emb[0].embeddings.shape[1])  # type: ignore[union-attr]
        if self.dim is None:
            self.dim = dim
        elif dim != self.dim:
            raise ConfigError(f"embeddings file {self.path}: embeddings of {dim} values after {self.dim}")
        cols = []
        for r in with_emb:
            d = r.detections
            tid = d.track_ids if d.track_ids is not None else torch.full_like(d.class_ids, -1)
            track_flag = torch.full_like(d.class_ids, 0 if d.track_ids is None else 1)
            meta = torch.stack([d.class_ids, tid, track_flag], 1).double()
            cols.append(torch.cat([meta.to(r.embeddings.device), r.embeddings.double()], 1))  # type: ignore[union-attr]
        packed = torch.cat(cols).cpu().numpy()  # the one host copy
        self._add(with_emb, packed)
        return results

    def reset(self, stream_id: int) -> None:
        """Nothing to forget."""

    def report(self) -> Mapping[str, Any]:
        return {"path": self.path, "rows": self.rows, "dim": self.dim}

    def close(self) -> None:
        """Write what is buffered and move the file into place (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._flush()
        if self._writer is None:
            self._open()  # an empty table: no embedding was made
        self._writer.close()
        os.replace(self._tmp, self.path)
        logger.info("embeddings: %d rows written to %s", self.rows, self.path)

    # ------------------------------------------------------------------ internals
    def _add(self, results: "Sequence[FrameResult]", packed: Any) -> None:
        import numpy as np

        at = 0
        buf: dict[str, list] = {c: [] for c in EMBEDDING_COLUMNS}
        for r in results:
            n = len(r.detections)
            block = packed[at : at + n]
            at += n
            emb = block[:, 3:].astype(np.float32)
            keep = np.flatnonzero(~np.isnan(emb[:, 0])) if emb.shape[1] else np.arange(0)
            names = r.names
            for i in keep.tolist():
                cid = int(block[i, 0])
                buf["source"].append(r.meta.source)
                buf["stream_id"].append(r.meta.stream_id)
                buf["frame"].append(r.meta.index)
                buf["pts"].append(r.meta.pts)
                buf["det"].append(i)
                buf["track_id"].append(int(block[i, 1]) if block[i, 2] else None)
                buf["class_id"].append(cid)
                buf["class_name"].append(names[cid] if 0 <= cid < len(names) else str(cid))
            buf["embedding"].append(emb[keep])
        added = len(buf["source"])
        if added:
            self._buf.append(buf)
            self._buffered += added
            self.rows += added
        if self._buffered >= self.row_group_size:
            self._flush()

    def _open(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        vec = pa.list_(pa.float32(), self.dim) if self.dim else pa.list_(pa.float32())
        self._schema = pa.schema([
            ("source", pa.string()), ("stream_id", pa.int32()), ("frame", pa.int64()), ("pts", pa.float64()),
            ("det", pa.int32()), ("track_id", pa.int64()), ("class_id", pa.int32()), ("class_name", pa.string()),
            ("embedding", vec),
        ])  # fmt: skip
        self._writer = pq.ParquetWriter(self._tmp, self._schema)

    def _flush(self) -> None:
        if not self._buf:
            return
        import numpy as np
        import pyarrow as pa

        if self._writer is None:
            self._open()
        cols: dict[str, list] = {c: [] for c in EMBEDDING_COLUMNS[:-1]}
        for b in self._buf:
            for c in cols:
                cols[c].extend(b[c])
        flat = np.concatenate([e.reshape(-1) for b in self._buf for e in b["embedding"]]).astype(np.float32)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), self.dim)
        arrays = [pa.array(cols[c], type=self._schema.field(c).type) for c in cols] + [vectors]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self._schema))
        self._buf, self._buffered = [], 0
