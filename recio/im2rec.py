"""``python -m recio.im2rec``: the ``im2rec`` command (MXNet's tools/im2rec.py arguments)."""
from recio.cli.im2rec import main

if __name__ == "__main__":
    main()
