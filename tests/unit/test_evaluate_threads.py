"""The single-head evaluation shares its chunks between the caller's torch threads and reports its
progress (lengen_core/analysis/evaluate.py): the answers do not depend on the sharing, the caller's
thread settings are left as they were, and `progress` hears every key, on the calling thread."""

from __future__ import annotations

import threading

import pytest
import torch

from lengen_core.analysis.evaluate import TOKEN_BLOCK, cpu_workers, evaluate, last_query_outputs, sequence_tokens
from lengen_core.config import RunConfig, with_changes
from lengen_core.models.initial import initial_model
from lengen_core.training import Run, train


@pytest.fixture(scope="module")
def run() -> Run:
    return train(with_changes(RunConfig(), steps=40), "cpu")


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _new_thread_count() -> int:
    seen = []
    worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    worker.start()
    worker.join()
    return seen[0]


@pytest.mark.skipif(cpu_workers() == 1 and "OpenMP" not in torch.__config__.parallel_info(), reason="shares need OpenMP")
def test_shared_chunks_give_the_same_answers_and_leave_the_threads_as_they_were(run, threads):
    length = 3 * TOKEN_BLOCK + 100  # spans blocks: the two shares draw their own
    torch.set_num_threads(1)
    alone = last_query_outputs(run.model, run.config, length, 40, seed=4, chunk=1024)
    torch.set_num_threads(2)
    shared = last_query_outputs(run.model, run.config, length, 40, seed=4, chunk=1024)
    assert torch.equal(alone.targets, shared.targets) and torch.equal(alone.argmax_key, shared.argmax_key)
    assert torch.equal(alone.vote, shared.vote)
    torch.testing.assert_close(alone.readout, shared.readout, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(alone.target_mass, shared.target_mass, rtol=1e-5, atol=1e-9)
    assert torch.get_num_threads() == 2 and _new_thread_count() == 2  # the workers' one thread each did not leak


def test_progress_hears_every_key_in_order_on_the_calling_thread(run):
    heard, callers = [], set()

    def progress(done: int, total: int) -> None:
        heard.append((done, total))
        callers.add(threading.get_ident())

    lengths = [300, 2 * TOKEN_BLOCK]
    evaluate(run.model, run.config, lengths, samples=8, progress=progress)
    assert heard and heard[-1] == (sum(lengths), sum(lengths))
    assert all(total == sum(lengths) for _, total in heard)
    assert [done for done, _ in heard] == sorted(done for done, _ in heard)
    assert callers == {threading.get_ident()}


@pytest.mark.parametrize("chunk", [64, 256, 1024])
def test_the_most_attended_key_is_the_first_of_equal_logits_whatever_the_chunks(chunk):
    """Without positions every key of the same token has the same logit, so each sample's most attended key
    is the first position holding its query's best key token: the chunk maxima (`amax`) and the argmax
    taken only where a sample's best grows must keep the first of equal logits, across chunks too."""
    config = with_changes(RunConfig(), encoding="nope", vocab_size=8, d_model=16)
    model, length, samples = initial_model(config).eval(), 3_000, 24
    out = last_query_outputs(model, config, length, samples, seed=6, chunk=chunk)
    with torch.no_grad():
        logits = model.query_table(length - 1) @ (model.embed @ model.W_K).T  # (V, V): query token × key token
    tokens = sequence_tokens(6, length, samples, config.task.vocab_size)  # (S, L)
    for sample in range(samples):
        present = tokens[sample].unique()
        row = logits[tokens[sample, -1], present]
        best = present[row.argmax()]
        assert int((row == row.max()).sum()) == 1  # no tie between tokens: the expectation is one position
        first = int((tokens[sample] == best).nonzero()[0])
        assert int(out.argmax_key[sample]) == first
