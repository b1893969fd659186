"""The chapters' text read as a careful reader would: quotations, and the numbers in exercise answers.

* Every quotation in the prose matches the article it comes from, word for word, apart from
  whitespace and typographic quotes or dashes. Quoting the words on a figure's control is
  allowed, since it tells the reader which one to set. The few other quoted phrases that are not quotations of
  the articles are listed below with what they are. (Skipped with a reason when the articles are
  not beside the checkout.)
* An exercise's answer never carries a typed number: every number in a solution comes from a glue
  role filled by :mod:`perwatt.exercises`, whose values ``tests/test_exercises.py`` checks.
"""

from __future__ import annotations

import re

import pytest

from perwatt import data, exercises, figures
from perwatt.devtools import REPO

CHAPTERS = sorted((REPO / "chapters").glob("*.md"))

#: Quoted phrases that are not quotations of the articles, with what they are instead.
NOT_QUOTATIONS = {
    "bring your own numbers": "the title of one of this book's own sections",
    "within input rounding": "one of this book's own rounding verdicts",
    "≈": "the symbol the table prints before each ratio",
    "x times better per watt": "the generic form of the claim the checklist is for",
}


def control_labels() -> set[str]:
    """The words on the figures' controls, which the prose quotes when it says which one to set."""
    labels = set()
    for fig in figures.all_figures():
        for control in fig.controls:
            labels |= {_normalise(control.label.rstrip(":"))} | {_normalise(str(o)) for o in control.option_labels or ()}
    return labels


def _normalise(text: str) -> str:
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = re.sub("[\u2010\u2011\u2012\u2013\u2014\u2212]", "-", text)
    return re.sub(r"\s+", " ", text).strip()


def _prose(markdown: str) -> str:
    """A chapter's text without its code cells, with MyST roles reduced to the words they show."""
    text = re.sub(r"^```\{code-cell\}.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)
    text = re.sub(r"\{[a-z:]+\}`([^`<]*?)\s*<[^`]*>`", r"\1", text)  # {term}`shown <target>`
    text = re.sub(r"\{(?:term|doc)\}`([^`]*)`", r"\1", text)
    return re.sub(r"`[^`\n]*`", "`code`", text)


def quotations(markdown: str) -> list[str]:
    """Every double-quoted span in a chapter's prose (straight or typographic quotes)."""
    spans = re.findall(r'"([^"]{1,400}?)"|\u201c([^\u201d]{1,400}?)\u201d', _prose(markdown), flags=re.DOTALL)
    return [_normalise(a or b) for a, b in spans]


@pytest.fixture(scope="module")
def articles() -> str:
    sources = data.load("sources")
    files = sources.loc[(sources["kind"] == "article") & sources["file"].notna(), "file"]
    paths = [(REPO / f).resolve() for f in files]
    missing = [p for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"the articles are not beside this checkout ({missing[0]})")
    return _normalise("\n".join(p.read_text(encoding="utf-8") for p in paths))


def test_the_quotation_finder_finds_quotes_across_lines():
    assert quotations('A "quote that\n  runs on" and \u201ccurly\u201d, not `"code"`.') == ["quote that runs on", "curly"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_quotation_is_verbatim(chapter, articles):
    controls = control_labels()
    wrong = [q for q in quotations(chapter.read_text(encoding="utf-8"))
             if q not in articles and q.lower() not in NOT_QUOTATIONS and q not in controls]
    assert wrong == [], f"{chapter.name}: not found word for word in the articles: {wrong}"


def test_the_list_of_non_quotations_is_still_needed():
    everything = [q.lower() for c in CHAPTERS for q in quotations(c.read_text(encoding="utf-8"))]
    assert set(NOT_QUOTATIONS) <= set(everything), set(NOT_QUOTATIONS) - set(everything)


# --- Exercises -------------------------------------------------------------------------------

#: Names with digits in them, which are not numbers an answer states.
_NAMES = re.compile(r"\b(?:(?:GB|B|H)\d+(?:'s|s)?|R1|K2\.5|gpt-oss-120b(?:'s)?|FP\d+|BF16|\d+k(?:/\d+k)?)\b")


def _blocks(markdown: str, kind: str) -> dict[str, str]:
    """The bodies of every ``{exercise}`` or ``{solution}`` block, by label."""
    found = {}
    for header, body in re.findall(r"^```\{" + kind + r"\}([^\n]*)\n(.*?)^```", markdown, re.DOTALL | re.MULTILINE):
        label = header.strip() if kind == "solution" else re.search(r"^:label: (\S+)", body, re.MULTILINE).group(1)
        found[label] = body
    return found


def _typed_numbers(text: str) -> list[str]:
    text = re.sub(r"^:[a-z-]+:.*$", "", text, flags=re.MULTILINE)  # directive options
    text = re.sub(r"\{[a-z:]+\}`[^`]*`", "", text)  # glue, numref, ref, term roles
    text = re.sub(r"`[^`]*`", "", text)  # code
    text = re.sub(r"\$[^$]*\$", "", text)  # maths
    text = _NAMES.sub("", text)
    return re.findall(r"\d[\d,.]*", text)


def test_the_typed_number_finder_sees_numbers_and_ignores_names():
    assert _typed_numbers("Above: 2.33 on GB200s, {glue:text}`ex1_x:.2f` and `f(1)`, $1/(1-a)$") == ["2.33"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_no_solution_states_a_typed_number(chapter):
    solutions = _blocks(chapter.read_text(encoding="utf-8"), "solution")
    typed = {label: _typed_numbers(body) for label, body in solutions.items()}
    assert {k: v for k, v in typed.items() if v} == {}


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_exercise_answer_comes_from_the_exercises_module(chapter):
    markdown = chapter.read_text(encoding="utf-8")
    exercise_blocks, solution_blocks = _blocks(markdown, "exercise"), _blocks(markdown, "solution")
    assert set(exercise_blocks) == set(solution_blocks)
    for label in exercise_blocks:
        function = getattr(exercises, label.replace("-", "_"), None)
        assert function is not None, f"{chapter.name}: no exercises.{label.replace('-', '_')}() for {label}"
        keys = set(function())
        names = re.findall(r"\{glue:text\}`ex\d_([a-z0-9_]+)", exercise_blocks[label] + solution_blocks[label])
        assert names, f"{label}: glues nothing"
        assert set(names) <= keys, f"{label}: glues {set(names) - keys}, which exercises.{label} does not compute"


def _sections(markdown: str) -> list[str]:
    """A chapter cut at its second-level headings: the opening first, then each section."""
    return re.split(r"^## ", markdown, flags=re.MULTILINE)


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if "```{exercise}" in c.read_text(encoding="utf-8")],
                         ids=lambda p: p.stem)
def test_a_chapter_opens_with_its_promise_and_closes_with_takeaways(chapter):
    sections = _sections(chapter.read_text(encoding="utf-8"))
    assert "```{admonition} After this chapter" in sections[0], f"{chapter.name}: no promise before its first section"
    exercises_at = next(i for i, s in enumerate(sections) if s.startswith("Exercises"))
    before = sections[exercises_at - 1]
    takeaways = before[before.rfind("```{admonition} Takeaways"):]
    assert "```{admonition} Takeaways" in before, f"{chapter.name}: no takeaways before its exercises"
    bullets = re.findall(r"^- ", takeaways.split("\n```", 1)[0], flags=re.MULTILINE)
    assert 2 <= len(bullets) <= 3, f"{chapter.name}: {len(bullets)} takeaways"


def test_every_reading_chapter_has_exercises():
    assert sum("```{exercise}" in c.read_text(encoding="utf-8") for c in CHAPTERS) == 6
