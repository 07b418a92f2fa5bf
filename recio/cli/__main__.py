"""``python -m recio.cli``: the same as ``python -m recio``."""
from recio.cli.entry import run_command

if __name__ == "__main__":
    run_command("recio.cli.main")
