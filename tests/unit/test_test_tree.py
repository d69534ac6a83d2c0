"""The test tree is as docs/architecture.md and CONTRIBUTING.md say: tests/unit mirrors the packages,
and the folder of a test gives its markers."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FOLDER_MARKERS, folder_markers
from tests.support.xdist_groups import ONE_AT_A_TIME, group_of

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "tests" / "unit"
# pyproject.toml's package-dir: the folder of each top package of aeron_spark.
PACKAGE_FOLDERS = {"archive": REPO / "archive", "connector": REPO / "connector",
                   "driver_integration": REPO / "driver_integration"}
# Folders of scripts (no package) whose Python helpers have unit tests: tools/java_for_spark.py.
SCRIPT_FOLDERS = {"tools": REPO / "tools"}


def test_every_folder_of_unit_tests_is_the_folder_of_a_package() -> None:
    test_folders = {path.parent for path in UNIT.rglob("test_*.py")} - {UNIT}
    not_packages = []
    for folder in sorted(test_folders):
        top, *below = folder.relative_to(UNIT).parts
        if top in SCRIPT_FOLDERS and not below:
            continue
        source = PACKAGE_FOLDERS.get(top, REPO / "missing").joinpath(*below)
        if not (source / "__init__.py").exists():
            not_packages.append(str(folder.relative_to(REPO)))
    assert not_packages == []


def test_the_folders_with_markers_exist_and_a_test_file_gets_its_folders_markers() -> None:
    assert all((REPO / "tests" / folder).is_dir() for folder in FOLDER_MARKERS)
    assert folder_markers(REPO / "tests" / "cluster" / "test_cluster_layout.py") == ("cluster", "spark", "integration")
    assert folder_markers(REPO / "tests" / "integration" / "driver" / "test_pub_sub.py") == ("integration",)
    assert folder_markers(Path(__file__)) == ()
    assert folder_markers(REPO / "bench" / "scaling.py") == ()


def test_every_spark_test_and_every_namespace_test_runs_one_at_a_time_under_xdist() -> None:
    """./run-tests' two workers never run two of these at once: a test that runs Spark (its folder's
    markers say so) or uses network namespaces (tests/support/netns.py: fixed ports) is in the
    one-at-a-time group; any other test is in its file's group."""
    assert group_of("tests/cluster/test_cluster_layout.py::test_scenario[cluster-batch_read]", REPO) == ONE_AT_A_TIME
    assert group_of("tests/spark/test_sink_failures.py::test_x", REPO) == ONE_AT_A_TIME
    assert group_of("tests/integration/cli/test_cli_remote_netns.py::test_x", REPO) == ONE_AT_A_TIME
    assert group_of("tests/integration/driver/test_pub_sub.py::test_x[1]", REPO) == "tests/integration/driver/test_pub_sub.py"
