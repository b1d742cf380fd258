"""The colour theme in a real browser: the palette meets its contrast floors in both themes and its
chart colours stay apart for colour-blind readers; with no stored choice the page follows the system's
setting, live; the header's switch sets light or dark, remembered across a reload, and back to the
system's setting; data-theme is set before the page's body is parsed (no flash of the wrong theme);
and every change dispatches "themechange" for the canvas charts."""

import itertools
import re

import numpy as np
import pytest

from conftest import SITE, close_page, new_reader_page

CHAPTER = "chapters/" + sorted((SITE / "chapters").glob("03-*.html"))[0].name

CONTRACT = ["--bg", "--fg", "--muted", "--surface", "--border", "--accent", "--focus", "--error", "--ok",
            "--warn", "--chart-text", "--chart-axis", "--chart-grid", "--band"] + [f"--series-{i}" for i in range(1, 9)]
CODE = ["--code-comment", "--code-keyword", "--code-string", "--code-number", "--code-function",
        "--code-builtin", "--code-decorator", "--code-operator", "--code-exception"]
TEXT = ["--fg", "--muted", "--accent", "--error", "--ok", "--warn", "--chart-text",
        "--measured", "--derived", "--cited"]

# Each custom property, resolved by the browser to rgb()/rgba() (a probe element's colour).
RESOLVE = """(names) => {
  const probe = document.createElement("span");
  document.body.append(probe);
  const out = {};
  const root = getComputedStyle(document.documentElement);
  for (const n of names) {
    probe.style.color = `var(${n})`;
    out[n] = root.getPropertyValue(n).trim() ? getComputedStyle(probe).color : null;
  }
  probe.remove();
  return out;
}"""


def rgb(css):
    """'rgb(1, 2, 3)' or 'rgba(1, 2, 3, 0.5)' -> (r, g, b) in 0..1 and alpha."""
    parts = [float(x) for x in re.findall(r"[\d.]+", css)]
    return np.array(parts[:3]) / 255, (parts[3] if len(parts) > 3 else 1.0)


def linear(c):
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def contrast(a, b):
    """WCAG 2 contrast ratio of two opaque sRGB colours."""
    la, lb = (float(linear(c) @ [0.2126, 0.7152, 0.0722]) for c in (a, b))
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


# Machado, Oliveira and Fernandes (2009): full-severity simulation in linear RGB.
CVD = {
    "normal": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]),
}


def oklab(lin):
    """OKLab (Ottosson 2020) of a linear sRGB colour."""
    lms = np.array([[0.4122214708, 0.5363325363, 0.0514459929], [0.2119034982, 0.6806995451, 0.1073969566],
                    [0.0883024619, 0.2817188376, 0.6299787005]]) @ lin
    return np.array([[0.2104542553, 0.7936177850, -0.0040720468], [1.9779984951, -2.4285922050, 0.4505937099],
                     [0.0259040371, 0.7827717662, -0.8086757660]]) @ np.cbrt(lms)


def palette(page, theme):
    page.evaluate("t => { document.documentElement.dataset.theme = t; }", theme)
    names = CONTRACT + CODE + TEXT + ["--on-accent", "--error-bg", "--warn-bg", "--accent-soft"]
    raw = page.evaluate(RESOLVE, sorted(set(names)))
    missing = [n for n, v in raw.items() if v is None]
    assert not missing, f"{theme}: custom properties not defined: {missing}"
    return {n: rgb(v) for n, v in raw.items()}


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_palette_meets_its_contrast_floors(page, site_url, theme):
    page.goto(site_url + CHAPTER, wait_until="domcontentloaded")
    p = palette(page, theme)
    bg, surface = p["--bg"][0], p["--surface"][0]
    low = []

    def need(fg, bgname, floor):
        colour, alpha = p[fg]
        assert alpha == 1, f"{fg} is translucent"
        ratio = contrast(colour, p[bgname][0])
        if ratio < floor:
            low.append(f"{fg} on {bgname}: {ratio:.2f} < {floor}")

    for name in TEXT:
        need(name, "--bg", 4.5)
        need(name, "--surface", 4.5)
    for name in CODE:
        need(name, "--surface", 4.5)  # code blocks sit on --surface
    need("--fg", "--accent-soft", 4.5)
    need("--error", "--error-bg", 4.5)
    need("--warn", "--warn-bg", 4.5)
    need("--on-accent", "--accent", 4.5)  # the primary button's label
    for name in ("--border", "--focus", "--chart-axis"):
        need(name, "--bg", 3)
        need(name, "--surface", 3)
    for i in range(1, 9):
        need(f"--series-{i}", "--bg", 3)
    assert not low, f"{theme}: " + "; ".join(low)
    assert contrast(bg, surface) < 1.5  # a panel is a tint of the page, not a second theme


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_two_chart_colours_look_alike_to_colour_blind_readers(page, site_url, theme):
    page.goto(site_url + CHAPTER, wait_until="domcontentloaded")
    p = palette(page, theme)
    series = [linear(p[f"--series-{i}"][0]) for i in range(1, 9)]
    close = []
    for kind, m in CVD.items():
        seen = [oklab(np.clip(m @ c, 0, 1)) for c in series]
        for (i, a), (j, b) in itertools.combinations(enumerate(seen, 1), 2):
            distance = 100 * np.linalg.norm(a - b)  # OKLab, x100: about 2 is just noticeable
            if distance < 3:
                close.append(f"{kind}: series {i} and {j} ({distance:.1f})")
    assert not close, f"{theme}: " + "; ".join(close)


def test_with_no_stored_choice_the_page_follows_the_system_setting_live(reader_profile, browser, site_url):
    page = new_reader_page(reader_profile, browser, site_url, color_scheme="dark")
    page.goto(site_url + CHAPTER, wait_until="domcontentloaded")
    assert page.evaluate("localStorage.getItem('course-theme')") is None
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.locator('button[data-theme-choice="system"]').get_attribute("aria-pressed") == "true"
    dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.evaluate("window.changes = 0; document.addEventListener('themechange', () => window.changes++)")
    page.emulate_media(color_scheme="light")
    page.wait_for_function("document.documentElement.dataset.theme === 'light'")
    assert page.evaluate("window.changes") == 1
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != dark_bg
    close_page(page)


def test_the_switch_sets_the_theme_remembers_it_and_goes_back_to_the_system(reader_profile, browser, site_url):
    page = new_reader_page(reader_profile, browser, site_url, color_scheme="light")
    page.goto(site_url + CHAPTER, wait_until="domcontentloaded")
    switch = page.get_by_role("group", name="Colour theme")
    dark = switch.get_by_role("button", name="Dark")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    assert dark.get_attribute("aria-pressed") == "false"
    page.evaluate("window.changes = 0; document.addEventListener('themechange', () => window.changes++)")
    light_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")

    dark.focus()
    page.keyboard.press("Enter")  # a real button: the keyboard works it
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert dark.get_attribute("aria-pressed") == "true"
    assert switch.get_by_role("button", name="Auto").get_attribute("aria-pressed") == "false"
    assert page.evaluate("window.changes") == 1
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != light_bg

    page.reload(wait_until="domcontentloaded")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"  # remembered
    assert page.locator('button[data-theme-choice="dark"]').get_attribute("aria-pressed") == "true"
    page.emulate_media(color_scheme="light")  # a stored choice wins over the system's setting
    page.wait_for_timeout(200)
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"

    page.click('button[data-theme-choice="system"]')
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    assert page.evaluate("localStorage.getItem('course-theme')") is None
    page.emulate_media(color_scheme="dark")
    page.wait_for_function("document.documentElement.dataset.theme === 'dark'")
    page.click('button[data-theme-choice="light"]')
    page.goto(site_url + "glossary.html", wait_until="domcontentloaded")  # and on every page of the site
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    close_page(page)


def test_the_theme_is_set_before_the_body_is_parsed(browser, site_url):
    """No flash of the wrong theme: data-theme is already on <html> when <body> is created."""
    context = browser.new_context(color_scheme="dark", service_workers="block")
    context.add_init_script("""
      new MutationObserver((records, observer) => {
        if (document.body) { window.themeAtBody = document.documentElement.dataset.theme || null; observer.disconnect(); }
      }).observe(document, { childList: true, subtree: true });""")
    page = context.new_page()
    for path in ("index.html", CHAPTER):
        page.goto(site_url + path, wait_until="domcontentloaded")
        assert page.evaluate("window.themeAtBody") == "dark", path
    context.close()


def test_without_javascript_the_switch_is_hidden(browser, site_url):
    context = browser.new_context(java_script_enabled=False, color_scheme="dark")
    page = context.new_page()
    page.goto(site_url + CHAPTER)
    assert page.locator("[data-role=theme-switch]").count() == 1
    assert not page.locator("[data-role=theme-switch]").is_visible()  # it would do nothing
    context.close()
