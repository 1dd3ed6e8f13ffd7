"""`sim --help` says what a first start waits for (the profile's warm-up) and how to skip it,
and its usage line shows MODEL and --port; the numbers are the profiles' own."""

from __future__ import annotations

import subprocess
import sys

from vllm_operator.sim.profiles import load_profiles


def test_help_states_the_warm_up_of_the_profiles_and_the_laptop_knob() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "vllm_operator.commands", "sim", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert shown.startswith("usage: vllm-operator sim MODEL [--port PORT] [vLLM flags ...]")
    flat = " ".join(shown.split())
    warmups = sorted({round(p.warmup_seconds) for p in load_profiles().values()})
    assert (warmups[0], warmups[-1]) == (54, 115), warmups  # the help's two numbers
    assert f"about {warmups[0]} s for an eager launch" in flat
    assert f"and {warmups[-1]} s with torch.compile" in flat
    assert "--sim-warmup-seconds 2" in flat
