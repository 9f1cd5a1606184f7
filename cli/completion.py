"""``compactlog completion bash|zsh|fish``: a shell completion script for the command tree.

Generated from the argparse parser itself, so a verb added anywhere (``topics``, ``admin
topics``, a new command group) completes with no change here. The script holds, per command
path (``""``, ``"topics"``, ``"admin topics"`` ...), the words that may follow (sub-verbs and
positional choices) and the options; option values complete from their ``choices``
(``--kind``, ``--output`` ...) or as file names when the metavar says FILE or PATH. The
global options (``--server`` ...) are offered at every level, since they may stand anywhere.
No Python runs on <TAB>: the tree is baked into the script.

    source <(compactlog completion bash)           # ~/.bashrc
    source <(compactlog completion zsh)            # ~/.zshrc (after compinit)
    compactlog completion fish > ~/.config/fish/completions/compactlog.fish
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from compactlog.cli.completion_scripts import SHELLS, render

Path = str  # "" for the top level, else the verbs joined by spaces


@dataclass
class Tree:
    """What the scripts need to know about the parser."""

    words: dict[Path, list[str]] = field(default_factory=dict)  # sub-verbs, positional choices
    options: dict[Path, list[str]] = field(default_factory=dict)
    values: dict[tuple[Path, str], list[str]] = field(default_factory=dict)  # its choices
    files: set[tuple[Path, str]] = field(default_factory=set)  # (path, option) of a file
    takes_value: set[str] = field(default_factory=set)  # options followed by a value


def add_parser(commands: Any) -> None:
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script: source <(compactlog completion bash)",
    )
    completion.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    completion.set_defaults(func=completion_cmd)


def completion_cmd(args: argparse.Namespace) -> int:
    from compactlog.cli.app import build_parser  # the whole tree, this verb included

    print(render(args.shell, command_tree(build_parser())), end="")
    return 0


def _is_file_metavar(action: argparse.Action) -> bool:
    metavar = str(action.metavar or "")
    return any(word in metavar for word in ("FILE", "PATH"))


def _walk(parser: argparse.ArgumentParser, path: Path, tree: Tree) -> None:
    words: list[str] = []
    options: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(name)
                _walk(sub, f"{path} {name}".strip(), tree)
            continue
        if not action.option_strings:
            if action.choices is not None:
                words += [str(choice) for choice in action.choices]
            continue
        options += action.option_strings
        if action.nargs == 0:
            continue
        for option in action.option_strings:
            tree.takes_value.add(option)
            if action.choices is not None:
                tree.values[path, option] = [str(choice) for choice in action.choices]
            elif _is_file_metavar(action):
                tree.files.add((path, option))
    tree.words[path] = words
    tree.options[path] = options


def command_tree(parser: argparse.ArgumentParser) -> Tree:
    """The parser's command paths, words and options; the global options at every path."""
    tree = Tree()
    _walk(parser, "", tree)
    top = [o for o in tree.options[""] if o not in ("--version",)]
    for path, options in tree.options.items():
        if path:
            options += [o for o in top if o not in options]
    return tree
