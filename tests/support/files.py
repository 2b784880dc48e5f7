"""Files the tests write: Markdown folders and the like."""


def write(directory, name, text, encoding="utf-8"):
    """Write ``text`` (str or bytes) to ``directory/name``, making the folders; returns the path."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path
