# SPDX-License-Identifier: MIT
"""The exceptions envlog raises: one per error code of include/envlog.h.

Every one derives from :class:`envlog.Error` and carries the library's
``code`` (an int, the ``envlog_err`` value), ``name`` (what
``envlog_strerror()`` calls it) and ``detail`` (``envlog_errmsg()``: the
file, offset and cause).  Where a builtin exception means the same thing,
the class derives from it too, so ``except OSError`` still catches a failed
system call and ``except ValueError`` a bad argument.
"""


class Error(Exception):
    """An error the envlog library returned."""

    def __init__(self, what, code=None, name=None, detail=None):
        self.what = what
        self.code = code
        self.name = name
        self.detail = detail or ""
        text = what
        if detail:
            text = f"{what}: {detail}"
        if name:
            text = f"{text} ({name})"
        super().__init__(text)

    def __reduce__(self):
        return (type(self), (self.what, self.code, self.name, self.detail))


class TruncatedError(Error):
    """ENVLOG_TRUNCATED: a torn tail; good data ends at an offset."""


class CorruptError(Error):
    """ENVLOG_CORRUPT: damage was found."""


class InvalidArgumentError(Error, ValueError):
    """ENVLOG_INVALID_ARG: the library refused an argument."""


class NoMemoryError(Error, MemoryError):
    """ENVLOG_NOMEM: memory could not be allocated."""


class IOError(Error, OSError):  # noqa: A001 - envlog.IOError, not the builtin
    """ENVLOG_IO: a system call failed."""


class NoSpaceError(IOError):
    """ENVLOG_NOSPACE: the file system is full."""


class FormatError(Error):
    """ENVLOG_FORMAT: not an environment, or a format this library does not know."""


class BadDataError(Error, ValueError):
    """ENVLOG_BAD_DATA: malformed input data (CBOR, names)."""


class NotFoundError(Error, LookupError):
    """ENVLOG_NOT_FOUND: no such session, entry or file."""


class BusyError(Error):
    """ENVLOG_BUSY: a lock is held by another writer."""


class TooBigError(Error, ValueError):
    """ENVLOG_TOO_BIG: a length beyond a documented limit."""


class UnavailableError(Error):
    """ENVLOG_UNAVAILABLE: an optional component (NVRTC, the driver) is missing."""


class PermissionDeniedError(Error, PermissionError):
    """ENVLOG_PERMISSION: access denied, or a symbolic link refused."""


class StateError(Error):
    """ENVLOG_WRONG_STATE: the call does not fit the handle's state."""


# The codes of envlog_err (include/envlog.h); the extension raises by these.
BY_CODE = {
    2: TruncatedError,
    3: CorruptError,
    4: InvalidArgumentError,
    5: NoMemoryError,
    6: IOError,
    7: NoSpaceError,
    8: FormatError,
    9: BadDataError,
    10: NotFoundError,
    11: BusyError,
    12: TooBigError,
    13: UnavailableError,
    14: PermissionDeniedError,
    15: StateError,
}
