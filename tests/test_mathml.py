"""Formulas to MathML at build time (perwatt.mathml): what the book's TeX becomes, and what is refused."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from perwatt import mathml

NS = "{http://www.w3.org/1998/Math/MathML}"
ENERGY = r"""\begin{aligned}
E_\text{token}\ [\text{J/token}] &= \frac{1000}{T\ [\text{tokens/s/kW}]} \\[2pt]
\text{tokens/s per chip} &= T \times \frac{P\ [\text{W}]}{1000}
\end{aligned}"""


def parsed(tex: str, display: bool = True) -> ET.Element:
    return ET.fromstring(mathml.to_mathml(tex, display))


def drawn_text(root: ET.Element) -> str:
    """What a reader sees: the first child of <semantics>, not the TeX annotation."""
    return "".join(root.find(f"{NS}semantics")[0].itertext())


def test_aligned_rows_become_a_table_of_right_and_left_cells():
    root = parsed(ENERGY)
    assert root.get("display") == "block"
    rows = root.findall(f".//{NS}mtr")
    assert len(rows) == 2
    assert [[c.get("columnalign") for c in r.findall(f"{NS}mtd")] for r in rows] == [["right", "left"]] * 2
    # The break's extra space is dropped, not printed; each right-hand cell starts with its = sign.
    assert "2pt" not in drawn_text(root)
    assert [r.findall(f"{NS}mtd")[1].find(f"{NS}mo").text for r in rows] == ["=", "="]
    fraction = rows[0].find(f".//{NS}mfrac")
    assert [e.text for e in fraction[0].iter() if e.text and e.text.strip()] == ["1000"]
    assert "tokens/s/kW" in "".join(fraction[1].itertext())


def test_the_tex_is_kept_as_an_annotation_the_browser_does_not_draw():
    root = parsed(r"a < b \quad \text{and} \quad c", display=False)
    assert root.get("display") == "inline"
    semantics = root.find(f"{NS}semantics")
    assert [child.tag for child in semantics] == [f"{NS}mrow", f"{NS}annotation"]
    annotation = semantics.find(f"{NS}annotation")
    assert annotation.get("encoding") == "application/x-tex" and annotation.text == r"a < b \quad \text{and} \quad c"
    assert "\\" not in drawn_text(root)


def test_a_slash_is_spaced_as_in_tex_and_other_operators_are_not_touched():
    root = parsed("1000/T + 1", display=False)
    operators = {o.text: (o.get("lspace"), o.get("rspace")) for o in root.iter(f"{NS}mo")}
    assert operators == {"/": ("0em", "0em"), "+": (None, None)}


def test_a_bare_line_break_still_makes_rows():
    assert len(parsed(r"a = b \\ c = d").findall(f".//{NS}mtr")) == 2


@pytest.mark.parametrize("tex", [r"\notacommand{x} + 1", r"\begin{aligned}[t] a &= b \end{aligned}",
                                 r"\begin{gathered} a & b \end{gathered}"])
def test_tex_the_converter_does_not_know_is_refused_not_printed(tex):
    with pytest.raises(mathml.MathError):
        mathml.to_mathml(tex, display=True)


@pytest.mark.parametrize("tex", [r"\max\left(\frac{a}{b},\ \frac{c}{d}\right)", r"\sum_{i=0}^{N-1}\Big[x_i\Big]",
                                 r"1/(1-\alpha)", r"E[\text{tokens per pass}] = \frac{1-\alpha^{\gamma+1}}{1-\alpha}"])
def test_the_books_other_constructs_convert_cleanly(tex):
    root = parsed(tex)
    assert drawn_text(root).strip() and "\\" not in drawn_text(root)
