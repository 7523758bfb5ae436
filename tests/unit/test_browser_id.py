"""The browser id behind the one-training-per-browser rule (ui/training/pool.py) is the XSRF cookie's token,
not its text: Streamlit masks the same token anew on every page load, so two tabs (or a reload onto another
replica) of one browser send different cookie texts. Checked against Streamlit's own encoder."""

from __future__ import annotations

import os

from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

from ui.training.pool import cookie_token


def test_two_maskings_of_one_token_are_one_browser():
    token = os.urandom(32)
    first, second = generate_xsrf_token_string(token, 1_700_000_000), generate_xsrf_token_string(token, 1_700_000_000)
    assert first != second  # what the browser sends changes from page load to page load
    assert cookie_token(first) == cookie_token(second) == token


def test_another_browser_has_another_token_and_an_unknown_form_is_its_text():
    assert cookie_token(generate_xsrf_token_string(os.urandom(32), 1)) != cookie_token(generate_xsrf_token_string(os.urandom(32), 1))
    assert cookie_token("plain-value") == b"plain-value"
    assert cookie_token("2|zz|notahex|1") == b"2|zz|notahex|1"
