def citation(kb_id, article_id, updated_at):
    return {"knowledge_base_id": kb_id, "article_id": article_id, "updated_at": updated_at}
