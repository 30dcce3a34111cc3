"""Child processes live no longer than the vidpipe process that started them.

Every process vidpipe starts (decoder processes, the encoder processes of
:class:`~vidpipe.encode.process.ProcessVideoWriter`, and for ``vidpipe bench`` the RTMP server
and the stream publishers) exits within a moment of its parent's death, by whatever signal the
parent died (``kill -9`` included):

- :mod:`vidpipe.lifetime.keeper` (the parent's side): children are started from a thread that
  lives as long as they are wanted (Linux sends the parent-death signal when the *thread* that
  started a child ends), Python children get the read end of a lifeline pipe, other programs a
  parent-death ``SIGKILL`` armed between ``fork`` and ``exec``;
- :mod:`vidpipe.lifetime.child` (a Python child's side): the lifeline's end of file and the
  parent-death signal end the child, after a cleanup of its own (the decoder processes remove
  their parent's CUDA IPC files; the encoder process finishes its file).
"""
