"""Build the ``Traffic`` of ``gate.workload``: synthetic token counts, or a dataset.

The gate sends the same requests to the candidate and to the baseline, so request ``i`` is a
pure function of (workload, seed, ``i``), never of the order servers ask in. A workload is
built and checked whole before the run (``build_traffic``): a dataset's malformed line
is a ``DatasetError`` before any load is sent.

Synthetic requests (``gate.workload.synthetic``): input and output token counts are drawn
per request from their distribution (``fixed``: the mean; ``normal``: mean and standard
deviation; ``lognormal``: the counts themselves have that mean and standard deviation, so
the underlying normal has sigma^2 = ln(1 + (sd/mean)^2) and mu = ln(mean) - sigma^2/2),
rounded and clamped to [min, max] (clamping moves the mean when the bounds cut the
distribution; the report's ``describe()`` gives the asked figures). Prompts follow the
study's token rule (``bench.prompts``: a word is a token, the message's role marker one
more), so the simulator counts them exactly and a real tokenizer comes close; at least 2
tokens (the marker and one word). Every prompt is different from its first unique token:
``#i`` (the request's number) follows the shared prefix, then seeded words. The shared
prefix is ``sharedPrefixPercent`` of the mean input count, one text common to all requests
(shortened for a prompt too short to hold it), as a system prompt would be. Outputs are exact
(``max_tokens`` with ``ignore_eos``).
"""

from __future__ import annotations

import math
import random
from typing import Any

from vllm_operator.api.workload import SyntheticWorkload, TokenCounts, WorkloadSpec
from vllm_operator.bench.dataset import DatasetFile, DatasetTraffic, parse_dataset
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.load.traffic import Traffic
from vllm_operator.bench.prompts import words
from vllm_operator.errors import SpecError

MIN_PROMPT_TOKENS = 2
"""The role marker plus the request's own number: the shortest prompt that is unique."""


def lognormal_params(mean: float, sd: float) -> tuple[float, float]:
    """(mu, sigma) of the normal whose exponential has ``mean`` and standard deviation ``sd``."""
    sigma2 = math.log1p((sd / mean) ** 2)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def draw(counts: TokenCounts, rng: random.Random) -> int:
    """One token count from ``counts``' distribution, rounded and clamped to [min, max]."""
    if counts.distribution == "fixed" or counts.spread == 0:
        value = float(counts.mean)
    elif counts.distribution == "normal":
        value = rng.gauss(counts.mean, counts.spread)
    else:
        mu, sigma = lognormal_params(counts.mean, counts.spread)
        value = rng.lognormvariate(mu, sigma)
    return max(counts.min, min(counts.max, round(value)))


class SyntheticTraffic:
    """Requests drawn from token-count distributions (see the module's docstring)."""

    def __init__(self, spec: SyntheticWorkload, seed: int) -> None:
        self.spec = spec
        self.seed = seed
        self.prefix_tokens = round(spec.shared_prefix_percent / 100 * spec.input_tokens.mean)
        self._prefix = words(self.prefix_tokens, f"synthetic-prefix/{seed}").split()

    def sizes(self, index: int) -> tuple[int, int]:
        """(prompt tokens, output tokens) of request ``index``."""
        rng = random.Random(f"synthetic/{self.seed}/{index}")
        prompt = max(MIN_PROMPT_TOKENS, draw(self.spec.input_tokens, rng))
        return prompt, draw(self.spec.output_tokens, rng)

    def request(self, index: int) -> ChatRequest:
        if index < 0:
            raise ValueError("request index must be >= 0")
        prompt_tokens, output_tokens = self.sizes(index)
        content = prompt_tokens - 1  # the role marker is one token
        shared = min(self.prefix_tokens, content - 1)
        rest = content - 1 - shared
        unique = words(rest, f"synthetic/{self.seed}/{index}") if rest else ""
        text = " ".join([*self._prefix[:shared], f"#{index}", *([unique] if unique else [])])
        return ChatRequest(prompt=text, max_tokens=output_tokens)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "synthetic",
            "seed": self.seed,
            "input_tokens": self.spec.input_tokens.to_wire(),
            "output_tokens": self.spec.output_tokens.to_wire(),
            "shared_prefix_percent": self.spec.shared_prefix_percent,
            "shared_prefix_tokens": self.prefix_tokens,
            "token_rule": "a word is a token, plus one for the message's role marker",
        }


def build_traffic(
    workload: WorkloadSpec,
    dataset_text: str | DatasetFile | None = None,
    *,
    source: str = "--dataset",
) -> Traffic | None:
    """The ``Traffic`` of ``workload`` (None for the study's classes), checked whole.

    ``dataset_text`` is the dataset file (``read_dataset_file``: streamed) or its text
    (required for a dataset workload, refused
    otherwise); ``source`` names where it came from in ``describe()``. Raises ``SpecError``
    (``DatasetError`` for a malformed dataset, naming the line).
    """
    if workload.dataset is None:
        if dataset_text is not None:
            raise SpecError(
                "--dataset",
                "given, but the workload is not a dataset",
                "set gate.workload.dataset in --workload-json, or leave --dataset out",
            )
        if workload.synthetic is not None:
            return SyntheticTraffic(workload.synthetic, workload.seed)
        return None
    if dataset_text is None:
        raise SpecError(
            "--dataset",
            "the workload is a dataset, but no dataset file was given",
            "--dataset PATH (the file of gate.workload.dataset)",
        )
    records = parse_dataset(dataset_text, workload.dataset)
    return DatasetTraffic(records, workload.dataset, workload.seed, source)
