def read_markdown_folder(directory, progress=None):
    """Every ``*.md`` file below ``directory`` as SourceDocuments, sorted by path.

    Reads and checks them all before anything is written, so a bad file stops an import
    before it starts. Raises InvalidArgument naming the folder or file and what is wrong.
    """
    if not os.path.isdir(directory):
        raise InvalidArgument("%s is not a folder" % directory, argument="directory",
                              path=str(directory))
    failures = []

    def walk_error(exc):
        failures.append(exc)

    paths = []
    for root, dirs, files in os.walk(directory, onerror=walk_error):
        dirs.sort()
        paths.extend(os.path.join(root, name) for name in sorted(files) if name.endswith(".md"))
    if failures:
        exc = failures[0]
        raise InvalidArgument("cannot read the folder %s: %s" % (exc.filename, exc.strerror),
                              argument="directory", path=str(exc.filename))
    documents = []
    for done, path in enumerate(paths, 1):
        source = os.path.relpath(path, directory).replace(os.sep, "/")
        text = read_utf8_file(path, path, "directory")
        try:
            title, content = parse_markdown(text, os.path.splitext(os.path.basename(path))[0])
            check_new_article(title, content, "title", "content")
        except (ValueError, ToolError) as exc:
            raise InvalidArgument("%s cannot be imported: %s" % (
                path, exc.message if isinstance(exc, ToolError) else exc),
                argument="directory", path=path) from None
        documents.append(SourceDocument(source, title, content))
        if progress is not None:
            progress("read", done, len(paths))
    return documents
