"""recio's command line: a thin click layer over the library (``python -m recio``,
``python -m recio.im2rec``, or the ``recio`` / ``im2rec`` console scripts)."""
