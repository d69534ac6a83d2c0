"""Lists the packages below the three mapped code folders (pyproject.toml maps the roots)."""
import os

from setuptools import setup

ROOTS = {"aeron_spark": "src/aeron_spark", "pyspark_aeron_archive": "src/pyspark_aeron_archive", "aeron_spark.archive": "archive",
         "aeron_spark.connector": "connector", "aeron_spark.driver_integration": "driver_integration"}


def discover_packages():
    packages = []
    for package, folder in ROOTS.items():
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
            if "__init__.py" in filenames:
                relative = os.path.relpath(dirpath, folder)
                packages.append(package if relative == "." else package + "." + relative.replace(os.sep, "."))
    return packages


setup(packages=discover_packages())
