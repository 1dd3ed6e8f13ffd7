"""A vLLM newer than every recorded flag table: checked against the nearest older one, said
in a FlagsChecked condition and a FlagsCheckedAgainstOlderRelease Event (issue 12)."""

from __future__ import annotations

from rollout_world import World, spec

from vllm_operator.engine import flagdata


def _newer_than_data() -> str:
    newest = flagdata.newest()
    return f"vllm/vllm-openai:v{newest.major}.{newest.minor + 1}.0"


def test_newer_release_gets_condition_and_event() -> None:
    w = World(spec(image=_newer_than_data()))
    p = w.step()
    events = [e for e in p.events if e.reason == "FlagsCheckedAgainstOlderRelease"]
    assert len(events) == 1
    assert f"checked against the parser of vLLM {flagdata.newest()}" in events[0].message
    (cond,) = [c for c in w.status["conditions"] if c["type"] == "FlagsChecked"]
    assert (cond["status"], cond["reason"]) == ("False", "NearestOlderRelease")
    assert str(flagdata.newest()) in cond["message"]


def test_recorded_release_has_no_flags_condition() -> None:
    w = World(spec(image=f"vllm/vllm-openai:v{flagdata.newest()}"))
    p = w.step()
    assert not any(e.reason == "FlagsCheckedAgainstOlderRelease" for e in p.events)
    assert not any(c["type"] == "FlagsChecked" for c in w.status["conditions"])
