"""Lists the packages below the three mapped code folders (pyproject.toml maps the roots), and builds
the SBE decoder's optional C helper (a machine without a C compiler installs without it: the decoder
then uses its numpy path)."""
import os

from setuptools import Extension, setup

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


# optional=True: a failed compile is a warning, not a failed install (connector/sbe/native_fields.py falls back).
SBE_FIXED_FIELDS = Extension("aeron_spark.connector.sbe._fixed_fields", sources=["connector/sbe/fixed_fields.c"],
                             extra_compile_args=["-O3"], optional=True)

setup(packages=discover_packages(), ext_modules=[SBE_FIXED_FIELDS])
