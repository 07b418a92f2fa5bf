"""``python -m recio.cli``: the same as ``python -m recio``."""
from recio.cli.main import main

if __name__ == "__main__":
    main()
