def fingerprint(kb_id, article_id, content, title, expected_us):
    """SHA-256 of the request as the store understands it, so a respelled version still matches."""
    canonical = json.dumps(
        [kb_id, article_id, content, title, expected_us], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
