"""docs/options.md's option tables are the ones the option spec generates (connector/option_docs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeron_spark.connector.option_docs import OptionDocsError, main, regenerate, render_table, shown_default
from aeron_spark.connector.option_spec import option_spec, specs_for

DOCS = Path(__file__).resolve().parents[3] / "docs" / "options.md"


def test_the_docs_tables_are_the_ones_the_spec_generates():
    text = DOCS.read_text(encoding="utf-8")
    assert regenerate(text) == text, (
        "docs/options.md's option tables differ from connector/option_specs.json: run "
        "python -m aeron_spark.connector.option_docs")


def test_every_option_of_both_python_sides_has_a_row_in_the_docs():
    text = DOCS.read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| `")}
    for side in ("source", "sink"):
        assert {f"`{spec.name}`" for spec in specs_for(side)} <= rows


def test_defaults_show_as_a_user_writes_them():
    assert shown_default(option_spec("maxBytesPerPartition")) == "`256m`"
    assert shown_default(option_spec("maxTriggerDelay")) == "`15m`"
    assert shown_default(option_spec("sink.termLength", "sink")) == "`16m`"
    assert shown_default(option_spec("failOnDataLoss")) == "`true`"
    assert shown_default(option_spec("archive.timeoutMs")) == "`10000`"
    assert shown_default(option_spec("recordingIds")) == "–"
    assert shown_default(option_spec("startingPositions")) == "latest (stream), earliest (batch)"


def test_a_table_escapes_cell_text_and_marks_modes_and_the_jvm_side():
    table = render_table("source", "aeron.driver,maxBytesPerTrigger", ("modes", "jvm", "accepted"))
    header, rule, driver, max_bytes = table.splitlines()
    assert header == "| option | read | readStream | JVM source | accepted |"
    assert rule == "|---|---|---|---|---|"
    assert driver == "| `aeron.driver` | ✓ | ✓ | – | auto \\| embedded \\| external |"
    assert max_bytes.startswith("| `maxBytesPerTrigger` | – | ✓ | ✓ |")


def test_own_selects_what_the_other_python_side_does_not_take():
    names = [line.split("|")[1].strip() for line in render_table("sink", "own", ("default",)).splitlines()[2:]]
    assert "`sink.id`" in names and "`channel`" in names and "`archive.timeoutMs`" not in names


def test_a_region_asking_for_an_unknown_option_or_column_fails_naming_it():
    with pytest.raises(OptionDocsError, match="'noSuchOption' is not an option of side source"):
        regenerate("<!-- option-table side=source options=noSuchOption columns=default -->\n<!-- /option-table -->")
    with pytest.raises(OptionDocsError, match="colour"):
        render_table("source", "*", ("colour",))


def test_the_command_rewrites_a_stale_table_and_check_reports_it(tmp_path, capsys):
    path = tmp_path / "options.md"
    path.write_text("intro\n<!-- option-table side=source options=path columns=default -->\nstale\n"
                    "<!-- /option-table -->\nprose\n", encoding="utf-8")
    assert main(["--check", str(path)]) == 1
    assert "differ" in capsys.readouterr().err
    assert main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == (
        "intro\n<!-- option-table side=source options=path columns=default -->\n| option | default |\n|---|---|\n"
        "| `path` | – |\n<!-- /option-table -->\nprose\n")
    assert main(["--check", str(path)]) == 0


def test_options_only_a_jvm_side_takes_get_tables_of_their_own():
    for side in ("jvm-source", "jvm-sink"):
        table = render_table(side, "jvm-only", ("modes", "default"))
        if table == "(none)\n":
            continue
        header, _, *rows = table.splitlines()
        assert header.startswith("| option | read | readStream |" if side == "jvm-source" else "| option | write |")
        for row in rows:
            spec = option_spec(row.split("`")[1], side)
            assert not spec.accepted_by("source") and not spec.accepted_by("sink")
    with pytest.raises(OptionDocsError, match="jvm"):
        render_table("jvm-sink", "*", ("jvm",))
