"""``python -m recio`` and the ``recio`` console script: the ``recio`` command, without
depending on a console script on PATH."""
from recio.cli.entry import run_command


def main() -> None:
    """Console-script entry point for ``recio``."""
    run_command("recio.cli.main")


if __name__ == "__main__":
    main()
