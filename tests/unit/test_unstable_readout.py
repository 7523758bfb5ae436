"""No head crashes the prediction (issue 42): a learned-position head trained on past its construction made
`torch.linalg.eigh` fail to converge in the readout noise's covariance, and `evaluate --predict` died with a
traceback. The root now falls back (symmetrised, scaled, a larger jitter), and where nothing decomposes the
measurement says so as the prediction's status. LAPACK's failure is made here by a stand-in eigh that raises
as LAPACK does (torch.linalg.LinAlgError), since the failing covariance depends on the CPU's rounding."""

from __future__ import annotations

import pytest
import torch

from lengen_core.analysis import argmax_count
from lengen_core.analysis.argmax_count import ROOT_JITTERS, UnstableReadout, covariance_root
from lengen_core.measure import measure

REAL_EIGH = torch.linalg.eigh


def _covariance(rows: int = 3, size: int = 6, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(rows, size, size // 2, generator=generator, dtype=torch.float64)
    return a @ a.transpose(1, 2) * torch.tensor([1.0, 1e6, 1e-6], dtype=torch.float64)[:rows, None, None]  # rank-deficient


def _failing(times: int | None):
    """An eigh that raises LAPACK's error on its first `times` calls (None: always)."""
    calls = {"n": 0}

    def eigh(matrix, *args, **kwargs):
        calls["n"] += 1
        if times is None or calls["n"] <= times:
            raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge (stand-in)")
        return REAL_EIGH(matrix, *args, **kwargs)

    return eigh, calls


def _reconstructs(root: torch.Tensor, covariance: torch.Tensor, jitter: float) -> None:
    largest = covariance.diagonal(dim1=1, dim2=2).abs().amax(dim=1)
    expected = covariance + jitter * largest[:, None, None] * torch.eye(covariance.shape[-1], dtype=torch.float64)
    assert torch.allclose(root @ root.transpose(1, 2), expected, rtol=1e-9, atol=1e-9 * float(largest.max()))


def test_the_everyday_root_squares_back_to_the_covariance():
    covariance = _covariance()
    _reconstructs(covariance_root(covariance), covariance, ROOT_JITTERS[0])


@pytest.mark.parametrize("failures, jitter", [(1, ROOT_JITTERS[0]), (2, ROOT_JITTERS[1]), (3, ROOT_JITTERS[2])])
def test_a_root_that_does_not_converge_falls_back_to_a_larger_jitter(monkeypatch, failures, jitter):
    covariance = _covariance()
    eigh, calls = _failing(failures)
    monkeypatch.setattr(torch.linalg, "eigh", eigh)
    root = covariance_root(covariance)
    assert calls["n"] == failures + 1
    _reconstructs(root, covariance, jitter)  # the same covariance, up to the jitter of the attempt that converged


def test_no_root_at_all_is_a_reason_not_a_traceback(monkeypatch):
    monkeypatch.setattr(torch.linalg, "eigh", _failing(None)[0])
    with pytest.raises(UnstableReadout, match="too ill-conditioned"):
        covariance_root(_covariance())
    monkeypatch.undo()
    infinite = _covariance()
    infinite[1, 0, 0] = float("inf")
    with pytest.raises(UnstableReadout, match="beyond floating point"):
        covariance_root(infinite)


def test_a_measurement_whose_prediction_cannot_be_made_says_why_and_keeps_its_measured_numbers(monkeypatch, learned):
    monkeypatch.setattr(argmax_count.torch.linalg, "eigh", _failing(None)[0])
    m = measure(learned, [16, 64], samples=64)
    assert [r.length for r in m.reports] == [16, 64] and all(0 <= r.accuracy <= 1 for r in m.reports)
    assert m.predictions == () and m.predicted_horizon is None
    assert m.prediction_status is not None and not m.prediction_status.trusted
    assert "No prediction from the weights" in m.prediction_status.reason
    assert "ill-conditioned" in m.prediction_status.reason
    assert m.measured_horizon is not None  # what was measured stands
    assert m.fit.fit is None and "give no prediction" in m.fit.reason  # not "the prediction was not asked for"
