"""docs/options.md's option tables, generated from the option spec (option_specs.json).

A table is a marked region of the Markdown file::

    <!-- option-table side=source options=recordingIds,channel columns=accepted,default,meaning -->
    ...generated rows...
    <!-- /option-table -->

``side``: source, sink, jvm-source or jvm-sink; ``options``: a comma list of names, ``*`` (every
option of the side), ``own`` (those the other Python side does not take), ``jvm-only`` (those no
Python side takes) or ``prefix:<p>``; ``columns``: any of ``modes`` (read / readStream, or write /
writeStream), ``jvm`` (whether the JVM side of a Python side takes it), ``default``, ``accepted``,
``meaning``. A selection without options renders as "(none)". Text outside the regions is the
docs' own prose.

``python -m aeron_spark.connector.option_docs [--check] [docs/options.md]`` rewrites the regions
(``--check``: exits 1 naming the file when they differ); tests/unit/connector/test_option_docs.py
asserts the committed file is up to date.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from aeron_spark.connector.option_spec import SIDES, OptionSpec, ReadMode, specs_for

DOCS_PATH = Path("docs/options.md")
_REGION = re.compile(r"(<!-- option-table (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /option-table -->)", re.DOTALL)
_PYTHON_SIDES = ("source", "sink")
_OTHER_PYTHON_SIDE = {"source": "sink", "sink": "source", "jvm-source": "sink", "jvm-sink": "source"}
_READ_WORDS = {ReadMode.BATCH: "read", ReadMode.STREAM: "readStream"}
_WRITE_WORDS = {ReadMode.BATCH: "write", ReadMode.STREAM: "writeStream"}
_COLUMNS = ("modes", "jvm", "default", "accepted", "meaning")
_SIZE_UNITS = (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10))
_DURATION_UNITS = (("h", 3_600_000), ("m", 60_000), ("s", 1000))


class OptionDocsError(ValueError):
    """A marked region asks for something the spec does not have."""


def shown_default(spec: OptionSpec) -> str:
    """The default as the docs show it: the spec's words for a run-time default, else the typed
    default in the form a user writes it (sizes with k/m/g/t, durations with s/m/h)."""
    if spec.default_text is not None:
        return spec.default_text
    default = spec.default
    if default is None:
        return "–"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, int) and spec.type in ("size", "duration"):
        units = _SIZE_UNITS if spec.type == "size" else _DURATION_UNITS
        for unit, factor in units:
            if default % factor == 0:
                return f"`{default // factor}{unit}`"
        return f"`{default}{'' if spec.type == 'size' else 'ms'}`"
    return f"`{default}`"


def _cell(text: str) -> str:
    """Spec text in a table cell: ``|`` would end the cell, ``<name>`` would read as an HTML tag."""
    return text.replace("|", "\\|").replace("<", "\\<")


def _selected(side: str, selection: str) -> tuple[OptionSpec, ...]:
    specs = specs_for(side)
    if selection == "*":
        return specs
    if selection == "own":
        return tuple(spec for spec in specs if not spec.accepted_by(_OTHER_PYTHON_SIDE[side]))
    if selection == "jvm-only":
        return tuple(spec for spec in specs if not any(spec.accepted_by(python) for python in _PYTHON_SIDES))
    if selection.startswith("prefix:"):
        return tuple(spec for spec in specs if spec.name.startswith(selection.removeprefix("prefix:")))
    by_name = {spec.name: spec for spec in specs}
    chosen = []
    for name in selection.split(","):
        if name not in by_name:
            raise OptionDocsError(f"option table: {name!r} is not an option of side {side}")
        chosen.append(by_name[name])
    return tuple(chosen)


def render_table(side: str, selection: str, columns: tuple[str, ...]) -> str:
    """The Markdown table (header, rule, one row per option) a region asks for."""
    if side not in SIDES:
        raise OptionDocsError(f"option table: side {side!r} is not one of {SIDES}")
    unknown = [column for column in columns if column not in _COLUMNS or (column == "jvm" and side not in _PYTHON_SIDES)]
    if unknown:
        raise OptionDocsError(f"option table: columns {unknown} are not among {_COLUMNS} (jvm: for source and sink)")
    selected = _selected(side, selection)
    if not selected:
        return "(none)\n"
    words = _READ_WORDS if side.endswith("source") else _WRITE_WORDS
    headers = {"modes": " | ".join(words[mode] for mode in ReadMode), "jvm": f"JVM {side}", "default": "default",
               "accepted": "accepted", "meaning": "meaning"}
    lines = ["| option | " + " | ".join(headers[column] for column in columns) + " |",
             "|---|" + "---|" * sum(2 if column == "modes" else 1 for column in columns)]
    for spec in selected:
        cells = [f"`{spec.name}`"]
        for column in columns:
            if column == "modes":
                cells += ["✓" if mode in spec.modes else "–" for mode in ReadMode]
            elif column == "jvm":
                cells.append("✓" if spec.accepted_by(f"jvm-{side}") else "–")
            elif column == "default":
                cells.append(_cell(shown_default(spec)))
            elif column == "accepted":
                cells.append(_cell(spec.accepted))
            else:
                cells.append(_cell(spec.help))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _arguments(text: str) -> dict[str, str]:
    arguments = dict(item.split("=", 1) for item in text.split())
    if set(arguments) != {"side", "options", "columns"}:
        raise OptionDocsError(f"option table: expected side=, options= and columns=, got {text!r}")
    return arguments


def regenerate(markdown: str) -> str:
    """The Markdown with every marked region's table generated afresh from the spec."""
    def table(match: re.Match[str]) -> str:
        arguments = _arguments(match.group("args"))
        body = render_table(arguments["side"], arguments["options"], tuple(arguments["columns"].split(",")))
        return match.group(1) + body + match.group(4)
    return _REGION.sub(table, markdown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", nargs="?", type=Path, default=DOCS_PATH, help="the Markdown file (docs/options.md)")
    parser.add_argument("--check", action="store_true", help="only report whether the tables are up to date")
    arguments = parser.parse_args(argv)
    text = arguments.path.read_text(encoding="utf-8")
    generated = regenerate(text)
    if generated == text:
        return 0
    if arguments.check:
        print(f"{arguments.path}: option tables differ from connector/option_specs.json; run "
              f"python -m aeron_spark.connector.option_docs {arguments.path}", file=sys.stderr)
        return 1
    arguments.path.write_text(generated, encoding="utf-8")
    print(f"{arguments.path}: option tables rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
