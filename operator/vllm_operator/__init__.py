"""vllm-operator: run vLLM on Kubernetes with version-correct flags and benchmark-gated rollouts."""

__version__ = "0.1.0"
