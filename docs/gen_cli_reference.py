"""Regenerate docs/cli.md from the commands' own --help, so the reference cannot drift.

python docs/gen_cli_reference.py          # rewrite docs/cli.md
python docs/gen_cli_reference.py --check  # exit 1 if docs/cli.md is stale (a test runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sentinel.cli import root

TARGET = Path(__file__).resolve().parent / "cli.md"


def _walk(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            found.extend(_walk(command.commands[name], [*path, name]))
    return found


def render() -> str:
    parts = [
        "# Command reference\n",
        "Generated from `--help` by `docs/gen_cli_reference.py`; do not edit.\n",
    ]
    for path, command in _walk(root, ["sentinel"]):
        info = click.Context(
            command, info_name=" ".join(path), terminal_width=100, max_content_width=100
        )
        parts.append(f"\n## `{' '.join(path)}`\n\n```\n{command.get_help(info).rstrip()}\n```\n")
    return "".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print("docs/cli.md is stale: run python docs/gen_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
