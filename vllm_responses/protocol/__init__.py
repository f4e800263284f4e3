"""Wire shapes: the request models we accept and the typed shapes of what we send back."""
