"""Per-release registry names (``vllm-X.Y.Z.json``): hack/vllm-flags/classes_stage.py."""
