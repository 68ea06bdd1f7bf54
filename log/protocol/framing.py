"""Size-prefixed frames and the request/response headers (sans-IO).

Every Kafka message travels in a frame: an int32 size, then that many bytes. A request frame
holds a request header then the body; a response frame a response header then the body.

    frame            size int32 (bytes that follow; negative or > max_frame_bytes: close)
    request header   v0: api_key int16, api_version int16, correlation_id int32
                     v1: + client_id nullable string (int16 length, -1 = null)
                     v2: v1 + tagged fields (uvarint count...); client_id stays an int16-length
                         string even though v2 is flexible, so that any broker can read the
                         header of an ApiVersions request at a version it does not know
    response header  v0: correlation_id int32
                     v1: v0 + tagged fields

A request uses header v2 when its API version is flexible, else v1; a response header v1 when
flexible, else v0, except ApiVersions responses, which always use v0 (KIP-511: a client reads
the header before knowing which version the broker answered with).

`FrameDecoder` is fed bytes in any chunking and returns whole frames, each its own
`bytearray`: bodies keep zero-copy `memoryview`s into it, and those are writable, so the broker
can patch a batch's baseOffset/partitionLeaderEpoch in place in the request it received.
A large frame (DIRECT_READ_MIN_BYTES or more, a big produce request) can instead be read
straight into its own buffer: `read_buffer()` gives the driver the rest of it to `recv_into`,
`filled(count)` says how much arrived. The kernel's copy is then the only one, where fed
bytes are copied into the receive buffer and again into the frame.
"""

from __future__ import annotations

import dataclasses
import struct

from log.common.errors import InvalidFrameError, InvalidRequestError
from log.protocol.schema import skip_tagged_fields

SIZE = struct.Struct(">i")
_HEADER_PREFIX = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_CORRELATION_ID = struct.Struct(">i")

API_VERSIONS_KEY = 18
# Kafka's socket.request.max.bytes default (100 MiB); a broker normally configures less.
DEFAULT_MAX_FRAME_BYTES = 104_857_600
# Compact the receive buffer once this many consumed bytes sit in front of it.
_COMPACT_AFTER_BYTES = 1 << 16
# Frames at least this large may be read straight into their own buffer (read_buffer).
DIRECT_READ_MIN_BYTES = 1 << 16


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def response_header_version(api_key: int, flexible: bool) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


def read_request_header(
    frame: memoryview | bytes, flexible: bool | None = None
) -> tuple[RequestHeader, int]:
    """Parse header v1 (v2 when `flexible`); return (header, position of the body).

    With `flexible=None` only the v1 part is read: the caller looks the API version up,
    then calls `skip_header_tags` if that version is flexible.
    """
    if len(frame) < _HEADER_PREFIX.size:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id, length = _HEADER_PREFIX.unpack_from(frame, 0)
    position = _HEADER_PREFIX.size
    if length == -1:
        client_id = None
    elif length < 0 or position + length > len(frame):
        raise InvalidRequestError(f"bad client_id length {length}")
    else:
        try:
            client_id = str(frame[position : position + length], "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("client_id is not UTF-8") from None
        position += length
    if flexible:
        position = skip_tagged_fields(frame, position)
    return RequestHeader(api_key, api_version, correlation_id, client_id), position


def skip_header_tags(frame: memoryview | bytes, position: int) -> int:
    return skip_tagged_fields(frame, position)


def encode_request_header(header: RequestHeader, flexible: bool) -> bytes:
    client_id = None if header.client_id is None else header.client_id.encode("utf-8")
    parts = [
        _HEADER_PREFIX.pack(
            header.api_key,
            header.api_version,
            header.correlation_id,
            -1 if client_id is None else len(client_id),
        )
    ]
    if client_id is not None:
        parts.append(client_id)
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    header = _CORRELATION_ID.pack(correlation_id)
    return header + b"\x00" if header_version >= 1 else header


def read_response_header(frame: memoryview | bytes, header_version: int) -> tuple[int, int]:
    """Return (correlation_id, position of the body)."""
    if len(frame) < 4:
        raise InvalidRequestError("response shorter than its header")
    (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
    position = 4
    if header_version >= 1:
        position = skip_tagged_fields(frame, position)
    return correlation_id, position


def frame(parts: list) -> list:
    """Prefix a list of byte parts with their total size (in place); return it."""
    parts.insert(0, SIZE.pack(sum(len(part) for part in parts)))
    return parts


class FrameDecoder:
    """Reassembles size-prefixed frames from a byte stream, in any chunking."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        assert max_frame_bytes > 0
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # consumed bytes at the front of _buffer
        # a large frame being read into its own buffer (read_buffer), and its bytes so far;
        # while it is set, _buffer holds only bytes fed after the frame's end
        self._frame: bytearray | None = None
        self._filled = 0

    @property
    def buffered_bytes(self) -> int:
        direct = 0 if self._frame is None else 4 + self._filled
        return direct + len(self._buffer) - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        frame = self._frame
        if frame is not None and self._filled < len(frame):  # the frame's rest goes in place
            count = min(len(data), len(frame) - self._filled)
            frame[self._filled : self._filled + count] = data[:count]
            self._filled += count
            data = data[count:]
        if data:
            self._buffer += data

    def read_buffer(self) -> memoryview | None:
        """The rest of the frame being received, to read into directly (then `filled`), if
        its size is known and at least DIRECT_READ_MIN_BYTES; else None: read and `feed`.
        The first call moves the frame's bytes received so far into the frame's own buffer
        (the frame size is checked as next_frame checks it)."""
        frame = self._frame
        if frame is None:
            available = len(self._buffer) - self._start
            if available < 4:
                return None
            (size,) = SIZE.unpack_from(self._buffer, self._start)
            if size < DIRECT_READ_MIN_BYTES or size > self.max_frame_bytes:
                return None
            if available >= 4 + size:
                return None  # complete already
            frame = self._frame = bytearray(size)
            self._filled = available - 4
            frame[: self._filled] = self._buffer[self._start + 4 :]
            self._buffer.clear()
            self._start = 0
        if self._filled == len(frame):
            return None
        return memoryview(frame)[self._filled :]

    def filled(self, count: int) -> None:
        """`count` bytes were read into the view read_buffer() returned."""
        assert self._frame is not None and 0 <= count <= len(self._frame) - self._filled
        self._filled += count

    @property
    def pending_frame_bytes(self) -> int:
        """Bytes (size prefix included) of the frame being received, once its size is known
        and while it is incomplete; 0 otherwise."""
        if self._frame is not None:
            return 0 if self._filled == len(self._frame) else 4 + len(self._frame)
        available = len(self._buffer) - self._start
        if available < 4:
            return 0
        (size,) = SIZE.unpack_from(self._buffer, self._start)
        if size < 0 or available >= 4 + size:
            return 0
        return 4 + size

    def next_frame(self) -> bytearray | None:
        """The next whole frame (without its size), or None until more bytes arrive.

        Raises InvalidFrameError on a negative or oversized size: the stream cannot be
        resynchronised, so the connection must close.
        """
        frame = self._frame
        if frame is not None:
            if self._filled < len(frame):
                return None
            self._frame = None  # whole: it is the frame's own buffer already, no copy
            return frame
        available = len(self._buffer) - self._start
        if available < 4:
            return None
        (size,) = SIZE.unpack_from(self._buffer, self._start)
        if size < 0 or size > self.max_frame_bytes:
            raise InvalidFrameError(f"frame size {size} outside [0, {self.max_frame_bytes}]")
        if available < 4 + size:
            return None
        begin = self._start + 4
        payload = self._buffer[begin : begin + size]  # a copy: the frame's own bytearray
        self._start = begin + size
        if self._start == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        elif self._start >= _COMPACT_AFTER_BYTES:
            del self._buffer[: self._start]
            self._start = 0
        return payload

    def frames(self, data: bytes | bytearray | memoryview = b"") -> list[bytearray]:
        """Feed `data` and return every frame now complete."""
        if data:
            self.feed(data)
        found = []
        while (payload := self.next_frame()) is not None:
            found.append(payload)
        return found
