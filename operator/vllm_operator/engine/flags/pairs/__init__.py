"""Per-release settings given twice (``vllm-X.Y.Z.json``): hack/vllm-flags/pairs_stage.py."""
