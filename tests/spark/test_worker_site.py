"""spark/worker_site: Spark's Python workers import the installed, compiled pyspark instead of
pyspark.zip when the zip is the installed package's own, and keep Spark's path otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spark.worker_site import DIRECTORY

pytestmark = pytest.mark.spark

PROBE = (
    "import json, sys, pyspark, py4j; site = sys.modules.get('sitecustomize'); "
    "print(json.dumps([pyspark.__file__, py4j.__file__, getattr(site, '__file__', None), sys.path]))"
)


def _probe(*python_path: str) -> tuple[str, str, str | None, list[str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path))
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    pyspark_file, py4j_file, site_file, path = json.loads(out)
    return pyspark_file, py4j_file, site_file, path


def _spark_zips() -> tuple[str, str]:
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    (py4j_zip,) = lib.glob("py4j-*-src.zip")
    return str(lib / "pyspark.zip"), str(py4j_zip)


def test_the_installed_packages_own_zips_give_way():
    pyspark_zip, py4j_zip = _spark_zips()
    pyspark_file, py4j_file, site_file, path = _probe(pyspark_zip, py4j_zip, str(DIRECTORY))
    assert site_file == str(DIRECTORY / "sitecustomize.py")
    assert ".zip" not in pyspark_file and ".zip" not in py4j_file
    assert pyspark_zip not in path and py4j_zip not in path
    # without the directory Spark's order stands, which is what the directory is for
    pyspark_file, _py4j, _site, _path = _probe(pyspark_zip, py4j_zip)
    assert pyspark_file.startswith(pyspark_zip + os.sep)


def test_a_zip_of_another_spark_is_kept(tmp_path):
    """A Spark unpacked elsewhere (SPARK_HOME) may differ from the pip-installed one: its zip
    stays first and is what the worker imports."""
    pyspark_zip, py4j_zip = _spark_zips()
    other = tmp_path / "spark-home" / "python" / "lib"
    other.mkdir(parents=True)
    with zipfile.ZipFile(pyspark_zip) as src, zipfile.ZipFile(other / "pyspark.zip", "w") as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    copy = str(other / "pyspark.zip")
    pyspark_file, _py4j, _site, path = _probe(copy, py4j_zip, str(DIRECTORY))
    assert pyspark_file.startswith(copy + os.sep)
    assert path.index(copy) < path.index(str(DIRECTORY))


def test_the_sessions_workers_import_the_compiled_pyspark(session):
    def where(_rows):
        import pyspark

        yield pyspark.__file__

    (found,) = session.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert ".zip" not in found, found
    # The directory reached the workers through the JVM's environment, and this process's own
    # environment is as it was: the processes it starts later do not run the sitecustomize.
    assert str(DIRECTORY) not in os.environ.get("PYTHONPATH", "").split(os.pathsep)


def test_a_sitecustomize_further_down_the_path_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.ran_the_other_one = True\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(DIRECTORY), str(tmp_path)]))
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print(getattr(sys, 'ran_the_other_one', False))"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "True"
