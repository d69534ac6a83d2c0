"""The docs cite only what the repository holds: every repository path they name exists, every test
they name (``test_x.py``, ``path::test_name``) still exists, relative links resolve inside the
repository, and no doc points at a machine's own folders (``/work/...``, ``/root/...``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([*REPO.glob("docs/*.md"), *(REPO / name for name in ("README.md", "CONTRIBUTING.md", "bench/README.md"))])

# A path from the repository root: one of its top folders, then path characters, ending on a name
# character (so a sentence's full stop or a trailing slash is not part of it). Not preceded by a
# path character: `/var/lib/archive/x` or `.cache/bench/` are not repository paths.
TOP_FOLDERS = ("tests", "archive", "connector", "driver_integration", "bench", "tools", "docs", "examples", "src")
# A test name may be cut short with "…": then some test's name starts with it.
REPO_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP_FOLDERS) + r")/[\w./-]*\w)(?:::(\w+…?))?")
# A test file named without its folder, possibly with one of its tests.
TEST_FILE = re.compile(r"(?<![\w./-])(test_\w+\.py)(?:::(\w+…?))?")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#([^)]*))?\)")
# Folders of one machine, not of the repository (scratch folders like /tmp in example commands are fine).
MACHINE_PATH = re.compile(r"(?<![\w.-])((?:/work|/root|/home|/Users)/[^\s`)\"']*)")
PARENT_PATH = re.compile(r"(?<!\]\()(?<![\w./-])((?:\.\./)+[\w./-]*\w)")


def _docs() -> list[Path]:
    return [doc for doc in DOCS if doc.exists()]


def _test_defined(test_file: Path, name: str) -> bool:
    whole_name = r"\w*" if name.endswith("…") else r"\b"
    name = re.escape(name.rstrip("…"))
    return re.search(rf"^\s*(?:async\s+)?def {name}{whole_name}|^class {name}{whole_name}",
                     test_file.read_text(), re.M) is not None


def heading_anchors(markdown: str) -> set[str]:
    """The anchors a Markdown renderer (GitHub's rule) gives the headings of ``markdown``."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def _inside_repo(path: Path) -> bool:
    return path.resolve().is_relative_to(REPO)


def missing_references(doc: Path, text: str) -> list[str]:
    """What ``text``, the content of ``doc``, cites that is not in the repository, one line each."""
    where = doc.relative_to(REPO)
    problems: list[str] = []
    test_basenames = {path.name: path for path in (REPO / "tests").rglob("test_*.py")}
    for match in REPO_PATH.finditer(text):
        cited, test_name = match.group(1), match.group(2)
        target = REPO / cited
        if not target.exists():
            problems.append(f"{where}: {cited} does not exist")
        elif test_name and not _test_defined(target, test_name):
            problems.append(f"{where}: {cited}::{test_name}: no such test")
    for match in TEST_FILE.finditer(text):
        basename, test_name = match.group(1), match.group(2)
        found = test_basenames.get(basename)
        if found is None:
            problems.append(f"{where}: no test file {basename} under tests/")
        elif test_name and not _test_defined(found, test_name):
            problems.append(f"{where}: {basename}::{test_name}: no such test")
    for match in MARKDOWN_LINK.finditer(text):
        link = match.group(1)
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        target = doc.parent / link
        if not _inside_repo(target):
            problems.append(f"{where}: link {link} leaves the repository")
        elif not target.exists():
            problems.append(f"{where}: link {link} does not exist")
        elif match.group(2) and target.suffix == ".md" and match.group(2) not in heading_anchors(target.read_text()):
            problems.append(f"{where}: link {link}#{match.group(2)}: no such heading")
    for match in PARENT_PATH.finditer(text):
        cited = match.group(1)
        target = doc.parent / cited
        if not _inside_repo(target) or not target.exists():
            problems.append(f"{where}: {cited} is not a path in the repository")
    for match in MACHINE_PATH.finditer(text):
        problems.append(f"{where}: {match.group(1)} is a folder of one machine, not of the repository")
    return problems


@pytest.mark.parametrize("doc", _docs(), ids=lambda doc: str(doc.relative_to(REPO)))
def test_every_path_and_test_a_doc_cites_is_in_the_repository(doc: Path) -> None:
    problems = missing_references(doc, doc.read_text())
    assert not problems, "\n".join(problems)


def test_a_missing_path_a_missing_test_and_a_machine_folder_are_each_reported() -> None:
    existing = "tests/unit/test_docs_references.py"
    text = (f"`{existing}::test_every_path_and_test_a_doc_cites_is_in_the_repository` is here; "
            f"`{existing}::test_gone` is not; `tests/unit/test_gone.py`, `test_nowhere.py`, "
            "see /work/shared/notes.md and ../shared/notes.md, [a link](missing.md), [up](../README.md), "
            "[a heading](performance.md#performance), [no heading](performance.md#nowhere).")
    # As if docs/architecture.md said it: relative links resolve from docs/.
    problems = missing_references(REPO / "docs" / "architecture.md", text)
    assert problems == [
        f"docs/architecture.md: {existing}::test_gone: no such test",
        "docs/architecture.md: tests/unit/test_gone.py does not exist",
        "docs/architecture.md: no test file test_nowhere.py under tests/",
        "docs/architecture.md: link missing.md does not exist",
        "docs/architecture.md: link performance.md#nowhere: no such heading",
        "docs/architecture.md: ../shared/notes.md is not a path in the repository",
        "docs/architecture.md: /work/shared/notes.md is a folder of one machine, not of the repository",
    ]
