"""The store: responses, conversations, stream events and leases; one module per backend (docs/store.md)."""
