"""Shell completion for ``kb``: a bash or zsh script made from the parser itself, so it
offers exactly the commands and options the parser takes."""

import argparse


def _subparsers(parser):
    """The ``{name: parser}`` of a parser's subcommands (aliases included)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser):
    """A parser's long options, sorted."""
    return sorted(option for action in parser._actions for option in action.option_strings
                  if option.startswith("--"))


def _choices(parser):
    """``{option: [choices]}`` of a parser's options that take one of a few values."""
    out = {}
    for action in parser._actions:
        if action.choices and action.option_strings and not isinstance(
                action, argparse._SubParsersAction):
            out[action.option_strings[-1]] = [str(c) for c in action.choices]
    return out


def script(parser, shell):
    """The completion script for ``shell`` (``bash`` or ``zsh``)."""
    commands = _subparsers(parser)
    words = {name: _options(sub) + sorted(_subparsers(sub)) for name, sub in commands.items()}
    choices = {}
    for sub in commands.values():
        choices.update(_choices(sub))
    top = " ".join(sorted(commands) + _options(parser))
    cases = "\n".join("        %s) opts=%r ;;" % (name, " ".join(words[name]))
                      for name in sorted(words))
    values = "\n".join("        %s) COMPREPLY=($(compgen -W %r -- \"$cur\")); return ;;"
                       % (option, " ".join(vals)) for option, vals in sorted(choices.items()))
    bash = '''# bash completion for kb: eval "$(kb completion bash)" in ~/.bashrc
_kb() {
    local cur prev cmd opts i
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        --db|--file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
%(values)s
    esac
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in -*) ;; *) cmd="${COMP_WORDS[i]}"; break ;; esac
    done
    case "$cmd" in
        "") opts=%(top)r ;;
%(cases)s
        *) opts="" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o default -F _kb kb
''' % {"values": values, "top": top, "cases": cases}
    if shell == "bash":
        return bash
    return ('''#compdef kb
# zsh completion for kb: kb completion zsh > a folder on $fpath as _kb, then compinit
autoload -U bashcompinit && bashcompinit
''' + bash)
