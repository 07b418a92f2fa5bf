"""``python -m recio``: the ``recio`` command, without depending on a console script on PATH."""
from recio.cli.main import main

if __name__ == "__main__":
    main()
