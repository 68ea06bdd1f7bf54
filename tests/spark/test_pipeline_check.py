"""spark/pipeline.py's delivery check (what `make demo` reports as "exactly once"): a duplicate
or a missing row is counted from the data and fails the check, so the demo's line cannot be
printed blindly. Runs on the shared local SparkSession; no cluster needed."""

from __future__ import annotations

from spark.pipeline import Verification, duplicates_and_missing


def _written(session, values: list[str]):
    return session.createDataFrame([(v,) for v in values], "value string")


def _read(session, values: list[bytes]):
    return session.createDataFrame([(v,) for v in values], "value binary")


def test_counts_duplicates_and_missing_rows(session):
    written = _written(session, ["a", "b", "b", "c"])
    assert duplicates_and_missing(written, _read(session, [b"a", b"b", b"b", b"c"])) == (0, 0)
    # "a" read twice, one of the two "b" and the "c" lost, and a row never written read once
    read = _read(session, [b"a", b"a", b"b", b"zz"])
    assert duplicates_and_missing(written, read) == (2, 2)


def test_only_a_clean_count_is_called_exactly_once():
    clean = Verification("d", 1, True, written=3, read=3, partitions={0: ((3, 9), (3, 9))})
    assert clean.ok and "delivery: exactly once" in clean.delivery_line()
    for broken in (
        Verification("d", 1, True, written=3, read=4, duplicates=1,
                     partitions={0: ((3, 9), (4, 12))}),
        Verification("d", 1, True, written=3, read=2, missing=1,
                     partitions={0: ((3, 9), (2, 6))}),
        # a lost row and a duplicate that cancel out in the partition's count
        Verification("d", 1, True, written=3, read=3, duplicates=1, missing=1,
                      partitions={0: ((3, 9), (3, 9))}),
    ):  # fmt: skip
        assert not broken.ok
        assert "NOT exactly once" in broken.delivery_line()
