"""One glossary for the words of verdicts (issue 42): docs/glossary.md holds every entry of
``gate.glossary`` word for word, the reasons the gate writes use its terms verbatim, and the
report page explains the terms its reasons use.

Before, "widened for 8 looks", "the 5 ms floor", "undecided (another figure failed first)"
and "(bucket bounds)" appeared in reasons and were explained nowhere a newcomer would look.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import TrialPlan
from vllm_operator.gate.finding import FigureKey
from vllm_operator.gate.glossary import GLOSSARY, used_in

ROOT = Path(__file__).resolve().parents[3]
TERMS = [
    "looks",
    "floor",
    "twin",
    "stored baseline",
    "undecided",
    "bucket bounds",
    "share in effect",
]


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_the_doc_holds_every_entry_word_for_word() -> None:
    assert list(GLOSSARY) == TERMS
    doc = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", doc, flags=re.M)[1:]
    found = {s.split("\n", 1)[0].strip(): flat(s.split("\n", 1)[1]) for s in sections}
    assert list(found) == TERMS
    for term, text in GLOSSARY.items():
        assert found[term] == flat(text), term


def test_the_gates_reasons_use_the_glossarys_terms_verbatim() -> None:
    from vllm_operator.gate.comparison import Judge

    plan = TrialPlan(min_trials=3, max_trials=10)
    judge = Judge(Thresholds.model_validate({"maxRegressionPercent": 10}), True, plan)
    found = judge.compare(
        FigureKey.latency("short"),
        "short prompts, median latency",
        "ms",
        [17.0, 18.0, 19.0, 22.0],
        [16.0, 17.0, 17.5, 16.5],
        True,
        1,
    ).finding
    # a fast figure: its limit is the floor, its interval widened for the plan's looks
    assert "widened for 8 looks" in found.text
    assert "(the 5 ms floor; 10% would be +1.7 ms)" in found.text
    assert [t for t, _ in used_in([found.text])] == ["looks", "floor"]


def test_the_report_page_explains_the_words_its_reasons_use() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "bench"))
    from report_fixtures import study_report
    from test_report_page import page

    report = study_report()
    report["verdict"] = {
        "outcome": "Failed",
        "reasons": [
            "2 streams: -19.2% vs baseline (95% interval, paired, 4 trials, widened for 8 looks)"
            ", limit -10%: regression beyond the limit",
            "short prompts, median latency: undecided (another figure failed first)",
        ],
        "deciding": 1,
    }
    text = page(report)
    words = re.search(r'<dl id="glossary">(.*?)</dl>', text, re.S)
    assert words is not None
    terms = re.findall(r"<dt>(.*?)</dt>", words.group(1))
    assert terms == ["looks", "undecided"]  # only what the reasons use
    assert "docs/glossary.md" in text
