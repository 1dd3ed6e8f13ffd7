"""The demo's live users: requests through the serving Service during every step, counted.

A canary is judged on real traffic, and "no request fails because of a switch" is only a
claim until someone sends requests across the switches. The demo therefore keeps a few
users (``live_users.LiveUsers``) sending small completions through the serving Service's
local proxy for the whole story, from the moment a revision serves, and prints per step how
many requests they sent and why any failed: injected by the simulator under live traffic
(step 4's candidate, on purpose) or broken by a traffic switch (never expected).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vllm_operator_demo.live_users import LiveUsers, Sent, services_address

USERS = 2
PAUSE_SECONDS = 0.5
"""Each user's pause between requests: about 4 requests a second in all, enough for a
canary step of 30 s (minRequests 40 per revision, half the traffic each), and little enough
load that the benchmarks of steps 2-3 stay decisive on a loaded 2-core machine (every live
request is proxied by the in-process kubelet the benchmark's requests go through too; at ~70
requests a second step 2's gate ran out of trials there, and at ~8 once step 3's)."""


class ServingAddress:
    """Where the serving Service answers on this machine, once the kubelet publishes it
    (the operator creates the Service when a first revision is Ready: before that the
    users wait, as users of a new service do)."""

    def __init__(self, kubelet_workdir: Path, name: str, namespace: str, port: int) -> None:
        self.where = (kubelet_workdir, namespace, name, port)

    def __call__(self) -> str | None:
        return services_address(*self.where)


def live_users(kubelet_workdir: Path, name: str, namespace: str, model: str) -> LiveUsers:
    """The demo's users of the serving Service of ``name`` (port 8000, the spec's default)."""
    address = ServingAddress(kubelet_workdir, name, namespace, 8000)
    return LiveUsers(address, model=model, users=USERS, pause=PAUSE_SECONDS)


@dataclass(frozen=True)
class StepTraffic:
    """What the live users saw during one step."""

    requests: int
    failed: int
    injected: int
    """... of the failed, those the simulator failed on purpose (a live-only fault)."""

    @property
    def switch_failures(self) -> int:
        """Failed for another reason: the traffic's path broke (a switch, a pod going)."""
        return self.failed - self.injected

    @classmethod
    def of(cls, sent: Sequence[Sent]) -> StepTraffic:
        failed = [s for s in sent if not s.ok]
        return cls(len(sent), len(failed), sum(1 for s in failed if s.injected))

    def line(self, number: int) -> str:
        if not self.requests:
            return f"live users: no requests during step {number} (nothing served yet)"
        text = f"live users: {self.requests} requests during step {number}, {self.failed} failed"
        if self.failed:
            text += (
                f" ({self.injected} injected by the simulator under live traffic, "
                f"{self.switch_failures} by a traffic switch)"
            )
        return text
