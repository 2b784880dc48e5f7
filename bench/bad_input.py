"""The bad-input table: more than a hundred mistakes a person makes with ``kb``, ``kb-server``
and ``kb-sim``, each run as a real process on a store of its own, and judged.

Each case runs on a fresh copy of one small setup (a store with knowledge base ``support``
imported from a docs folder, a draft, a token, a dump; files a person gets wrong: not UTF-8,
a conflict left unresolved, a folder where a file should be). For each the table records the
exit status, whether standard error is one clear line (the program's name, then what is wrong
and what to do; for a usage error argparse's usage lines before it; an import's bad files one
a line below its line), whether there was a traceback, and whether anything was written: the
store's whole content (SQLite's dump of every table) and every file of the case's folder,
compared before and after. A case marked ``as_user`` runs as another user (``nobody``, with
the system's Python, which that user can reach) so that a store it may only read is read-only
even when the benchmark runs as root.

    python bench/bad_input.py                # the whole table, a summary at the end
    python bench/bad_input.py --only merge   # the cases whose name holds "merge"
    python bench/bad_input.py --json out.json
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

from common import ROOT, child_env, load, markdown_table

# A case that has not ended by then is recorded as hung (none should come near it).
CASE_TIMEOUT_S = 60
# Each program's entry point, as pyproject.toml's scripts name it.
PROGRAMS = {"kb": "kbcite.cli", "kb-server": "kbcite.server.cli", "kb-sim": "kbcite.sim.cli"}
# The program run as its installed script is: its own name in argv[0] (and so in argparse's).
LAUNCH = "import sys; from %s import main; sys.argv[0] = %r; sys.exit(main())"
NOBODY = 65534
KB = "support"
BAD_VERSION = "2020-01-01T00:00:00Z"

# (name, program, argv, stdin bytes or None, options). In argv, {db} is the store, {dir} the
# case's folder, {docs} the imported docs, {ver} art-000001's version. Options: "as_user"
# (run as nobody), "exit0" (the mistake is answered with a plan, exit 0, nothing written).
CASES = [
    # The command line as a whole, and the store it names.
    ("no arguments", "kb", [], None, ()),
    ("unknown command", "kb", ["--db", "{db}", "frobnicate"], None, ()),
    ("command typo", "kb", ["--db", "{db}", "lst", KB], None, ()),
    ("no --db and no KB_DB", "kb", ["list", KB], None, ()),
    ("--db missing file", "kb", ["--db", "{dir}/missing.db", "list", KB], None, ()),
    ("--db a folder", "kb", ["--db", "{dir}", "list", KB], None, ()),
    ("--db a Markdown file", "kb", ["--db", "{docs}/refunds.md", "list", KB], None, ()),
    ("--db a binary file", "kb", ["--db", "{dir}/junk.bin", "list", KB], None, ()),
    ("--db sqlite:/// missing", "kb", ["--db", "sqlite:///{dir}/missing.db", "list", KB], None,
     ()),
    ("--db unreachable postgres", "kb",
     ["--db", "postgresql://nobody@127.0.0.1:1/x?connect_timeout=2", "list", KB], None, ()),
    ("--db an empty file", "kb", ["--db", "{dir}/empty.db", "list", KB], None, ()),
    ("flag typo", "kb", ["--db", "{db}", "--jsn", "list", KB], None, ()),
    ("--format xml", "kb", ["--db", "{db}", "list", KB, "--format", "xml"], None, ()),
    ("--fields unknown", "kb", ["--db", "{db}", "list", KB, "--fields", "nope"], None, ()),
    ("--fields empty", "kb", ["--db", "{db}", "list", KB, "--fields", ""], None, ()),
    ("unknown knowledge base", "kb", ["--db", "{db}", "list", "nosuchkb"], None, ()),
    ("knowledge base typo", "kb", ["--db", "{db}", "list", "suport"], None, ()),
    # init
    ("init id with a space", "kb", ["--db", "{db}", "init", "bad id"], None, ()),
    ("init id with a slash", "kb", ["--db", "{db}", "init", "a/b"], None, ()),
    ("init id starting with -", "kb", ["--db", "{db}", "init", "--", "-x"], None, ()),
    ("init non-ASCII id", "kb", ["--db", "{db}", "init", "\u00fcn\u00efc\u00f8d\u00e9"], None,
     ()),
    ("init empty id", "kb", ["--db", "{db}", "init", ""], None, ()),
    ("init 65-character id", "kb", ["--db", "{db}", "init", "k" * 65], None, ()),
    ("init existing", "kb", ["--db", "{db}", "init", KB], None, ()),
    ("init read-only store", "kb", ["--db", "{db}", "init", "other"], None, ("as_user",)),
    ("init in a missing folder", "kb", ["--db", "{dir}/no/such/kb.db", "init", "x"], None, ()),
    # add
    ("add without title or file", "kb", ["--db", "{db}", "add", KB, "--content", "x"], None,
     ()),
    ("add empty title", "kb", ["--db", "{db}", "add", KB, "--title", "", "--content", "x"],
     None, ()),
    ("add title with a tab", "kb", ["--db", "{db}", "add", KB, "--title", "a\tb",
                                    "--content", "x"], None, ()),
    ("add title with a newline", "kb", ["--db", "{db}", "add", KB, "--title", "a\nb",
                                        "--content", "x"], None, ()),
    ("add 201-character title", "kb", ["--db", "{db}", "add", KB, "--title", "t" * 201,
                                       "--content", "x"], None, ()),
    ("add empty content", "kb", ["--db", "{db}", "add", KB, "--title", "T", "--content", ""],
     None, ()),
    ("add missing file", "kb", ["--db", "{db}", "add", KB, "--title", "T", "--file",
                                "{dir}/missing.md"], None, ()),
    ("add non-UTF-8 file", "kb", ["--db", "{db}", "add", KB, "--title", "T", "--file",
                                  "{dir}/latin1.md"], None, ()),
    ("add a folder as file", "kb", ["--db", "{db}", "add", KB, "--title", "T", "--file",
                                    "{docs}"], None, ()),
    ("add non-UTF-8 stdin", "kb", ["--db", "{db}", "add", KB, "--title", "T"],
     b"caf\xe9\n", ()),
    ("add empty stdin", "kb", ["--db", "{db}", "add", KB, "--title", "T"], b"", ()),
    ("add file and content", "kb", ["--db", "{db}", "add", KB, "--title", "T", "--content",
                                    "c", "--file", "f.md"], None, ()),
    ("add file with conflict markers", "kb", ["--db", "{db}", "add", KB, "--file",
                                              "{dir}/conflicted.md"], None, ()),
    ("add file with only a heading", "kb", ["--db", "{db}", "add", KB, "--file",
                                            "{dir}/heading.md"], None, ()),
    ("add file over the size limit", "kb", ["--db", "{db}", "add", KB, "--title", "T",
                                            "--file", "{dir}/big.md"], None, ()),
    ("add to unknown kb", "kb", ["--db", "{db}", "add", "nosuchkb", "--title", "T",
                                 "--content", "x"], None, ()),
    ("add to read-only store", "kb", ["--db", "{db}", "add", KB, "--title", "T",
                                      "--content", "x"], None, ("as_user",)),
    ("add content with NUL", "kb", ["--db", "{db}", "add", KB, "--title", "T"],
     b"a\x00b", ()),
    # save, publish, unpublish, delete
    ("save unknown article", "kb", ["--db", "{db}", "save", KB, "art-999999", "--content",
                                    "x"], None, ()),
    ("save malformed article ID", "kb", ["--db", "{db}", "save", KB, "bogus", "--content",
                                         "x"], None, ()),
    ("save nothing", "kb", ["--db", "{db}", "save", KB, "art-000001"], b"", ()),
    ("save empty title", "kb", ["--db", "{db}", "save", KB, "art-000001", "--title", ""],
     None, ()),
    ("save non-UTF-8 file", "kb", ["--db", "{db}", "save", KB, "art-000001", "--file",
                                   "{dir}/latin1.md"], None, ()),
    ("save overlong summary", "kb", ["--db", "{db}", "save", KB, "art-000001", "--content",
                                     "x", "--summary", "s" * 2000], None, ()),
    ("save empty actor", "kb", ["--db", "{db}", "save", KB, "art-000001", "--content", "x",
                                "--actor", ""], None, ()),
    ("save file with conflict markers", "kb", ["--db", "{db}", "save", KB, "art-000001",
                                               "--file", "{dir}/conflicted.md"], None, ()),
    ("save without the article", "kb", ["--db", "{db}", "save", KB], None, ()),
    ("publish unknown article", "kb", ["--db", "{db}", "publish", KB, "art-999999"], None,
     ()),
    ("unpublish unknown kb", "kb", ["--db", "{db}", "unpublish", "nosuchkb", "art-000001"],
     None, ()),
    ("delete unknown article", "kb", ["--db", "{db}", "delete", KB, "art-999999", "--yes"],
     None, ()),
    ("delete without --yes", "kb", ["--db", "{db}", "delete", KB, "art-000001"], None,
     ("exit0",)),
    # search, read
    ("search empty query", "kb", ["--db", "{db}", "search", KB, ""], None, ()),
    ("search one-character query", "kb", ["--db", "{db}", "search", KB, "a"], None, ()),
    ("search 201-character query", "kb", ["--db", "{db}", "search", KB, "q" * 201], None, ()),
    ("search --limit 0", "kb", ["--db", "{db}", "search", KB, "refund", "--limit", "0"], None,
     ()),
    ("search --limit 1000", "kb", ["--db", "{db}", "search", KB, "refund", "--limit", "1000"],
     None, ()),
    ("search --limit ten", "kb", ["--db", "{db}", "search", KB, "refund", "--limit", "ten"],
     None, ()),
    ("search unknown kb", "kb", ["--db", "{db}", "search", "nosuchkb", "refund"], None, ()),
    ("search lone surrogate", "kb", ["--db", "{db}", "search", KB, "ab\udcff"], None, ()),
    ("read unknown article", "kb", ["--db", "{db}", "read", KB, "art-999999"], None, ()),
    ("read a draft", "kb", ["--db", "{db}", "read", KB, "art-000003"], None, ()),
    ("read path as article", "kb", ["--db", "{db}", "read", KB, "../../etc/passwd"], None, ()),
    # edit
    ("edit without --expected-version", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                               "--content", "x"], None, ()),
    ("edit malformed version", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                      "--expected-version", "yesterday", "--content", "x"],
     None, ()),
    ("edit stale version", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                  "--expected-version", BAD_VERSION, "--content", "x"],
     None, ()),
    ("edit empty content", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                  "--expected-version", "{ver}", "--content", ""], None, ()),
    ("edit empty idempotency key", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                          "--expected-version", "{ver}", "--idempotency-key",
                                          "", "--content", "x"], None, ()),
    ("edit file with conflict markers", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                               "--expected-version", "{ver}", "--file",
                                               "{dir}/conflicted.md"], None, ()),
    ("edit a draft", "kb", ["--db", "{db}", "edit", KB, "art-000003", "--expected-version",
                            "{ver}", "--content", "x"], None, ()),
    ("edit read-only store", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                    "--expected-version", "{ver}", "--content", "x"], None,
     ("as_user",)),
    # history, diff, revert
    ("history unknown article", "kb", ["--db", "{db}", "history", KB, "art-999999"], None,
     ()),
    ("history prune negative days", "kb", ["--db", "{db}", "history", "prune", KB,
                                           "--keep-days", "-1", "--yes"], None, ()),
    ("history prune days not a number", "kb", ["--db", "{db}", "history", "prune", KB,
                                               "--keep-days", "abc"], None, ()),
    ("history with --yes", "kb", ["--db", "{db}", "history", KB, "art-000001", "--yes"], None,
     ()),
    ("history prune unknown kb", "kb", ["--db", "{db}", "history", "prune", "nosuchkb",
                                        "--keep-days", "1", "--yes"], None, ()),
    ("history prune huge days", "kb", ["--db", "{db}", "history", "prune", KB, "--keep-days",
                                       "99999999999", "--yes"], None, ()),
    ("diff malformed --from", "kb", ["--db", "{db}", "diff", KB, "art-000001", "--from",
                                     "nope"], None, ()),
    ("diff unknown --from", "kb", ["--db", "{db}", "diff", KB, "art-000001", "--from",
                                   BAD_VERSION], None, ()),
    ("diff missing file", "kb", ["--db", "{db}", "diff", KB, "art-000001", "--file",
                                 "{dir}/missing.md"], None, ()),
    ("diff non-UTF-8 file", "kb", ["--db", "{db}", "diff", KB, "art-000001", "--file",
                                   "{dir}/latin1.md"], None, ()),
    ("revert to unknown version", "kb", ["--db", "{db}", "revert", KB, "art-000001", "--to",
                                         BAD_VERSION, "--expected-version", "{ver}"], None,
     ()),
    ("revert stale", "kb", ["--db", "{db}", "revert", KB, "art-000001", "--to", "{ver}",
                            "--expected-version", BAD_VERSION], None, ()),
    ("revert malformed --to", "kb", ["--db", "{db}", "revert", KB, "art-000001", "--to",
                                     "bad", "--expected-version", "{ver}"], None, ()),
    # merge
    ("merge without --file", "kb", ["--db", "{db}", "merge", KB, "art-000001"], None, ()),
    ("merge missing file", "kb", ["--db", "{db}", "merge", KB, "art-000001", "--file",
                                  "{dir}/missing.md"], None, ()),
    ("merge an article no import made", "kb", ["--db", "{db}", "merge", KB, "art-000003",
                                               "--file", "{docs}/refunds.md"], None, ()),
    ("merge file with conflict markers", "kb", ["--db", "{db}", "merge", KB, "art-000001",
                                                "--file", "{dir}/conflicted.md"], None, ()),
    ("merge malformed --base", "kb", ["--db", "{db}", "merge", KB, "art-000001", "--file",
                                      "{docs}/refunds.md", "--base", "nope"], None, ()),
    ("merge unknown --base", "kb", ["--db", "{db}", "merge", KB, "art-000001", "--file",
                                    "{docs}/refunds.md", "--base", BAD_VERSION], None, ()),
    ("merge --abort with nothing to abort", "kb", ["--db", "{db}", "merge", KB, "art-000001",
                                                   "--file", "{docs}/refunds.md", "--abort"],
     None, ()),
    ("merge --output over a file", "kb", ["--db", "{db}", "merge", KB, "art-000001", "--file",
                                          "{docs}/refunds.md", "--output",
                                          "{docs}/shipping.md"], None, ()),
    ("merge stale --expected-version", "kb", ["--db", "{db}", "merge", KB, "art-000001",
                                              "--file", "{docs}/refunds.md",
                                              "--expected-version", BAD_VERSION], None, ()),
    ("merge non-UTF-8 file", "kb", ["--db", "{db}", "merge", KB, "art-000001", "--file",
                                    "{dir}/latin1.md"], None, ()),
    ("merge a folder as file", "kb", ["--db", "{db}", "merge", KB, "art-000001", "--file",
                                      "{docs}"], None, ()),
    # events
    ("events --after -1", "kb", ["--db", "{db}", "events", KB, "--after", "-1"], None, ()),
    ("events --after abc", "kb", ["--db", "{db}", "events", KB, "--after", "abc"], None, ()),
    ("events --after huge", "kb", ["--db", "{db}", "events", KB, "--after",
                                   "99999999999999999999999"], None, ()),
    ("events unknown kb", "kb", ["--db", "{db}", "events", "nosuchkb"], None, ()),
    # import
    ("import missing folder", "kb", ["--db", "{db}", "import", KB, "{dir}/nofolder"], None,
     ()),
    ("import a file as folder", "kb", ["--db", "{db}", "import", KB, "{docs}/refunds.md"],
     None, ()),
    ("import into unknown kb", "kb", ["--db", "{db}", "import", "nosuchkb", "{docs}"], None,
     ()),
    ("import folder with a non-UTF-8 file", "kb", ["--db", "{db}", "import", KB,
                                                   "{dir}/badfolder"], None, ()),
    ("import folder with an empty file", "kb", ["--db", "{db}", "import", KB,
                                                "{dir}/emptyfolder"], None, ()),
    ("import prune from another folder", "kb", ["--db", "{db}", "import", KB, "{dir}/other",
                                                "--prune"], None, ()),
    ("import bad .kbignore", "kb", ["--db", "{db}", "import", KB, "{dir}/badignore"], None,
     ()),
    ("import file with conflict markers", "kb", ["--db", "{db}", "import", KB,
                                                 "{dir}/conflictfolder"], None, ()),
    ("import into read-only store", "kb", ["--db", "{db}", "import", KB, "{dir}/other"],
     None, ("as_user",)),
    # export
    ("export to a file", "kb", ["--db", "{db}", "export", KB, "{docs}/refunds.md"], None, ()),
    ("export to /dev/full", "kb", ["--db", "{db}", "export", KB, "/dev/full"], None, ()),
    ("export under /proc", "kb", ["--db", "{db}", "export", KB, "/proc/kb-export"], None, ()),
    ("export to a folder of mode 555", "kb", ["--db", "{db}", "export", KB, "{dir}/ro"], None,
     ("as_user",)),
    ("export unknown kb", "kb", ["--db", "{db}", "export", "nosuchkb", "{dir}/out"], None, ()),
    ("export over files of other text", "kb", ["--db", "{db}", "export", KB, "{docs}"], None,
     ()),
    ("export to an empty folder name", "kb", ["--db", "{db}", "export", KB, ""], None, ()),
    ("import an empty folder name", "kb", ["--db", "{db}", "import", KB, ""], None, ()),
    ("dump to an empty name", "kb", ["--db", "{db}", "dump", KB, ""], None, ()),
    ("merge --output an empty name", "kb", ["--db", "{db}", "merge", KB, "art-000001",
                                            "--file", "{docs}/refunds.md", "--output", ""],
     None, ()),
    ("merge --output a folder", "kb", ["--db", "{db}", "merge", KB, "art-000001", "--file",
                                       "{docs}/refunds.md", "--output", "{docs}"], None, ()),
    ("--db an empty name", "kb", ["--db", "", "list", KB], None, ()),
    ("edit --file an empty name", "kb", ["--db", "{db}", "edit", KB, "art-000001",
                                         "--expected-version", "{ver}", "--file", ""], None, ()),
    # dump, restore, reindex, audit, upgrade
    ("dump unknown kb", "kb", ["--db", "{db}", "dump", "nosuchkb", "{dir}/x.json"], None, ()),
    ("dump over an existing file", "kb", ["--db", "{db}", "dump", KB, "{docs}/refunds.md"],
     None, ()),
    ("dump under a file", "kb", ["--db", "{db}", "dump", KB, "{docs}/refunds.md/x.json"],
     None, ()),
    ("dump to /dev/full", "kb", ["--db", "{db}", "dump", KB, "/dev/full"], None, ()),
    # --yes over a device, through a link of the case's own: written to, never replaced (so
    # that a mistake here could only replace the case's link, never /dev/full itself).
    ("dump --yes to a full device", "kb", ["--db", "{db}", "dump", KB, "{dir}/full", "--yes"],
     None, ()),
    ("restore missing file", "kb", ["--db", "{db}", "restore", "{dir}/missing.json"], None,
     ()),
    ("restore not a dump", "kb", ["--db", "{db}", "restore", "{docs}/refunds.md"], None, ()),
    ("restore over an existing kb", "kb", ["--db", "{db}", "restore", "{dir}/dump.json"],
     None, ()),
    ("restore --as a bad id", "kb", ["--db", "{db}", "restore", "{dir}/dump.json", "--as",
                                     "bad id"], None, ()),
    ("restore truncated dump", "kb", ["--db", "{db}", "restore", "{dir}/truncated.json",
                                      "--as", "copy"], None, ()),
    ("restore non-UTF-8 stdin", "kb", ["--db", "{db}", "restore", "-"], b"\xff\xfe{", ()),
    ("reindex unknown kb", "kb", ["--db", "{db}", "reindex", "nosuchkb"], None, ()),
    ("audit with an argument", "kb", ["--db", "{db}", "audit", KB], None, ()),
    ("upgrade missing store", "kb", ["--db", "{dir}/missing.db", "upgrade"], None, ()),
    ("upgrade not a store", "kb", ["--db", "{docs}/refunds.md", "upgrade"], None, ()),
    # tokens and grants
    ("token without action", "kb", ["--db", "{db}", "token"], None, ()),
    ("token create without name", "kb", ["--db", "{db}", "token", "create", "--grant", KB],
     None, ()),
    ("token create existing name", "kb", ["--db", "{db}", "token", "create", "bot", "--grant",
                                          KB], None, ()),
    ("token create unknown kb", "kb", ["--db", "{db}", "token", "create", "x", "--grant",
                                       "nosuchkb"], None, ()),
    ("token create bad writes", "kb", ["--db", "{db}", "token", "create", "x", "--grant", KB,
                                       "--writes", "sometimes"], None, ()),
    ("token create empty name", "kb", ["--db", "{db}", "token", "create", "", "--grant", KB],
     None, ()),
    ("token revoke unknown", "kb", ["--db", "{db}", "token", "revoke", "nobody"], None, ()),
    ("token link unknown", "kb", ["--db", "{db}", "token", "link", "nobody"], None, ()),
    ("token link bad url", "kb", ["--db", "{db}", "token", "link", "bot", "--url", "notaurl"],
     None, ()),
    ("token action typo", "kb", ["--db", "{db}", "token", "crate", "x"], None, ()),
    ("grant add unknown kb", "kb", ["--db", "{db}", "grant", "add", "--subject", "a@b.c",
                                    "--kb", "nosuchkb"], None, ()),
    ("grant add without subject", "kb", ["--db", "{db}", "grant", "add", "--kb", KB], None,
     ()),
    ("grant remove unknown", "kb", ["--db", "{db}", "grant", "remove", "--subject", "nobody",
                                    "--kb", KB], None, ()),
    ("grant add empty subject", "kb", ["--db", "{db}", "grant", "add", "--subject", "",
                                       "--kb", KB], None, ()),
    # review
    ("review list unknown kb", "kb", ["--db", "{db}", "review", "list", "nosuchkb"], None, ()),
    ("review show unknown", "kb", ["--db", "{db}", "review", "show", KB, "999"], None, ()),
    ("review approve unknown", "kb", ["--db", "{db}", "review", "approve", KB, "999"], None,
     ()),
    ("review reject without reason", "kb", ["--db", "{db}", "review", "reject", KB, "1"],
     None, ()),
    ("review show non-number", "kb", ["--db", "{db}", "review", "show", KB, "abc"], None, ()),
    ("review list negative expiry", "kb", ["--db", "{db}", "review", "list", KB,
                                           "--expire-days", "-1"], None, ()),
    ("review reject empty reason", "kb", ["--db", "{db}", "review", "reject", KB, "1",
                                          "--reason", ""], None, ()),
    ("completion for tcsh", "kb", ["completion", "tcsh"], None, ()),
    # kb-server
    ("server without --db", "kb-server", [], None, ()),
    ("server missing store", "kb-server", ["--db", "{dir}/missing.db", "--grant", KB], None,
     ()),
    ("server grant typo", "kb-server", ["--db", "{db}", "--grant", "suport"], None, ()),
    ("server bad writes", "kb-server", ["--db", "{db}", "--grant", KB, "--writes",
                                        "sometimes"], None, ()),
    ("server --http without port", "kb-server", ["--db", "{db}", "--http", "nohost"], None,
     ()),
    ("server --http port out of range", "kb-server", ["--db", "{db}", "--http",
                                                      "127.0.0.1:99999"], None, ()),
    ("server --workers 0", "kb-server", ["--db", "{db}", "--http", "127.0.0.1:0", "--workers",
                                         "0"], None, ()),
    ("server --allow-origin not an origin", "kb-server", ["--db", "{db}", "--http",
                                                          "127.0.0.1:0", "--allow-origin",
                                                          "notanorigin"], None, ()),
    ("server --max-body negative", "kb-server", ["--db", "{db}", "--http", "127.0.0.1:0",
                                                 "--max-body", "-1"], None, ()),
    ("server missing certificate", "kb-server", ["--db", "{db}", "--http", "127.0.0.1:0",
                                                 "--ssl-certfile", "{dir}/missing.pem",
                                                 "--ssl-keyfile", "{dir}/missing.key"],
     None, ()),
    ("server http issuer", "kb-server", ["--db", "{db}", "--http", "127.0.0.1:0",
                                         "--oauth-issuer", "http://issuer.example"], None, ()),
    ("server --public-url not a URL", "kb-server", ["--db", "{db}", "--http", "127.0.0.1:0",
                                                    "--public-url", "notaurl"], None, ()),
    ("server --db a Markdown file", "kb-server", ["--db", "{docs}/refunds.md", "--grant", KB],
     None, ()),
    ("server --db a folder", "kb-server", ["--db", "{dir}", "--grant", KB], None, ()),
    ("server --db an empty name", "kb-server", ["--db", "", "--grant", KB], None, ()),
    ("server --threads 0", "kb-server", ["--db", "{db}", "--grant", KB, "--threads", "0"],
     None, ()),
    ("server flag typo", "kb-server", ["--db", "{db}", "--grnat", KB], None, ()),
    ("server stdio without --grant", "kb-server", ["--db", "{db}"], None, ()),
    ("server signing secret missing", "kb-server", ["--db", "{db}", "--http", "127.0.0.1:0",
                                                    "--signing-secret-file",
                                                    "{dir}/missing.key"], None, ()),
    # kb-sim
    ("sim --seeds range too long", "kb-sim", ["--seeds", "1-20000"], None, ()),
    ("sim --seeds abc", "kb-sim", ["--seeds", "abc"], None, ()),
    ("sim --seeds 5-1", "kb-sim", ["--seeds", "5-1"], None, ()),
    ("sim --articles 0", "kb-sim", ["--articles", "0"], None, ()),
    ("sim --articles huge", "kb-sim", ["--articles", "99999999999"], None, ()),
    ("sim --zipf negative", "kb-sim", ["--zipf", "-1"], None, ()),
    ("sim --delays bad", "kb-sim", ["--delays", "nope"], None, ()),
    ("sim --hours 0", "kb-sim", ["--hours", "0"], None, ()),
    ("sim --questions-from bogus", "kb-sim", ["--questions-from", "bogus"], None, ()),
    ("sim --processes 0", "kb-sim", ["--processes", "0"], None, ()),
    ("sim --json into a missing folder", "kb-sim", ["--seeds", "1", "--articles", "50",
                                                    "--questions", "50", "--json",
                                                    "{dir}/no/such/out.json"], None, ()),
    ("sim --plots under a file", "kb-sim", ["--seeds", "1", "--articles", "50", "--questions",
                                            "50", "--plots", "{docs}/refunds.md/plots"],
     None, ()),
    ("sim --db unreachable postgres", "kb-sim",
     ["--seeds", "1", "--db", "postgresql://nobody@127.0.0.1:1/x?connect_timeout=2"], None,
     ()),
    ("sim --json an empty name", "kb-sim", ["--seeds", "1", "--json", ""], None, ()),
    ("sim --plots an empty name", "kb-sim", ["--seeds", "1", "--plots", ""], None, ()),
    ("sim --db-dir a file", "kb-sim", ["--seeds", "1", "--articles", "50", "--questions",
                                       "50", "--db-dir", "{docs}/refunds.md"], None, ()),
]


def run(program, argv, cwd, stdin=None, as_user=False):
    """``(status, stdout, stderr)`` of one program run (status None when it hung)."""
    python = "/usr/bin/python3" if as_user else sys.executable
    command = [python, "-c", LAUNCH % (PROGRAMS[program], program)] + argv
    env = {key: value for key, value in child_env().items() if key != "KB_DB"}
    if as_user:
        command = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                   "--clear-groups"] + command
    try:
        done = subprocess.run(command, cwd=cwd, env=env, input=stdin or b"",
                              capture_output=True, timeout=CASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))


def setup(folder):
    """The setup every case copies: the store, its docs, and the files people get wrong."""
    docs = os.path.join(folder, "docs")
    os.makedirs(docs)
    for name, text in (("refunds.md", "# Refund policy\n\nRefunds take five working days.\n"),
                       ("shipping.md", "# Shipping\n\nWe ship within two days.\n")):
        with open(os.path.join(docs, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    db = os.path.join(folder, "kb.db")
    for argv in (["init", KB], ["import", KB, docs],
                 ["add", KB, "--title", "Draft", "--content", "Not yet.", "--draft"],
                 ["token", "create", "bot", "--grant", KB],
                 ["dump", KB, os.path.join(folder, "dump.json")]):
        status, _, err = run("kb", ["--db", db] + argv, folder)
        assert status == 0, (argv, err)
    files = {
        "latin1.md": "# Caf\xe9\n\nCaf\xe9 au lait.\n".encode("latin-1"),
        "conflicted.md": b"# Refund policy\n\n<<<<<<< store V\nA.\n=======\nB.\n>>>>>>> file F\n",
        "heading.md": b"# Only a title\n",
        "big.md": b"x" * (2 * 1024 * 1024),
        "junk.bin": bytes(range(256)) * 64,
        "empty.db": b"",
        "badfolder/ok.md": b"# Fine\n\nFine.\n",
        "badfolder/latin1.md": "Caf\xe9\n".encode("latin-1"),
        "emptyfolder/empty.md": b"",
        "other/one.md": b"# One\n\nOnly this.\n",
        "badignore/.kbignore": b"[z-a]\n",
        "badignore/page.md": b"# Page\n\nText.\n",
        "conflictfolder/page.md": b"# Page\n\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n",
        "truncated.json": open(os.path.join(folder, "dump.json"), "rb").read()[:200],
    }
    for name, data in files.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
    os.symlink("/dev/full", os.path.join(folder, "full"))
    os.makedirs(os.path.join(folder, "ro"))
    os.chmod(os.path.join(folder, "ro"), 0o555)
    with sqlite3.connect(db) as conn:
        version = conn.execute("SELECT updated_at FROM articles WHERE article_id = ?",
                               ("art-000001",)).fetchone()[0]
    conn.close()
    return version


def snapshot(folder):
    """What a case could have written: the store's content, and every other file's bytes."""
    db = os.path.join(folder, "kb.db")
    conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    digest = hashlib.sha256()
    try:
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                              "ORDER BY name").fetchall()
        for name, sql in tables:
            digest.update(repr((name, sql)).encode("utf-8"))
            if sql.upper().startswith("CREATE VIRTUAL"):
                continue  # its rows live in its shadow tables, which are read here
            for row in conn.execute('SELECT * FROM "%s" ORDER BY 1' % name):
                digest.update(repr(row).encode("utf-8"))
        store = digest.hexdigest()
    finally:
        conn.close()
    files = {}
    for base, dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            if name.startswith("kb.db"):
                continue
            if os.path.islink(path):  # the link itself (reading /dev/full would never end)
                files[os.path.relpath(path, folder)] = "-> " + os.readlink(path)
                continue
            with open(path, "rb") as fh:
                files[os.path.relpath(path, folder)] = hashlib.sha256(fh.read()).hexdigest()
        dirs.sort()
    return store, files


def judge(program, status, err):
    """``(clear, traceback, lines)``: whether standard error says what is wrong clearly."""
    traceback = "Traceback (most recent call last)" in err
    lines = [line for line in err.splitlines() if line.strip()]
    # argparse's usage lines come before its one line of error; they are not the message.
    while lines and (lines[0].startswith("usage: ") or lines[0].startswith(" ")):
        lines.pop(0)
    first = lines[0] if lines else ""
    # "kb: error: ...", or argparse's "kb list: error: ..." for a subcommand.
    named = re.match(r"%s(?: [a-z-]+)*: " % re.escape(program), first) is not None
    # An import's bad files are listed one a line below its line: still one message.
    listed = all(line.startswith("  ") for line in lines[1:])
    clear = bool(status) and not traceback and named and (len(lines) == 1 or listed)
    return clear, traceback, len(lines)


def run_case(template, case, version, scratch):
    """Run one case on a fresh copy of the setup; returns its row of the table."""
    name, program, argv, stdin, options = case
    folder = os.path.join(scratch, "case")
    if os.path.exists(folder):
        subprocess.run(["chmod", "-R", "u+w", folder], check=False)
        shutil.rmtree(folder)
    shutil.copytree(template, folder, symlinks=True)
    os.chmod(folder, 0o755)
    values = {"db": os.path.join(folder, "kb.db"), "dir": folder,
              "docs": os.path.join(folder, "docs"), "ver": version}
    args = [arg.format(**values) for arg in argv]
    before = snapshot(folder)
    started = time.monotonic()
    status, _, err = run(program, args, folder, stdin, "as_user" in options)
    seconds = time.monotonic() - started
    unchanged = snapshot(folder) == before
    clear, traceback, lines = judge(program, status, err)
    if "exit0" in options:
        clear = status == 0 and not traceback
    message = next((line for line in err.splitlines() if line.strip()
                    and not line.startswith(("usage: ", " "))), "")
    return {"case": name, "program": program, "status": status, "clear": clear,
            "traceback": traceback, "lines": lines, "unchanged": unchanged,
            "seconds": round(seconds, 2), "as_user": "as_user" in options,
            "message": message[:200]}


def main(argv=None):
    """Run the table (or the cases ``--only`` names) and print it with its summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", metavar="TEXT", help="only the cases whose name holds TEXT")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--quiet", action="store_true", help="print the summary only")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or args.only in c[0]]
    load_before = load()
    scratch = tempfile.mkdtemp(prefix="kb-bad-input-")
    os.chmod(scratch, 0o755)
    try:
        template = os.path.join(scratch, "template")
        os.makedirs(template)
        version = setup(template)
        rows = [run_case(template, case, version, scratch) for case in cases]
    finally:
        subprocess.run(["chmod", "-R", "u+w", scratch], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {
        "cases": len(rows), "clear": sum(r["clear"] for r in rows),
        "tracebacks": sum(r["traceback"] for r in rows),
        "wrote_something": sum(not r["unchanged"] for r in rows),
        "hung": sum(r["status"] is None for r in rows),
        "exit_0": sum(r["status"] == 0 for r in rows),
        "load_before": load_before, "load_after": load(),
    }
    if not args.quiet:
        print(markdown_table(
            ["case", "program", "exit", "clear", "traceback", "unchanged", "message"],
            [[r["case"], r["program"], r["status"], "yes" if r["clear"] else "NO",
              "YES" if r["traceback"] else "no", "yes" if r["unchanged"] else "NO",
              r["message"].replace("|", "\\|")[:110]] for r in rows]))
        print()
    print("%(cases)d cases: %(clear)d one clear message, %(tracebacks)d tracebacks, "
          "%(wrote_something)d wrote something, %(hung)d hung, %(exit_0)d exit 0 "
          "(load average %(load_before)s before, %(load_after)s after)" % summary)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"summary": summary, "rows": rows}, fh, indent=2)
    return 0 if summary["clear"] == summary["cases"] and not summary["wrote_something"] \
        else 1


if __name__ == "__main__":
    sys.exit(main())
