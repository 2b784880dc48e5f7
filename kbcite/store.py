log = logging.getLogger("kb_store")
