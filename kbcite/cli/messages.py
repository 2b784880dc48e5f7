"""How the command line speaks: its name, its exit statuses, and the store's errors in words
for a person (the command line's names for arguments, no advice meant for an agent)."""

from ..errors import ToolError

PROG = "kb"

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CONFLICT = 0, 1, 2, 3
# What a shell reports for a process interrupted by Ctrl-C (SIGINT).
EXIT_INTERRUPTED = 130

# What a shell reports for a process ended by SIGPIPE; we end that way, minus the traceback.
EXIT_BROKEN_PIPE = 141

# The store names an argument as the tools do; a person typed the command line's spelling.
CLI_NAMES = {
    "after_sequence": "--after",
    "expected_version": "--expected-version",
    "idempotency_key": "--idempotency-key",
    "limit": "--limit",
    "query": "QUERY",
    "kb_id": "KB",
    "knowledge_base_id": "KB",
    "article_id": "ARTICLE",
    "resource_id": "KB",
    "to_version": "--to",
    "keep_days": "--keep-days",
    "actor": "--actor",
    "summary": "--summary",
    "approver": "--actor",
    "reason": "--reason",
    "expire_days": "--expire-days",
    # The Python API's keyword arguments, as the store's messages name them.
    "skip_bad=True": "--skip-bad",
    "yes=True": "--yes",
    "force=True": "--force",
}


class Conflict(Exception):
    """A command that found a newer version than the one it was told; exit status 3."""


class Interrupted(Exception):
    """Ctrl-C, with what it left behind said plainly; exit status 130."""


class CommandError(ToolError):
    """A failure the command line words itself, already for a person; exit status 1."""

    code = "command_failed"


class UsageError(CommandError):
    """A command asked for what it will not do as given (a flag missing that says it is
    meant); nothing was done; exit status 2, as argparse's own usage errors."""

    code = "usage"


# -- helpers -----------------------------------------------------------------------------------


def person_message(error):
    """A store error in words for a person at a terminal: command-line names, no agent advice."""
    details = error.details
    if isinstance(error, CommandError):
        return error.message
    if error.code in ("version_conflict", "not_found") and "proposal_id" in details:
        return error.message  # worded for the review commands already
    if error.code == "version_conflict":
        kb, article = details["knowledge_base_id"], details["article_id"]
        return ("article %s in knowledge base %s has changed since version %s: it is now at %s. "
                "Read it again (kb read %s %s; kb diff shows what changed), re-apply your "
                "change, and run the command again with --expected-version %s."
                % (article, kb, details["expected_version"], details["current_version"], kb,
                   article, details["current_version"]))
    if error.code == "not_found" and details.get("drafts_included"):
        # The people's side looked at drafts too: the article is not there at all.
        return ("there is no article %s in knowledge base %s, draft or published (kb list %s "
                "shows them all)" % (details["article_id"], details["knowledge_base_id"],
                                     details["knowledge_base_id"]))
    if error.code == "not_found" and "article_id" in details:
        return ("no published article %s in knowledge base %s (kb list %s shows every article, "
                "drafts included)" % (details["article_id"], details["knowledge_base_id"],
                                      details["knowledge_base_id"]))
    if error.code == "not_found" and "token" in details:
        return "there is no token named %s (kb token list lists them)" % details["token"]
    if error.code == "not_found" and "knowledge_base_id" in details:
        return ("there is no knowledge base %s in this store (kb knowledge-bases lists them)"
                % details["knowledge_base_id"])
    message = error.message
    for tool_name, cli_name in CLI_NAMES.items():
        message = _replace_word(message, tool_name, cli_name)
    return message


def _replace_word(text, word, replacement):
    """``text`` with ``word`` replaced where it stands as a whole word."""
    out: list[str] = []
    at = 0
    while True:
        found = text.find(word, at)
        if found < 0:
            return "".join(out) + text[at:]
        end = found + len(word)
        whole = (found == 0 or not (text[found - 1].isalnum() or text[found - 1] == "_")) and (
            end == len(text) or not (text[end].isalnum() or text[end] == "_"))
        out += [text[at:found], replacement if whole else word]
        at = end
