"""Crops and embeddings of detections: crop-and-resize on the device (:func:`crop_detections`),
any torch / TorchScript / ONNX model on the crops (:func:`load_embedder`), and the stage that
fills ``FrameResult.embeddings`` (:class:`EmbedStage`, optionally writing them to Parquet)."""

from vidpipe.crops.roi import CropOptions, Crops, crop_detections

__all__ = ["CropOptions", "Crops", "crop_detections", "EmbedStage", "ColorGridEmbedder", "load_embedder"]


def __getattr__(name: str):
    if name == "EmbedStage":
        from vidpipe.crops.stage import EmbedStage

        return EmbedStage
    if name in ("ColorGridEmbedder", "load_embedder"):
        from vidpipe.crops import embedder

        return getattr(embedder, name)
    raise AttributeError(f"module 'vidpipe.crops' has no attribute {name!r}")
