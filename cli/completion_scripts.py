"""The completion scripts themselves, rendered from a ``completion.Tree``.

Three small shell functions carry the tree in every shell: ``words PATH`` (what may follow
the verbs in PATH), ``options PATH`` and ``values PATH OPTION`` (an option's choices, ``@file``
for a file name, ``@value`` for a value we cannot guess). bash and zsh share them (the
``case`` syntax is the same); fish gets its own ``switch``. Each shell then works out the
command path from the words typed so far, skipping option values.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compactlog.cli.completion import Tree

SHELLS = ("bash", "zsh", "fish")
_FILE, _VALUE = "@file", "@value"


def _q(text: str) -> str:
    return shlex.quote(text)


def _lines(words: list[str]) -> str:
    return "printf '%s\\n' " + " ".join(_q(w) for w in words) if words else ":"


def _pattern(path: str, option: str, fish: bool) -> str:
    """A case pattern over "PATH|OPTION"; a top-level (global) option matches any path.
    sh leaves a quoted ``*`` alone, fish wants the wildcard inside the quotes."""
    if path:
        return _q(f"{path}|{option}")
    return _q(f"*|{option}") if fish else f"*{_q('|' + option)}"


def _value_arms(tree: Tree, fish: bool) -> list[tuple[str, str]]:
    """(pattern, the values) in match order: a path's own option first, then any path.
    Alternative patterns are joined by ``|`` in sh, a space in fish."""
    arms = [
        (_pattern(p, o, fish), _lines(values)) for (p, o), values in sorted(tree.values.items())
    ]
    arms += [(_pattern(p, o, fish), _lines([_FILE])) for p, o in sorted(tree.files)]
    arms.sort(key=lambda arm: "*" in arm[0])
    if tree.takes_value:
        sep = " " if fish else "|"
        anywhere = sep.join(_pattern("", o, fish) for o in sorted(tree.takes_value))
        arms.append((anywhere, _lines([_VALUE])))
    return arms


def _sh_data(tree: Tree) -> str:
    """``_compactlog_words`` / ``_options`` / ``_values`` for bash and zsh."""

    def case_fn(name: str, table: dict[str, list[str]]) -> str:
        arms = "".join(f"        {_q(p)}) {_lines(w)} ;;\n" for p, w in sorted(table.items()))
        return f'{name}() {{\n    case "$1" in\n{arms}    esac\n}}\n'

    values = "".join(f"        {p}) {body} ;;\n" for p, body in _value_arms(tree, fish=False))
    takes = " ".join(sorted(tree.takes_value))
    return (
        case_fn("_compactlog_words", tree.words)
        + case_fn("_compactlog_options", tree.options)
        + f'_compactlog_values() {{\n    case "$1|$2" in\n{values}    esac\n}}\n'
        + f"_compactlog_takes_value=' {takes} '\n"
        + """_compactlog_path() {
    local cmdpath="" skip=0 word
    for word in "$@"; do
        if [ "$skip" = 1 ]; then skip=0; continue; fi
        case "$_compactlog_takes_value" in *" $word "*) skip=1; continue ;; esac
        case " $(_compactlog_words "$cmdpath" | tr '\\n' ' ') " in
            *" $word "*) cmdpath="${cmdpath:+$cmdpath }$word" ;;
        esac
    done
    printf '%s' "$cmdpath"
}
"""
    )


_BASH = """_compactlog() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local cmdpath values words
    cmdpath="$(_compactlog_path "${COMP_WORDS[@]:1:COMP_CWORD-1}")"
    if [ "$COMP_CWORD" -gt 1 ]; then
        values="$(_compactlog_values "$cmdpath" "$prev")"
        case "$values" in
            "") ;;
            @file) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
            @value) COMPREPLY=(); return 0 ;;
            *) COMPREPLY=($(compgen -W "$values" -- "$cur")); return 0 ;;
        esac
    fi
    words="$(_compactlog_words "$cmdpath")"
    if [[ "$cur" == -* || -z "$words" ]]; then
        words="$(_compactlog_options "$cmdpath")"
    fi
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _compactlog compactlog
"""

_ZSH = """_compactlog() {
    local cur="${words[CURRENT]}" prev="${words[CURRENT-1]}"
    local cmdpath values offer
    cmdpath="$(_compactlog_path "${(@)words[2,CURRENT-1]}")"
    if (( CURRENT > 2 )); then
        values="$(_compactlog_values "$cmdpath" "$prev")"
        case "$values" in
            "") ;;
            @file) _files; return ;;
            @value) return 1 ;;
            *) compadd -- ${(f)values}; return ;;
        esac
    fi
    offer="$(_compactlog_words "$cmdpath")"
    if [[ "$cur" == -* || -z "$offer" ]]; then
        offer="$(_compactlog_options "$cmdpath")"
    fi
    compadd -- ${(f)offer}
}
compdef _compactlog compactlog
"""


def _fish(tree: Tree) -> str:
    def switch_fn(name: str, table: dict[str, list[str]]) -> str:
        arms = "".join(f"        case {_q(p)}\n            {_lines(w)}\n" for p, w in table.items())
        return f"function {name}\n    switch $argv[1]\n{arms}    end\nend\n"

    arms = _value_arms(tree, fish=True)
    values = "".join(f"        case {p}\n            {body}\n" for p, body in arms)
    takes = " ".join(sorted(tree.takes_value))
    return (
        switch_fn("__compactlog_words", tree.words)
        + switch_fn("__compactlog_options", tree.options)
        + f'function __compactlog_values\n    switch "$argv[1]|$argv[2]"\n{values}    end\nend\n'
        + f"set -g __compactlog_takes_value {takes}\n"
        + """function __compactlog_complete
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l cur (commandline -ct)
    set -l cmdpath ''
    set -l skip 0
    for word in $tokens
        if test $skip = 1
            set skip 0
            continue
        end
        if contains -- $word $__compactlog_takes_value
            set skip 1
            continue
        end
        if contains -- $word (__compactlog_words "$cmdpath")
            set cmdpath (string trim -- "$cmdpath $word")
        end
    end
    if test (count $tokens) -gt 0
        set -l values (__compactlog_values "$cmdpath" $tokens[-1])
        if test (count $values) -gt 0
            switch $values[1]
                case @file
                    __fish_complete_path $cur
                case @value
                case '*'
                    printf '%s\\n' $values
            end
            return
        end
    end
    set -l offer (__compactlog_words "$cmdpath")
    if string match -q -- '-*' "$cur"; or test (count $offer) -eq 0
        set offer (__compactlog_options "$cmdpath")
    end
    printf '%s\\n' $offer
end
complete -c compactlog -f -a '(__compactlog_complete)'
"""
    )


def render(shell: str, tree: Tree) -> str:
    """The whole script for ``shell`` (one of ``SHELLS``)."""
    head = f"# compactlog {shell} completion, generated by `compactlog completion {shell}`\n"
    if shell == "bash":
        return head + _sh_data(tree) + _BASH
    if shell == "zsh":
        return head + _sh_data(tree) + _ZSH
    return head + _fish(tree)
