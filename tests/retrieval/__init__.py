"""The retrieval core's tests: chunking, filters, ranking and the SQLite chunk index."""
