"""fit_num_threads: the torch thread count for timing runs on a possibly busy CPU host."""
from __future__ import annotations

import os

import pytest
import torch

from triage.reference_engine.host import threads


@pytest.mark.parametrize("cores,default,load,want", [
    (2, 2, 0.0, 1),     # a 2-core box: one core stays free for the Python thread
    (2, 2, 5.0, 1),     # overloaded: never below one
    (16, 16, 0.2, 15),  # idle big host: all but one core
    (16, 16, 6.4, 10),  # six cores' worth of other work: only the idle ones
    (16, 8, 0.0, 8),    # never more than torch's default
])
def test_threads_fit_the_cores_the_load_and_torch_default(monkeypatch, cores, default, load, want):
    monkeypatch.setattr(threads, "usable_cores", lambda: cores)
    monkeypatch.setattr(torch, "get_num_threads", lambda: default)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    n, why = threads.fit_num_threads()
    assert n == want
    assert f"{n} of {cores} usable cores" in why


def test_unknown_load_counts_as_idle(monkeypatch):
    def no_load():
        raise OSError("no load average here")

    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    monkeypatch.setattr(os, "getloadavg", no_load)
    assert threads.fit_num_threads()[0] == 3
