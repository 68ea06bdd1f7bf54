"""Kafka's RecordBatch v2 format.

batch.py        the construct specification (layout table, CRC coverage) and decoded dataclasses
batch_header.py the broker's hot-path 61-byte header view (struct), CRC check, in-place patches
reader.py       fast strict decoding of records (consumers, tools)
builder.py      encoding: build_batch, BatchBuilder (accumulator), build_batch_from_columns
control.py      control records (transaction markers)
compression.py  the codecs as Kafka clients put them on the wire
varint.py       zigzag varints
"""
