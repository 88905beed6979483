"""vkattn.Error and the mapping of the library's result codes onto it."""
from . import _lib


class Error(RuntimeError):
    """A vkattn call failed. `code` is the library's vkattn_result (0 when the
    Python layer refused the call itself), `name` its name
    ("VKATTN_ERROR_VULKAN"), and the message is the library's detail."""

    def __init__(self, message, code=0, name=None):
        super().__init__(message)
        self.code = code
        self.name = name or ("VKATTN_ERROR_INVALID_ARGUMENT" if code == 0 else None)


class InvalidInput(Error, ValueError):
    """Bad input: an invalid argument, shapes that do not agree, an
    unsupported dtype, or an offset or size outside its buffer. Both a
    vkattn.Error and a ValueError."""


_INPUT_CODES = {_lib.ERROR_INVALID_ARGUMENT, _lib.ERROR_SHAPE_MISMATCH,
                _lib.ERROR_UNSUPPORTED_DTYPE, _lib.ERROR_OUT_OF_RANGE}


def bad(message):
    """An error the Python layer detects before calling the library."""
    return InvalidInput(message, 0, "VKATTN_ERROR_INVALID_ARGUMENT")


def check(code, detail=""):
    """Raises the Error for a nonzero vkattn_result."""
    if code == _lib.SUCCESS:
        return
    name = _lib.lib.vkattn_result_name(code).decode()
    text = _lib.lib.vkattn_result_message(code).decode()
    message = "%s: %s" % (name, detail) if detail else "%s: %s" % (name, text)
    cls = InvalidInput if code in _INPUT_CODES else Error
    raise cls(message, code, name)
