"""``python -m recio.im2rec`` and the ``im2rec`` console script: the ``im2rec`` command (MXNet's
tools/im2rec.py arguments)."""
from recio.cli.entry import run_command


def main() -> None:
    """Console-script entry point for ``im2rec``."""
    run_command("recio.cli.im2rec")


if __name__ == "__main__":
    main()
