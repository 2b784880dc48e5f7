"""The admin command line, ``kb``: ``main`` runs it; its commands live in the modules beside
this one (articles, folders, history, admin), its parser in ``parser``, its words in
``messages`` and ``output``."""

from .main import COMMANDS, main
from .messages import EXIT_BROKEN_PIPE, EXIT_CONFLICT, EXIT_ERROR, EXIT_OK, EXIT_USAGE, PROG
from .parser import build_parser

__all__ = ["main", "build_parser", "COMMANDS", "PROG", "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE",
           "EXIT_CONFLICT", "EXIT_BROKEN_PIPE"]
