"""The ``recio`` command: a group whose subcommands live in their own modules, loaded lazily."""
from __future__ import annotations

import difflib
import importlib
import importlib.util
from typing import List, Optional

import click

from recio.cli.common import EXIT_STATUS_HELP, printable_output

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
    "show": ("show", "show_cmd"),
    "repack": ("repack", "repack_cmd"),
    "repair": ("repair", "repair_cmd"),
}


class _LazyGroup(click.Group):
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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, with each command's whole first sentence (wrapped, never cut short
        with "...")."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: click.Context, args: List[str]):
        """As click's, plus "did you mean" for a mistyped subcommand."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint} (`recio --help` lists them.)")
        return super().resolve_command(ctx, args)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_STATUS_HELP)
@click.version_option(package_name="recio")
def recio() -> None:
    """Read, write, split, inspect and pack RecordIO (.rec/.idx) files — no MXNet needed.

    \b
    Examples:
      recio inspect train.rec            # what is in a record file
      recio verify train.rec --images    # find corrupted records and images
      recio repair train.rec -o fixed    # rescue the intact records of a damaged file
      recio split a.rec b.rec -n 8       # how 8 workers would partition the data
      recio im2rec data/train images/ --list --recursive

    \b
    Output files never replace an input; an existing output is replaced only with --force.
    """


def main() -> None:
    """Console-script entry point for ``recio``."""
    printable_output()
    recio(prog_name="recio")


if __name__ == "__main__":
    main()
