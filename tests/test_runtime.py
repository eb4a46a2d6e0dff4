import pytest
import torch

from tinybert.runtime import get_device, is_quick, pick, seed_everything


def test_quick_mode_follows_the_environment(monkeypatch):
    monkeypatch.setenv("TINYBERT_QUICK", "1")
    assert is_quick() and pick(quick=3, full=300) == 3
    monkeypatch.setenv("TINYBERT_QUICK", "0")
    assert not is_quick() and pick(quick=3, full=300) == 300
    monkeypatch.delenv("TINYBERT_QUICK")
    assert not is_quick()


def test_quick_mode_rejects_a_typo(monkeypatch):
    monkeypatch.setenv("TINYBERT_QUICK", "quik")
    with pytest.raises(ValueError, match="TINYBERT_QUICK"):
        is_quick()


def test_device_can_be_forced_and_defaults_to_what_exists(monkeypatch):
    monkeypatch.delenv("TINYBERT_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else (
        "mps" if torch.backends.mps.is_available() else "cpu")
    assert get_device().type == expected
    monkeypatch.setenv("TINYBERT_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    assert get_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_a_missing_device_is_an_error():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        get_device("cuda")


def test_seeding_makes_runs_repeat():
    g1 = seed_everything(7)
    a = (torch.randn(5), torch.randn(3, generator=g1))
    g2 = seed_everything(7)
    b = (torch.randn(5), torch.randn(3, generator=g2))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    seed_everything(8)
    assert not torch.equal(torch.randn(5), a[0])
    with pytest.raises(ValueError, match="non-negative int"):
        seed_everything(-1)
    with pytest.raises(ValueError, match="below 2\\*\\*64"):
        seed_everything(2**64)              # torch's limit: not an OverflowError
    seed_everything(2**64 - 1)



def test_fix_malloc_threshold_applies_on_glibc_only(monkeypatch):
    """The pretraining leak it prevents (~25 MB a step, measured) needs minutes to show, so
    this checks the switch itself: glibc accepts the setting, other platforms are left alone."""
    import platform
    import sys

    from tinybert.runtime import fix_malloc_threshold

    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert fix_malloc_threshold() is True
    monkeypatch.setattr(sys, "platform", "darwin")
    assert fix_malloc_threshold() is False


def test_pick_takes_the_gpu_budget_only_in_normal_mode_on_cuda(monkeypatch):
    monkeypatch.delenv("TINYBERT_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("TINYBERT_QUICK", "0")
    assert pick(quick=1, full=2, gpu=3) == 3
    assert pick(quick=1, full=2) == 2  # no GPU budget given: the CPU one
    monkeypatch.setenv("TINYBERT_DEVICE", "cpu")  # the CPU, asked for on a GPU machine
    assert pick(quick=1, full=2, gpu=3) == 2
    monkeypatch.delenv("TINYBERT_DEVICE")
    monkeypatch.setenv("TINYBERT_QUICK", "1")
    assert pick(quick=1, full=2, gpu=3) == 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TINYBERT_QUICK", "0")
    assert pick(quick=1, full=2, gpu=3) == 2
