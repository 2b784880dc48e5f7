def _conflict(kb, row, expected_version):
    """The version_conflict for an article whose current row is ``row``."""
    return VersionConflict(
        "article %r in knowledge base %r has changed: the current version is %s, not %s. "
        "Re-read it with read_knowledge_article, re-apply your change to the current content, "
        "and retry with expected_version %s and a new idempotency_key."
        % (row["article_id"], kb["kb_id"], row["updated_at"], expected_version,
           row["updated_at"]),
        knowledge_base_id=kb["kb_id"],
        article_id=row["article_id"],
        expected_version=expected_version,
        current_version=row["updated_at"],
    )
