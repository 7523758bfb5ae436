"""Training from the browser: the form and its estimate, the shared pool, the live view with pause and step."""
