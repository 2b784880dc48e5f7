"""Shell completion for ``kb``: a bash, zsh or fish script made from the parser itself, so it
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
    """The completion script for ``shell`` (``bash``, ``zsh`` or ``fish``)."""
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
    if shell == "fish":
        return fish_script(parser)
    if shell == "bash":
        return bash
    return ('''#compdef kb
# zsh completion for kb: kb completion zsh > a folder on $fpath as _kb, then compinit
autoload -U bashcompinit && bashcompinit
''' + bash)


def fish_script(parser):
    """The fish completion script: each command where none is typed yet, then each
    command's options (and their few values) once it is."""
    commands = _subparsers(parser)
    lines = ["# fish completion for kb: kb completion fish > ~/.config/fish/completions/kb.fish",
             "complete -c kb -f",
             "complete -c kb -n __fish_use_subcommand -a %s" % _fish_quote(
                 " ".join(sorted(commands)))]
    for option in _options(parser):
        lines.append("complete -c kb -l %s" % option[2:])
    for name in sorted(commands):
        sub = commands[name]
        when = "-n %s" % _fish_quote("__fish_seen_subcommand_from %s" % name)
        actions = _subparsers(sub)
        if actions:
            lines.append("complete -c kb %s -a %s" % (when, _fish_quote(
                " ".join(sorted(actions)))))
        values = _choices(sub)
        for option in _options(sub):
            extra = " -xa %s" % _fish_quote(" ".join(values[option])) if option in values \
                else (" -rF" if option in ("--db", "--file") else "")
            lines.append("complete -c kb %s -l %s%s" % (when, option[2:], extra))
    return "\n".join(lines) + "\n"


def _fish_quote(text):
    """A fish single-quoted word (a quote or backslash escaped)."""
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")
