"""The Transformer page's sections (C8 and issue 30 §2), each drawn by one call from pages/transformer.py:
`absolute` (where absolute position comes from) and `story` (RoPE against learned positions past training)."""
