def _gap(kb, missing, head):
    """The store_damaged error for an event log missing sequence ``missing`` below ``head``."""
    return StoreDamaged(
        "the event log of knowledge base %r is damaged: event %d is missing (the head is %d), "
        "so a poll cannot go on from here. A retry will not help; the store's operator must "
        "run the audit and restore from a backup. Re-read cited articles by ID meanwhile."
        % (kb["kb_id"], missing, head),
        knowledge_base_id=kb["kb_id"], missing_sequence=missing, head_sequence=head,
        retryable=False)
