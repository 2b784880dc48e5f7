"""A knowledge base and folders of Markdown files, both ways, as ``store.folders``: the import
of a folder (``kbcite.importer``, which honours later edits), the same sync for documents from
anywhere, the export back to a folder (``kbcite.exporter``), and a file edited after its export
merged back (``kbcite.merging``)."""

from . import exporter, importer, merging


class Folders:
    """A store's imports and exports: ``import_directory``, ``sync_articles``,
    ``export_directory``; and a file edited after its export merged back: ``merge_sides``,
    ``write_merge``, ``mark_imported``."""

    def __init__(self, ctx):
        self._ctx = ctx

    def import_directory(self, kb_id, directory, *, prune=False, force=False, dry_run=False,
                         skip_bad=False, yes=False, progress=None):
        """Sync a folder of Markdown files into a knowledge base; returns the plan it carried
        out, the bad files and those left out (``kbcite.importer.import_directory``)."""
        return importer.import_directory(self._ctx, kb_id, directory, prune=prune, force=force,
                                         dry_run=dry_run, skip_bad=skip_bad, yes=yes,
                                         progress=progress)

    def export_directory(self, kb_id, directory, *, include_drafts=False, edited=False,
                         force=False, yes=False, dry_run=False, progress=None,
                         front_matter=None, to_new_folder=False):
        """Write the articles back to a folder as Markdown (with front matter, or, edited,
        each in the form it was imported in, into the imported folder unless
        ``to_new_folder``); returns what it did to each (``kbcite.exporter.export_directory``)."""
        return exporter.export_directory(self._ctx, kb_id, directory,
                                         include_drafts=include_drafts, edited=edited,
                                         force=force, yes=yes, dry_run=dry_run,
                                         progress=progress, front_matter=front_matter,
                                         to_new_folder=to_new_folder)

    def sync_articles(self, kb_id, documents, *, prune=False, force=False, dry_run=False,
                      yes=False, progress=None):
        """Make the articles imported from ``documents`` match them, honouring later edits
        (``kbcite.importer.sync_articles``)."""
        return importer.sync_articles(self._ctx, kb_id, documents, prune=prune, force=force,
                                      dry_run=dry_run, yes=yes, progress=progress)

    def merge_sides(self, kb_id, article_id, base=None):
        """An article now and at the base a file was made from (``kbcite.merging.sides``)."""
        return merging.sides(self._ctx, kb_id, article_id, base)

    def write_merge(self, kb_id, article_id, *, title, content, expected_version, actor=None,
                    summary=None):
        """A merge's text as an edit, only if the article is still at ``expected_version``;
        returns ``{updated_at, event}``."""
        updated_at, event = merging.write(self._ctx, kb_id, article_id, title=title,
                                          content=content, expected_version=expected_version,
                                          actor=actor, summary=summary)
        return {"updated_at": updated_at, "event": event}

    def mark_imported(self, kb_id, article_id, version):
        """Record that the article's imported file now holds ``version``, if it is current."""
        return merging.mark_imported(self._ctx, kb_id, article_id, version)
