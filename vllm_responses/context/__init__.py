"""A response's context: input items to model turns, stored references, truncation and compaction."""
