"""The built website, opened in headless Chromium: math is typeset, nothing fails to load,
no request leaves the machine, a solution dropdown opens on click, every chapter shows its
measured compute budget and how it was executed, the pages for readers and instructors
(setup, instructor guide, licences) show the tables generated from the chapters, and every
architecture diagram (a figure named fig-...) loads, with a caption and real alt text, in the
light and the dark theme, and every page reads on a phone (390 px wide): it does not
scroll sideways and cuts no formula off.

Runs on the site `make site` builds (quick mode) — or the one in $TINYBERT_SITE_DIR. Saves
screenshots in _build/screenshots for a person to look at.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("TINYBERT_SITE_DIR", ROOT / "_build" / "quick" / "_build" / "html"))
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-quic"]
PHONE = {"width": 390, "height": 844}  # a current iPhone's screen in CSS pixels


def _pages():
    if not (SITE / "index.html").is_file():
        return []
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
                  if not p.relative_to(SITE).parts[0].startswith("_")
                  and 'http-equiv="Refresh"' not in p.read_text())  # the index redirect


PAGES = _pages()
CHAPTER_PAGES = [p for p in PAGES if p.startswith("chapters/")]


@contextlib.contextmanager
def serve(directory: Path):
    """Serve a folder on 127.0.0.1 (a free port) for the duration of the block."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@pytest.fixture(scope="module")
def server():
    if not PAGES:
        pytest.fail(f"no website at {SITE}: run `make site` (or `make book` and set "
                    "TINYBERT_SITE_DIR=_build/html) first")
    with serve(SITE) as url:
        yield url


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # the browser aborted a request
            pass


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("Chromium is not installed (Debian: apt-get install chromium; "
                    ".ci/run installs it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


class PageVisit:
    """One page load that records every request that failed or tried to leave the machine."""

    def __init__(self, browser, url, phone=False):
        if phone:  # a phone's screen, touch and <meta name="viewport"> handling
            self.context = browser.new_context(viewport=PHONE, is_mobile=True,
                                               has_touch=True, device_scale_factor=2)
        else:
            self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.outside, self.failed = [], []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(
            f"{r.url} (HTTP {r.status})"))
        self.page.goto(url, wait_until="load")

    def _route(self, route):
        host = urlparse(route.request.url).hostname
        if route.request.url.startswith("data:") or host == "127.0.0.1":
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def close(self):
        self.context.close()


def _wait_for_mathjax(page) -> int:
    page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise",
                           timeout=30_000)
    return page.evaluate("MathJax.startup.promise.then("
                         "() => document.querySelectorAll('mjx-container').length)")


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_everything_locally(server, browser, name):
    visit = PageVisit(browser, f"{server}/{name}")
    try:
        page = visit.page
        if page.evaluate("!!document.querySelector('script[src*=\"mathjax\"]')"):
            _wait_for_mathjax(page)
        page.evaluate("document.fonts.ready.then(() => true)")
        broken_images = page.evaluate(
            "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
            ".map(i => i.getAttribute('src'))")
        broken_fonts = page.evaluate(
            "Array.from(document.fonts).filter(f => f.status === 'error').map(f => f.family)")
        page.wait_for_timeout(300)  # let late requests (icons, lazy scripts) happen
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
        assert visit.failed == [], f"failed to load: {visit.failed}"
        assert broken_images == [], f"images that did not load: {broken_images}"
        assert broken_fonts == [], f"fonts that did not load: {broken_fonts}"
    finally:
        visit.close()


@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_chapter_math_is_typeset(server, browser, name):
    visit = PageVisit(browser, f"{server}/{name}")
    try:
        page = visit.page
        typeset = _wait_for_mathjax(page)
        errors = page.evaluate("document.querySelectorAll('mjx-merror').length")
        raw = page.evaluate("document.querySelectorAll('.math:not(:has(mjx-container))').length")
        figures = page.evaluate("document.querySelectorAll('.cell_output img').length")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / (name.replace("/", "_") + ".png")))
        assert typeset > 0, "no typeset math on a chapter page"
        assert errors == 0, f"{errors} TeX errors on the page"
        assert raw == 0, f"{raw} math elements were left untypeset"
        assert figures > 0, "a chapter page shows no executed plot"
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
    finally:
        visit.close()


def test_a_solution_dropdown_opens_on_click(server, browser):
    pages_with_solutions = [p for p in CHAPTER_PAGES
                            if "solution dropdown" in (SITE / p).read_text()]
    assert pages_with_solutions, "no chapter page has a solution dropdown"
    visit = PageVisit(browser, f"{server}/{pages_with_solutions[0]}")
    try:
        page = visit.page
        page.wait_for_selector(".solution.dropdown .toggle-button", timeout=15_000)
        solution = page.locator(".solution.dropdown").first
        body = solution.locator(":scope > :not(.admonition-title)").first
        assert not body.is_visible(), "the solution is visible before it is opened"
        solution.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "solution_closed.png"))
        solution.locator(".admonition-title").click()
        body.wait_for(state="visible", timeout=5_000)
        assert body.is_visible()
        page.screenshot(path=str(SHOTS / "solution_open.png"))
    finally:
        visit.close()


def test_the_checks_catch_outside_requests_and_broken_files(browser, tmp_path):
    """The harness itself: a page with a CDN script and a missing image must be caught."""
    (tmp_path / "bad.html").write_text(
        '<html><body><script src="https://cdn.example.org/lib.js"></script>'
        '<img src="missing.png"></body></html>')
    with serve(tmp_path) as url:
        visit = PageVisit(browser, f"{url}/bad.html")
        try:
            broken = visit.page.evaluate(
                "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                ".length")
            assert visit.outside == ["https://cdn.example.org/lib.js"]
            assert any("missing.png" in failure for failure in visit.failed)
            assert broken == 1
        finally:
            visit.close()


def test_backlinks_in_the_package_point_at_real_sections():
    """Every "Built in chapter N, section ...: page#anchor" comment resolves in the built site."""
    import re

    if not PAGES:
        pytest.fail(f"no website at {SITE}: run `make site` first")
    links = set()
    for module in (ROOT / "tinybert").rglob("*.py"):
        # two comment lines: '# Built in chapter N, section "...":', then '# page#anchor'
        links |= set(re.findall(r"^# Built in chapter \d+, section .*:\n(?:# .*\n)*?"
                                r"# (\S+\.html)#(\S+)$",
                                module.read_text(), flags=re.MULTILINE))
    assert links, "no back-links found in the package"
    for page, anchor in sorted(links):
        html = (SITE / page).read_text()
        assert f'id="{anchor}"' in html, f"{page} has no section with id {anchor!r}"


# --- the pages for readers and instructors -------------------------------------------------------

def _book_facts():
    """What the generated pages must show, computed from the chapters and book/budgets.json."""
    import json

    from book.tools import budget, course

    chapters = [c for c in course.book_chapters() if f"chapters/{c.stem}.html" in CHAPTER_PAGES]
    return chapters, json.loads(budget.BUDGETS.read_text()), budget, course


@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_chapter_shows_its_budget_and_how_it_was_executed(server, browser, name):
    import platform

    import torch

    import tinybert

    _, data, budget, _ = _book_facts()
    stem = name.split("/")[-1].removesuffix(".html")
    visit = PageVisit(browser, f"{server}/{name}")
    try:
        page = visit.page
        badge = page.locator("section > h1 + div.tinybert-budget")
        assert badge.count() == 1, "no compute budget right under the chapter's title"
        assert badge.is_visible()
        text = badge.inner_text()
        assert text.startswith("Compute budget")
        quick = budget.lookup(data, stem, "quick", "cpu")
        normal = budget.lookup(data, stem, "normal", "cpu")
        assert (f"quick mode {budget.duration(quick['seconds'])}" if quick
                else "quick mode not measured yet") in text
        assert (f"normal mode {budget.duration(normal['seconds'])}" if normal
                else "normal mode not measured yet") in text
        footer = page.locator("div.tinybert-provenance")
        assert footer.count() == 1, "no provenance footer on a chapter page"
        footer.scroll_into_view_if_needed()
        assert footer.is_visible()
        said = footer.inner_text()
        assert said.startswith("This page was executed on "), said
        assert re.search(r"in (quick|normal) mode", said)
        for fact in (f"tinybert {tinybert.__version__}", f"PyTorch {torch.__version__}",
                     f"Python {platform.python_version()}"):
            assert fact in said, f"the footer does not say {fact!r}: {said}"
        # the footer is the last thing in the chapter's text
        assert page.evaluate("(() => { const f = document.querySelector('div.tinybert-provenance');"
                             " return f.nextElementSibling === null; })()")
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
    finally:
        visit.close()


def test_instructor_guide_shows_syllabus_goals_budgets_and_exercises(server, browser):
    chapters, data, budget, course = _book_facts()
    visit = PageVisit(browser, f"{server}/book/instructors.html")
    try:
        page = visit.page
        page.screenshot(path=str(SHOTS / "instructors.png"), full_page=True)

        def links_in(selector):
            return page.evaluate(f"Array.from(document.querySelectorAll('{selector} a.internal'))"
                                 ".map(a => a.getAttribute('href'))")

        syllabi = page.locator("div.tinybert-syllabus table")
        assert syllabi.count() == 2, "the 7-week and the 14-week plan"
        for chapter in chapters:  # every published chapter is in both plans, linked
            hrefs = links_in("div.tinybert-syllabus")
            assert sum(h.split("#")[0].endswith(f"chapters/{chapter.stem}.html") for h in hrefs) >= 2
        table = page.locator("div.tinybert-budget-table table")
        assert table.count() == 1
        rows = table.locator("tbody tr")
        assert rows.count() == len(chapters)
        for index, chapter in enumerate(chapters):
            cells = rows.nth(index).locator("td").all_inner_texts()
            quick = budget.lookup(data, chapter.stem, "quick", "cpu")
            assert cells[1] == (budget.duration(quick["seconds"]) if quick else "not measured yet")
        goals = page.locator("div.tinybert-chapter-goals li")
        assert goals.count() == sum(len(course.learning_goals(c)) for c in chapters)
        exercises = page.locator("div.tinybert-exercise-table tbody tr")
        assert exercises.count() == sum(len(course.exercises(c)) for c in chapters)
        checks = page.locator("div.tinybert-exercise-table tbody td code").all_inner_texts()
        expected = [name for c in chapters for e in course.exercises(c) for name in e.checks]
        assert checks == expected
        imports = page.locator("div.tinybert-chapter-imports tbody tr")
        assert imports.count() == len(chapters)
        exercise_links = page.evaluate(
            "Array.from(document.querySelectorAll('div.tinybert-exercise-table td:nth-child(2) a'))"
            ".map(a => a.getAttribute('href'))")
        assert len(exercise_links) == exercises.count()
        for href in exercise_links:  # each exercise link lands on its exercise
            target, _, anchor = href.partition("#")
            assert anchor and f'id="{anchor}"' in (SITE / "book" / target).resolve().read_text()
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
    finally:
        visit.close()


def test_setup_page_shows_the_doctor_and_the_colab_cell(server, browser):
    visit = PageVisit(browser, f"{server}/book/setup.html")
    try:
        blocks = visit.page.locator("div.highlight pre").all_inner_texts()
        doctor = [b for b in blocks if "python -m tinybert doctor)" in b]
        assert doctor, "the doctor's output is not on the setup page"
        assert re.search(r"^status\s+(ok|check: )", doctor[0], flags=re.MULTILINE)
        assert re.search(r"^device\s+(cpu|cuda|mps)", doctor[0], flags=re.MULTILINE)
        colab = [b for b in blocks if 'if "google.colab" in sys.modules:' in b]
        assert colab and "tinybert @ git+" in colab[0]
        for section in ("setup-laptop", "setup-conda", "setup-colab", "setup-gpu", "setup-doctor"):
            assert visit.page.locator(f"#{section}").count() == 1, f"no #{section} section"
        assert visit.outside == []
    finally:
        visit.close()


def test_licences_page_credits_every_dataset_and_the_chapters_papers(server, browser):
    from tinybert.data import REGISTRY

    chapters, _, _, course = _book_facts()
    visit = PageVisit(browser, f"{server}/book/licences.html")
    try:
        page = visit.page
        credits = page.locator("div.tinybert-dataset-credits").inner_text()
        for entry in REGISTRY.values():
            assert entry.name in credits, f"{entry.name} is not credited"
        for words in ("CC BY-SA 3.0", "CC BY-SA 4.0", "CC BY 4.0", "public domain"):
            assert words in credits
        text = page.locator("article").inner_text()
        assert "MIT" in text and "LICENSE-CONTENT" in text and "share-alike" in text
        assert "load_gutenberg" in text and "gutenberg_body" in text
        cited = page.locator("div.tinybert-chapter-citations a.internal").count()
        assert cited >= sum(len(course.citations(c)) for c in chapters)
        assert visit.outside == []
    finally:
        visit.close()


# --- quizzes, exercise metadata and project briefs ------------------------------------

@pytest.mark.parametrize("name", CHAPTER_PAGES)
def test_chapter_ends_with_a_quiz_and_labels_its_exercises(server, browser, name):
    visit = PageVisit(browser, f"{server}/{name}")
    try:
        page = visit.page
        quiz = page.locator("div.tinybert-quiz.tinybert-quiz-live")  # quiz.js has run
        assert quiz.count() == 1, "no working quiz on the chapter page"
        assert 5 <= quiz.locator("li.tinybert-question").count() <= 8
        headings = page.locator("article section > h2").all_inner_texts()
        # the last section, whatever its number ("9.14. Quiz")
        assert re.sub(r"^[\d.]+\s*", "", headings[-1]).startswith("Quiz"), headings[-1]
        exercises = page.locator("div.exercise").count()
        labels = page.locator("div.exercise p.tinybert-exercise-meta").all_inner_texts()
        assert exercises >= 4 and len(labels) == exercises
        pattern = r"difficulty [123] of 3 · about \d+ min · \w+"
        assert all(re.search(pattern, label) for label in labels), labels
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
    finally:
        visit.close()


def test_a_quiz_answers_right_and_wrong_in_the_browser(server, browser):
    visit = PageVisit(browser, f"{server}/{CHAPTER_PAGES[0]}")
    try:
        page = visit.page
        question = page.locator("li.tinybert-question[data-kind=choice]").first
        question.scroll_into_view_if_needed()
        feedback = question.locator(".tinybert-feedback")
        said = []
        for index in range(question.locator("input[type=radio]").count()):
            question.locator("input[type=radio]").nth(index).check()
            question.locator("button").click()
            said.append(feedback.inner_text())
            if said[-1].startswith("✓"):
                page.screenshot(path=str(SHOTS / "quiz_right.png"))
        assert sum(s.startswith("✓ Right") for s in said) == 1, said
        wrong = sum(s.startswith("✗ Not quite") for s in said)
        assert wrong == len(said) - 1 >= 1, said
        number = page.locator("li.tinybert-question[data-kind=number]").first
        number.locator("input[type=text]").fill("123456789")
        number.locator("button").click()
        answer = number.locator(".tinybert-feedback").inner_text()
        assert answer.startswith("✗ Not quite"), answer
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
    finally:
        visit.close()


def test_project_briefs_show_their_recorded_baselines(server, browser):
    visit = PageVisit(browser, f"{server}/book/projects.html")
    try:
        page = visit.page
        briefs = [h for h in page.locator("article section > h2").all_inner_texts()
                  if re.match(r"\d+\. ", h)]
        assert len(briefs) >= 4
        numbers = page.locator("span.tinybert-recorded").all_inner_texts()
        assert len(numbers) >= 10
        assert all(re.fullmatch(r"[\d.,]+%?", n) for n in numbers), numbers
        text = page.locator("article").inner_text()
        assert text.count("Baseline.") >= 4 and text.count("Budget.") >= 4
        assert visit.outside == []
    finally:
        visit.close()


# --- the architecture diagrams (issue 34) ---------------------------------------------------------

def _named_figures(stem: str) -> list[str]:
    """The figure names (``name: fig-...``) that a chapter's source gives its cells."""
    source = ROOT / "chapters" / f"{stem}.md"
    if not source.is_file():
        return []
    return re.findall(r"^\s+name: (fig-[\w-]+)\s*$", source.read_text(), flags=re.MULTILINE)


DIAGRAM_PAGES = [p for p in CHAPTER_PAGES if 'id="fig-' in (SITE / p).read_text()]

_FIGURES_JS = """() => Array.from(document.querySelectorAll('figure[id^="fig-"]')).map(f => {
  const img = f.querySelector('img');
  const box = img ? img.getBoundingClientRect() : null;
  const style = img ? getComputedStyle(img) : null;
  let corner = null;
  if (img && img.complete && img.naturalWidth > 0) {  // the file's own top-left pixel
    const canvas = document.createElement('canvas');
    canvas.width = 4; canvas.height = 4;
    const context = canvas.getContext('2d');
    context.drawImage(img, 0, 0);
    corner = Array.from(context.getImageData(0, 0, 1, 1).data);
  }
  return {id: f.id, hasImage: !!img, alt: img ? (img.getAttribute('alt') || '') : '',
          src: img ? img.getAttribute('src') : '', loaded: !!img && img.complete,
          naturalWidth: img ? img.naturalWidth : 0, width: box ? box.width : 0,
          height: box ? box.height : 0,
          shown: !!style && style.display !== 'none' && style.visibility !== 'hidden',
          caption: (f.querySelector('figcaption') || {}).textContent || '', corner};
})"""


def test_every_named_figure_of_a_chapter_is_on_its_page():
    """Each figure a chapter names in its cell options is a <figure id="fig-..."> on the
    built page, and the chapters from attention on hold the book's diagrams."""
    if not PAGES:
        pytest.fail(f"no website at {SITE}: run `make site` first")
    named = {}
    for page in CHAPTER_PAGES:
        stem = page.split("/")[-1].removesuffix(".html")
        names = _named_figures(stem)
        html = (SITE / page).read_text()
        missing = [n for n in names if f'<figure class="align-default" id="{n}">' not in html]
        assert not missing, f"{page}: figures missing from the page: {missing}"
        named[stem] = names
    if any(stem.startswith("03_") for stem in named):  # the whole book, not a few pages
        assert sum(len(n) for n in named.values()) >= 14, named
        # tokenization (07) and pretraining (09) draw no architecture: 08 and 13 hold the
        # pretraining heads (the same rule as tests/test_diagrams.py)
        assert all(named[s] for s in named if "03" <= s[:2] <= "14"
                   and s[:2] not in {"07", "09"}), named


@pytest.mark.parametrize("name", DIAGRAM_PAGES)
def test_diagrams_load_with_alt_text_and_a_caption_in_both_themes(server, browser, name):
    visit = PageVisit(browser, f"{server}/{name}")
    try:
        page = visit.page
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            page.wait_for_timeout(100)
            figures = page.evaluate(_FIGURES_JS)
            assert figures, f"{name}: no named figure on the page"
            for f in figures:
                where = f"{name}#{f['id']} ({theme})"
                assert f["hasImage"] and f["loaded"] and f["naturalWidth"] > 0, \
                    f"{where}: the image did not load: {f['src']}"
                assert f["shown"] and f["width"] > 100 and f["height"] > 50, \
                    f"{where}: the image is not visible ({f['width']} x {f['height']})"
                alt = f["alt"].strip()
                assert len(alt) >= 40, f"{where}: no real alt text: {alt!r}"
                path_like = re.fullmatch(r"\S*[/\\.]\S*", alt) or re.search(
                    r"\S+\.(png|svg|jpe?g|gif)\b", alt, flags=re.IGNORECASE)
                assert not path_like and alt != f["src"].rsplit("/", 1)[-1], \
                    f"{where}: the alt text is a file path: {alt!r}"
                assert f["caption"].strip(), f"{where}: no caption"
                # drawn dark on white: an opaque, light background in either theme
                assert f["corner"] is not None and f["corner"][3] == 255 \
                    and min(f["corner"][:3]) >= 240, f"{where}: background {f['corner']}"
            page.locator(f"#{figures[0]['id']}").scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / f"diagram_{theme}_{name.replace('/', '_')}.png"))
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
        assert visit.failed == [], f"failed to load: {visit.failed}"
    finally:
        visit.close()


# --- a phone-width page (issue 34) ---------------------------------------------------

# Measured against documentElement.clientWidth: with is_mobile, Chromium widens
# window.innerWidth to fit a page that overflows, which would hide the overflow.
# "widest" names where the overflow starts: the element past the right edge whose parent
# is not, outside any box that scrolls or clips it and not fixed to the screen (the
# off-canvas sidebars). "cut" lists formulas wider than a box that hides, instead of
# scrolls, what overflows it.
_SIDEWAYS_JS = """() => {
  const width = document.documentElement.clientWidth;
  const describe = e => {
    const name = typeof e.className === 'string' ? e.className.trim() : '';
    const text = (e.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60);
    return '<' + e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
      + (name ? '.' + name.split(/\\s+/).join('.') : '') + '> "' + text + '"';
  };
  const inPage = e => {
    for (let a = e; a && a !== document.body; a = a.parentElement) {
      const style = getComputedStyle(a);
      if (style.position === 'fixed') return false;
      if (a !== e && style.overflowX !== 'visible') return false;
    }
    return true;
  };
  const out = new Set();
  let widest = null;
  for (const e of document.body.querySelectorAll('*')) {
    const box = e.getBoundingClientRect();
    if (box.right <= width + 1 || (box.width === 0 && box.height === 0)) continue;
    if (!inPage(e)) continue;
    out.add(e);
    if (out.has(e.parentElement)) continue;
    if (!widest || box.right > widest.right)
      widest = {right: Math.round(box.right), element: describe(e)};
  }
  const cut = [];
  for (const m of document.querySelectorAll('mjx-math')) {
    let box = m.parentElement;
    const scrolls = e => getComputedStyle(e).overflowX;
    while (box && box !== document.body && scrolls(box) === 'visible')
      box = box.parentElement;
    if (!box || box === document.body) continue;
    const hides = ['hidden', 'clip'].includes(scrolls(box));
    const right = box.getBoundingClientRect().right;
    if (hides && m.getBoundingClientRect().right > right + 1)
      cut.push(describe(m.closest('mjx-container') || m));
  }
  return {width, innerWidth: window.innerWidth,
          scrollWidth: document.documentElement.scrollWidth, widest, cut};
}"""


def _sideways(page) -> dict:
    return page.evaluate(_SIDEWAYS_JS)


@pytest.mark.parametrize("name", PAGES)
def test_page_reads_on_a_phone_without_scrolling_sideways(server, browser, name):
    """At 390 px, long formulas, tables, code and figures scroll or wrap inside their
    own box (book/_ext/static/tinybert.css): the page itself never scrolls sideways."""
    visit = PageVisit(browser, f"{server}/{name}", phone=True)
    try:
        page = visit.page
        if page.evaluate("!!document.querySelector('script[src*=\"mathjax\"]')"):
            _wait_for_mathjax(page)
        page.evaluate("document.fonts.ready.then(() => true)")
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            page.wait_for_timeout(100)
            seen = _sideways(page)
            where = f"{name} ({theme} theme, {PHONE['width']} px)"
            assert seen["width"] == PHONE["width"], f"{where}: {seen['width']} px wide"
            problems = []
            if seen["scrollWidth"] > seen["width"]:
                widest = seen["widest"] or {"element": "no one element", "right": "?"}
                problems.append(f"the page scrolls sideways, {seen['scrollWidth']} px "
                                f"wide; widest: {widest['element']} reaching "
                                f"{widest['right']} px")
            if seen["cut"]:
                problems.append(f"formulas cut off: {seen['cut']}")
            assert not problems, f"{where}: " + "; ".join(problems)
        if name.startswith("chapters/"):
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"phone_{name.replace('/', '_')}.png"))
        assert visit.outside == [], f"requests left the machine: {visit.outside}"
    finally:
        visit.close()


def test_the_phone_check_names_what_scrolls_sideways(browser, tmp_path):
    """The harness itself: an unbreakable line is named, a formula cut off by a box that
    hides its overflow is caught, and what scrolls inside its own box is left alone."""
    head = ('<html><head><meta name="viewport" content="width=device-width"></head>'
            "<body>")
    inside = ('<div style="overflow-x: auto"><div style="width: 900px">scrolls</div>'
              '</div><span style="display: inline-flex; max-width: 100%; '
              'overflow: hidden"><mjx-container><mjx-math style="display: '
              'inline-block; width: 600px">x</mjx-math></mjx-container></span>')
    long_line = ('<p><code id="too-wide" style="white-space: nowrap">' + "a." * 80
                 + "</code></p>")
    (tmp_path / "wide.html").write_text(head + inside + long_line + "</body></html>")
    (tmp_path / "fits.html").write_text(head + "<p>Fits.</p></body></html>")
    with serve(tmp_path) as url:
        for page_name in ("wide.html", "fits.html"):
            visit = PageVisit(browser, f"{url}/{page_name}", phone=True)
            try:
                seen = _sideways(visit.page)
            finally:
                visit.close()
            assert seen["width"] == PHONE["width"]
            if page_name == "wide.html":
                assert seen["scrollWidth"] > PHONE["width"], seen
                assert seen["widest"]["element"].startswith("<code#too-wide>"), seen
                assert len(seen["cut"]) == 1, seen
                assert seen["cut"][0].startswith("<mjx-container"), seen
            else:
                assert seen["scrollWidth"] == PHONE["width"], seen
                assert seen["widest"] is None and seen["cut"] == [], seen
