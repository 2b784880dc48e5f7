"""Shell completion for ``kb``: a bash, zsh or fish script made from the parser itself, so it
offers exactly the commands and options the parser takes; knowledge-base and article IDs it
asks ``kb __complete`` for (``completing``), which reads them from the store."""

import argparse

# The options whose value is a file name: the shell completes those from the file system.
FILE_OPTIONS = ("--db", "--file", "--config", "--log-file", "--ssl-certfile", "--ssl-keyfile",
                "--signing-secret-file")


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
# (or kb completion bash --install)
_kb_ids() {
    # The knowledge-base or article IDs the word being typed may be, from the store.
    kb __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null | cut -f1
}
_kb() {
    local cur prev cmd opts i ids
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        %(files)s) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --kb|--grant) COMPREPLY=($(compgen -W "$(_kb_ids)" -- "$cur")); return ;;
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
    # Where the word is an ID the store has, offer those alone, not the options beside them;
    # an option or a path (an ID has no /) asks no store.
    case "$cur" in -*|*/*|"~"*) ids="" ;; *) ids="$(_kb_ids)" ;; esac
    [ -n "$ids" ] && opts="$ids"
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o default -F _kb kb
''' % {"values": values, "top": top, "cases": cases, "files": "|".join(FILE_OPTIONS)}
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
             "# (or kb completion fish --install)",
             "function __kb_ids --description 'IDs from the store for the word being typed'",
             "    set -l words (commandline -opc)",
             "    kb __complete $words[2..-1] (commandline -ct) 2>/dev/null",
             "end",
             "complete -c kb -f",
             "complete -c kb -f -a '(__kb_ids)'",
             "complete -c kb -n __fish_use_subcommand -a %s" % _fish_quote(
                 " ".join(sorted(commands)))]
    for option in _options(parser):
        lines.append("complete -c kb -l %s" % option[2:])
    for name in sorted(commands):
        sub = commands[name]
        when = "-n %s" % _fish_quote("__fish_seen_subcommand_from %s" % name)
        actions = _subparsers(sub)
        if actions:
            # Its actions until one is given (kb token create: not create again).
            names = " ".join(sorted(actions))
            lines.append("complete -c kb -n %s -a %s" % (_fish_quote(
                "__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s"
                % (name, names)), _fish_quote(names)))
        values = _choices(sub)
        for option in _options(sub):
            extra = " -xa %s" % _fish_quote(" ".join(values[option])) if option in values \
                else " -rF" if option in FILE_OPTIONS \
                else " -xa '(__kb_ids)'" if option in ("--kb", "--grant") else ""
            lines.append("complete -c kb %s -l %s%s" % (when, option[2:], extra))
    return "\n".join(lines) + "\n"


def _fish_quote(text):
    """A fish single-quoted word (a quote or backslash escaped)."""
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")
