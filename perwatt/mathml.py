"""Formulas written as MathML while the book is built, so pages need no math library.

Browsers draw MathML Core themselves (Chromium since 109, Firefox, Safari) and expose it to screen
readers as math, so nothing is downloaded to typeset a formula, on the web or from disk. The TeX is
converted by latex2mathml. Two constructs the book uses that it does not know are rewritten first;
whatever else it does not know would come out as raw TeX or as broken markup, so every formula is
checked, and one that fails is a build warning (an error under ``-W``) naming the formula. Each
formula keeps its TeX source as a MathML annotation, which browsers do not draw.

Registered by :mod:`perwatt.sphinxext` as the HTML math renderer ``mathml``.
"""

from __future__ import annotations

import html
import re
from xml.etree import ElementTree

from docutils import nodes

RENDERER = "mathml"
#: In the book's static folder; loaded only by pages that have a formula.
STYLESHEET = "perwatt-math.css"
_CLASSES = "math notranslate nohighlight"
#: ``\\[2pt]``: a line break with extra space; latex2mathml would print the "[2pt]".
_BREAK_WITH_SPACE = re.compile(r"\\\\\s*\[\s*-?[\d.]+\s*(?:pt|em|ex|mm|cm|in|bp|mu)\s*\]")


class MathError(ValueError):
    """A formula the converter did not fully understand."""


def prepare(tex: str) -> str:
    """Rewrite what latex2mathml lacks into what it has, with the same look in a display.

    ``aligned`` becomes ``align*`` (both are right-left column pairs; latex2mathml knows only the
    second), and a break's extra space is dropped, since the converter spaces rows itself.
    """
    tex = tex.replace(r"\begin{aligned}", r"\begin{align*}").replace(r"\end{aligned}", r"\end{align*}")
    return _BREAK_WITH_SPACE.sub(lambda _: "\\\\", tex)


def _check(mathml: str, tex: str) -> ElementTree.Element:
    try:
        root = ElementTree.fromstring(mathml)
    except ElementTree.ParseError as err:
        raise MathError(f"the MathML for {tex!r} is not well formed ({err})") from None
    leftover = [text for text in root.itertext() if "\\" in text or text.strip() == "&"]
    if leftover:
        raise MathError(f"{tex!r} has TeX the converter does not know: {leftover}")
    return root


def to_mathml(tex: str, display: bool) -> str:
    """One formula as a ``<math>`` element, its TeX kept as an annotation; raises :class:`MathError`."""
    from latex2mathml.converter import convert

    text = tex.strip()
    # A bare line break means nothing in MathML Core: rows need a table, which split makes.
    if "\\\\" in text and not text.startswith("\\begin"):
        text = f"\\begin{{split}}{text}\\end{{split}}"
    try:
        mathml = convert(prepare(text), display="block" if display else "inline")
    except Exception as err:  # noqa: BLE001 - its errors share no base class but Exception
        raise MathError(f"latex2mathml cannot read {tex!r}: {type(err).__name__} {err}") from None
    _check(mathml, tex)
    # TeX sets a slash as an ordinary symbol, with no space around it ("1000/T"); as a MathML
    # operator it would get the spacing of a binary one.
    mathml = mathml.replace("<mo>&#x0002F;</mo>", '<mo lspace="0em" rspace="0em">&#x0002F;</mo>')
    opening, inner = mathml.split(">", 1)
    inner = inner.removesuffix("</math>")
    # <semantics> shows its first child only; the annotation is there for copying and tools.
    return (f"{opening}><semantics><mrow>{inner}</mrow>"
            f'<annotation encoding="application/x-tex">{html.escape(tex.strip(), quote=False)}</annotation>'
            "</semantics></math>")


def _rendered(translator, node: nodes.Element, tex: str, display: bool) -> str:
    try:
        return to_mathml(tex, display)
    except MathError as err:
        from sphinx.util import logging

        logging.getLogger(__name__).warning(f"perwatt.mathml: {err}", location=node)
        return translator.encode(tex)


def visit_math(translator, node: nodes.math) -> None:
    translator.body.append(translator.starttag(node, "span", "", CLASS=_CLASSES))
    translator.body.append(_rendered(translator, node, node.astext(), display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(translator, node: nodes.math_block) -> None:
    from sphinx.locale import _
    from sphinx.util.math import get_node_equation_number

    # Focusable, since a formula wider than a phone's column scrolls, and a keyboard must reach it.
    translator.body.append(translator.starttag(node, "div", CLASS=_CLASSES, tabindex="0"))
    if node["number"] and not node["nowrap"]:
        translator.body.append(f'<span class="eqno">({get_node_equation_number(translator, node)})')
        translator.add_permalink_ref(node, _("Link to this equation"))
        translator.body.append("</span>")
    # Sphinx's convention: blank lines separate equations in one block, unless the text is used as it is.
    text = node.astext()
    parts = [text] if node["nowrap"] else [p for p in text.split("\n\n") if p.strip()]
    translator.body.extend(_rendered(translator, node, part, display=True) for part in parts)
    translator.body.append("</div>\n")
    raise nodes.SkipNode


def _add_stylesheet(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    if app.env.get_domain("math").has_equations(pagename):
        app.add_css_file(STYLESHEET)


def setup(app) -> None:
    """Register the renderer, make it the one the HTML builder uses, and style pages with math."""
    app.add_html_math_renderer(RENDERER, (visit_math, None), (visit_displaymath, None))
    app.connect("config-inited", lambda app, config: setattr(config, "html_math_renderer", RENDERER))
    app.connect("html-page-context", _add_stylesheet)
