"""Wire models of the Responses API requests we accept."""
