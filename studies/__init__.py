"""One-off studies behind the docs (the horizon recipe, near-recurrences, the optimisation experiment): run by hand, never imported by the product."""
