"""What the local kubelet cannot know about the images pods name: supplied by the product.

The kubelet runs a pod's container as a host process with the container's own command. Two
things about an image are not in the pod spec and differ from product to product:

- the programs the image provides that the host lacks (a ``vllm`` executable, say): the
  product writes stand-ins for them into a directory the kubelet puts first on ``PATH``;
- the environment the image bakes in (its Dockerfile's ``ENV`` lines): a real image's
  ``LD_LIBRARY_PATH`` is what makes some start-up faults happen, so a product that wants to
  reproduce such a fault says which images set what.

``ImageHooks`` is that seam. devcluster itself knows no image: ``NoImageHooks`` (the
default) provides no program and no environment, so a pod runs only what the host has. A
product passes its own implementation to ``Kubelet(images=...)``; vllm-operator's lives in
``vllm_operator_demo.pods``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol


class ImageHooks(Protocol):
    """How images become host processes: stand-in programs and baked-in environment."""

    def install(self, bindir: Path) -> Path | None:
        """Write stand-in programs into ``bindir`` (created by the hook if it writes any).

        Return the directory to put first on every pod's ``PATH``, or ``None`` for none.
        Called once when the kubelet starts.
        """
        ...

    def env(self, image: str) -> Mapping[str, str]:
        """The environment ``image`` sets, under the pod's own ``env`` (which wins)."""
        ...


class NoImageHooks:
    """No stand-in programs and no image environment: pods run what the host provides."""

    def install(self, bindir: Path) -> Path | None:
        return None

    def env(self, image: str) -> Mapping[str, str]:
        return {}
