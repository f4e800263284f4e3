"""A response's events as it builds them: the builder (pure), its state, its steps, event constructors, citations."""
