"""A directory for the PYTHONPATH of Spark's Python workers: its sitecustomize.py makes them
import the installed, compiled pyspark rather than pyspark.zip (the module says why)."""

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
