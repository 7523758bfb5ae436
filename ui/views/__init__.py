"""What each page draws, one module per page (`ui.views.<page>`), so that a file in pages/ is its title, its lead
and a storyboard of calls into ui/ (tests/unit/test_thin_pages.py holds every page to that). `preamble` is the
opening the pages that read one run share: the selected run, its summary and the check that the page reads it."""
