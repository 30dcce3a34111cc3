"""Decoder backends (one module each) behind one interface, and the ``auto`` selection."""
