"""The ``recio`` command: a group whose subcommands live in their own modules, loaded lazily."""
from __future__ import annotations

import importlib
import importlib.util
from typing import List, Optional

import click

# subcommand name -> (module inside recio.cli, click command attribute)
SUBCOMMANDS = {
    "split": ("split", "split_cmd"),
    "inspect": ("inspect", "inspect_cmd"),
    "index": ("index", "index_cmd"),
    "verify": ("verify", "verify_cmd"),
    "extract": ("extract", "extract_cmd"),
    "im2rec": ("im2rec", "im2rec_cmd"),
    "buckets": ("buckets", "buckets_cmd"),
    "convert": ("convert", "convert_cmd"),
}


class LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand is used or listed."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        names = [name for name, (module, _) in SUBCOMMANDS.items()
                 if importlib.util.find_spec(f"{__package__}.{module}") is not None]
        return sorted(names + list(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.commands:
            return self.commands[name]
        if name not in SUBCOMMANDS:
            return None
        module, attr = SUBCOMMANDS[name]
        if importlib.util.find_spec(f"{__package__}.{module}") is None:
            return None
        return getattr(importlib.import_module(f"{__package__}.{module}"), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recio")
def recio() -> None:
    """Read, write, split, inspect and pack RecordIO (.rec/.idx) files — no MXNet needed.

    \b
    Examples:
      recio inspect train.rec            # what is in a record file
      recio verify train.rec --images    # find corrupted records and images
      recio split a.rec b.rec -n 8       # how 8 workers would partition the data
      recio im2rec data/train images/ --list --recursive

    Exit status: 0 success, 1 damage found (verify) or failed items (--strict),
    2 usage error or unreadable input.
    """


def main() -> None:
    """Console-script entry point for ``recio``."""
    recio(prog_name="recio")


if __name__ == "__main__":
    main()
