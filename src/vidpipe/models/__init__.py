"""Detection models: backends (Darknet, PyTorch, ONNX, TensorRT), output heads, the bundled zoo."""
