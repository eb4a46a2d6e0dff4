"""The parity report that chapters 08 and 12-14 share (tinybert.models.parity)."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import tinybert.models.parity as parity
from tinybert.models.parity import parity_report, round_trip_tensors


def test_the_report_prints_each_difference_and_fails_on_the_worst(capsys):
    parity_report({"hidden": torch.tensor(3e-7), "logits": torch.tensor(9e-6)})
    printed = capsys.readouterr().out
    assert "hidden" in printed and "3.0e-07" in printed and "9.0e-06" in printed
    with pytest.raises(AssertionError, match="logits: .* 2.00e-05, expected less than 1e-05"):
        parity_report({"hidden": torch.tensor(0.0), "logits": torch.tensor(2e-5)})
    with pytest.raises(AssertionError, match="loss"):
        parity_report({"loss": torch.tensor(float("nan"))})          # NaN is no parity
    parity_report({"loss": torch.tensor(2e-5)}, tolerance=1e-4)


def test_the_round_trip_notices_a_changed_or_missing_tensor(monkeypatch):
    theirs = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2))
    monkeypatch.setattr(parity, "to_hf", lambda model: copy.deepcopy(theirs))
    assert round_trip_tensors(theirs, object()) == 4
    nudged = copy.deepcopy(theirs)
    with torch.no_grad():
        nudged[1].bias[0] += 1e-7
    monkeypatch.setattr(parity, "to_hf", lambda model: nudged)
    with pytest.raises(AssertionError, match=r"1 tensors changed, e\.g\. \['1\.bias'\]"):
        round_trip_tensors(theirs, object())
    monkeypatch.setattr(parity, "to_hf", lambda model: nn.Sequential(nn.Linear(3, 5)))
    with pytest.raises(AssertionError, match="names differ"):
        round_trip_tensors(theirs, object())
