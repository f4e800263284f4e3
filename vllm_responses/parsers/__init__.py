"""Tool-call parsers: incremental decoders from model text to text / reasoning / tool-call deltas."""
