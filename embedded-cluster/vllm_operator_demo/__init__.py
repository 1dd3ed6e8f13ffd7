"""The vllm-operator demo: the real operator on the embedded cluster walks the upgrade story.

It lives beside ``devcluster`` (not in the operator's package) so that ``pip install
vllm-operator`` and the operator image carry no embedded cluster; ``vllm-operator demo``
finds it by name when this distribution is installed.
"""
