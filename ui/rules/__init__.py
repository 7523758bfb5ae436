"""Inference rules in the app: the selector and its link, the cached ruled analyses, their captions, charts and sections."""
