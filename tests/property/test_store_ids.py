"""No run id, whatever its text, names a path outside the store's runs directory."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lengen.store import RunStore, StoreError

ids = st.one_of(
    st.text(),
    st.text(alphabet="ab./\\-_~:\x00 \n", max_size=12),  # path-like fragments, densely
    st.from_regex(r"[a-z0-9][a-z0-9._-]{0,127}", fullmatch=True),  # mostly valid ids
)


@pytest.fixture(scope="module")
def store() -> Iterator[RunStore]:
    # Module-scoped (hypothesis reuses it across examples); nothing is written, so it stays empty.
    with tempfile.TemporaryDirectory() as root:
        yield RunStore(Path(root))


@given(run_id=ids)
def test_an_id_is_rejected_or_stays_strictly_inside_the_runs_dir(store, run_id):
    try:
        path = store.run_dir(run_id)
    except StoreError:
        return
    assert path.name == run_id
    assert path.resolve().parent == store.runs_dir.resolve()


@given(run_id=ids)
def test_loading_any_id_from_an_empty_store_fails_only_with_store_error(store, run_id):
    with pytest.raises(StoreError):
        store.load(run_id)
    assert not store.runs_dir.exists()
