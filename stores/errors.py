"""Domain errors of the storage layer; their text tells the caller what to do next."""


class StoreError(Exception):
    """Base class: the message is safe and useful to show to an agent."""


class InvalidInput(StoreError):
    """An argument was rejected before anything was written."""


class NotFound(StoreError):
    """The addressed entry does not exist (or has expired)."""


class StoreBusy(StoreError):
    """Another process held the data directory's write lock for too long."""


class WriteFailed(StoreError):
    """The data directory refused a write (read-only, full, permissions): nothing was written."""


class StoreUnavailable(StoreError):
    """A store cannot be opened (read-only or damaged data directory); the text says which."""


class StoreUnreachable(StoreError):
    """The object store holding the data cannot be reached now. The write that hears this
    was not acknowledged; retrying it is safe (the same save again reinforces, never doubles)."""
