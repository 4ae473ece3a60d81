"""The documentation stays honest: every relative link reaches a file and, with a #anchor, one of its headings
(GitHub's rule); the README fits on a screen; no page installs the wrong distribution (PyPI's `fastrl` is another
project: this one is `fastrl-engine`)."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+).*?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
WRONG_INSTALL = re.compile(r"pip install\s+(?:-U\s+|--upgrade\s+)?['\"]?fastrl(?![-\w])")


def prose_lines(path):
    """The file's lines outside fenced code blocks, with their numbers."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor of a heading's text: markup and punctuation dropped (but - and _), lowercase, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays, its target goes
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, found = {}, set()
        for _, line in prose_lines(path):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        _anchors[path] = found
    return _anchors[path]


def links(path):
    for number, line in prose_lines(path):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            yield number, target


def test_the_docs_are_found():
    assert ROOT / "README.md" in DOCS and ROOT / "docs" / "index.md" in DOCS


def test_the_anchor_rule():
    assert slug("`pong_gpu`: a GPU config at 27.8K frames/s, Pong 18 in 68 s") == (
        "pong_gpu-a-gpu-config-at-278k-framess-pong-18-in-68-s"
    )
    assert slug("Weights & Biases") == "weights--biases"
    assert slug("A late cooldown that leaves the fast seeds' bits alone") == (
        "a-late-cooldown-that-leaves-the-fast-seeds-bits-alone"
    )


def test_every_relative_link_reaches_a_file_and_a_heading():
    broken = []
    for doc in DOCS:
        for number, target in links(doc):
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            where = f"{doc.relative_to(ROOT)}:{number}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor.lower() not in anchors(dest):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_index_lists_every_page():
    index = ROOT / "docs" / "index.md"
    listed = {(index.parent / target.partition("#")[0]).resolve() for _, target in links(index)}
    missing = [page.name for page in sorted((ROOT / "docs").glob("*.md")) if page != index and page not in listed]
    assert not missing, f"docs/index.md, the one index, does not link {missing}"


def test_the_readme_fits_on_a_screen():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 100, f"README.md has {len(lines)} lines; at most 100 (the rest belongs in docs/)"


def test_no_doc_installs_pypis_other_fastrl():
    wrong = [
        f"{doc.relative_to(ROOT)}:{number}: {line.strip()}"
        for doc in DOCS
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if WRONG_INSTALL.search(line)
    ]
    assert not wrong, "the distribution is fastrl-engine (pip install 'fastrl-engine[extra]'):\n" + "\n".join(wrong)
