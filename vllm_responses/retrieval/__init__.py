"""Retrieval's core, below any route: chunking, attribute filters, hybrid ranking and the chunk index (docs/retrieval.md)."""
