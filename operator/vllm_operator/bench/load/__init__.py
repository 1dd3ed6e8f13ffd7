"""The load sweep of a workload: what requests (``traffic``), when (``send``, within the
byte ``budget``), the levels in order (``sweep``), each run's figures and tail counts
(``figures``, ``tails``), the report's load section (``report``) and the recount of a
stored report (``recount``, for ``vllm-operator judge --report``).

Requests go through ``bench.http``; the judging is ``gate``'s. Nothing here runs code from
an answer or knows the quality suite.
"""
