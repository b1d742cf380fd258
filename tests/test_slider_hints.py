"""A field's hint and its slider agree (issue 26: "at most 1000" beside a slider that stops at 10).

Read from the built pages (the field macro, site/templates/macros.html, writes both): where a hint
states a range ("1 to 20,000", "at most 1,000", "Greater than 0, at most 10⁶"), the slider spans it
exactly, or the hint also says where the slider stops ("The slider spans 10⁻⁴ to 10", from the
macro's slider span option, or the widget's own words about its slider)."""

import html
import re

import pytest

import build

SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
NUMBER = r"(?:10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+|\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?)"


def number(text):
    """'20,000', '1e+06', '0.05' or '10⁶' -> a float."""
    if text.startswith("10") and text[2:3] and not text[2:3].isascii():
        return 10.0 ** int(text[2:].translate(SUPERSCRIPT))
    return float(text.replace(",", ""))


def stated_range(hint):
    """(low or None, high) that the hint states, or None when it states no upper bound."""
    m = re.search(rf"(?<![\w.])(-?{NUMBER}) to ({NUMBER})(?![\w⁰¹²³⁴⁵⁶⁷⁸⁹])", hint)
    if m:
        return number(m.group(1)), number(m.group(2))
    m = re.search(rf"(?:at most|[Uu]p to) ±?({NUMBER})", hint)
    if m:
        return None, number(m.group(1))
    return None


def slider_fields():
    """(page, field, slider min, slider max, hint) for every field with a slider on every built chapter."""
    out = []
    for page in sorted((build.OUT / "chapters").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r'data-slider-for="([^"]+)"[^>]*data-min="([^"]+)" data-max="([^"]+)"', text):
            start = text.rfind('<div class="kit-field', 0, m.start())
            end = text.find('<div class="kit-field', m.end())
            block = text[start:end if end > 0 else m.end() + 3000]
            hint = re.search(r'<p class="kit-hint"[^>]*>(.*?)</p>', block, re.S)
            out.append((page.name, m.group(1), float(m.group(2)), float(m.group(3)),
                        html.unescape(re.sub(r"<[^>]+>", "", hint.group(1))).strip() if hint else ""))
    return out


def test_the_built_pages_have_slider_fields():
    fields = slider_fields()
    assert len(fields) > 80, len(fields)
    assert all(lo < hi for _, _, lo, hi, _ in fields)


@pytest.mark.parametrize("page,field,lo,hi,hint", slider_fields(), ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_a_hint_that_states_a_range_agrees_with_its_slider(page, field, lo, hi, hint):
    stated = stated_range(hint)
    if stated is None or "slider" in hint.lower():
        return  # no range stated, or the hint itself says where the slider stops
    low, high = stated
    assert high == pytest.approx(hi, rel=1e-9) and (low is None or low == pytest.approx(lo, rel=1e-9, abs=1e-12)), (
        f"{page} {field}: the hint says {hint!r}, the slider spans {lo:g} to {hi:g}: "
        "give the field's slider span=True (the hint then says where the slider stops), or make them agree")


@pytest.mark.parametrize("hint,stated", [
    ("Greater than 0, at most 1000.", (None, 1000.0)), ("1 to 20,000.", (1.0, 20000.0)),
    ("Greater than 0, at most 10⁶.", (None, 1e6)), ("0 to 63; let go of the slider to show it.", (0.0, 63.0)),
    ("Any number up to 1e+300 in size", (None, 1e300)), ("Up to 10⁶ in size.", (None, 1e6)), ("Must divide the width.", None), ("Step 0 to 299.", (0.0, 299.0)), ("0.05 to 100;", (0.05, 100.0)),
])
def test_stated_range_reads_the_hints_numbers(hint, stated):
    assert stated_range(hint) == stated
