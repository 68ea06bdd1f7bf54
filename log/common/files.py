"""Making a directory's entries durable, for every floor that renames or creates files.

`fsync_directory(path)` fsyncs the directory so that a rename or create inside it survives a
crash. An I/O error (EIO, ENOSPC, ...) is raised as the OSError it is: a rename whose
directory did not reach the disk may be undone, so the caller treats it like a failed write.
Only a file system that cannot fsync directories at all (EINVAL, ENOTSUP) makes it a no-op:
there the rename's atomicity is all there is to have.
"""

from __future__ import annotations

import errno
import os

_CANNOT_FSYNC_DIRECTORIES = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


def fsync_directory(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _CANNOT_FSYNC_DIRECTORIES:
            raise
    finally:
        os.close(fd)
