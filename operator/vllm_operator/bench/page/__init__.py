"""The benchmark report as a page people read: one self-contained HTML file per report.

``view`` reads a report (``bench --report-path``, or the JSON lines a benchmark Job logs)
into bounded, typed figures, refusing what is not a report with a named error; ``charts``
turns them into plotly figures, candidate and baseline on the same axes; ``document``
assembles the page: the verdict with its reasons, the charts, the quality table, every
script and style inline and every string from the report escaped. The command is
``vllm-operator report`` (``commands/report.py``); ``bench --html`` writes the same page.
"""
