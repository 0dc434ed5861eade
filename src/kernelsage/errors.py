"""The library's exceptions: one base class, messages that name what is wrong and what to do."""


class KernelsageError(Exception):
    """Base class of every error kernelsage raises on purpose (an expected failure, not a bug)."""


class ConfigurationError(KernelsageError):
    """A setting, argument or input file is invalid."""


class ClusterError(KernelsageError):
    """The Ray cluster lost what a command needed (a node, a worker, an actor) past Ray's retries."""


class DatabaseError(KernelsageError):
    """The memory database cannot be reached or lacks what kernelsage needs."""


class NamespaceError(KernelsageError):
    """A memory namespace is missing, exists already, or is used inconsistently."""


class EmbeddingDimensionError(NamespaceError):
    """A vector's dimension differs from the one fixed for its namespace."""


class ItemError(KernelsageError):
    """A new memory item is malformed or too large (the message names the item and the limit)."""


class ReadOnlyMemoryError(KernelsageError):
    """An update was attempted on a memory opened read-only."""


class EpisodeError(KernelsageError):
    """An episode record is inconsistent (e.g. adoption for an item that was never shown)."""


class TransferFormatError(KernelsageError):
    """An exported memory file is malformed."""


class ModelError(KernelsageError):
    """The chat model cannot be built or called (bad name, missing key, authentication, bad request)."""


class ModelCallError(ModelError):
    """One model call failed in a way its episode can absorb (the endpoint gave up after retries, rejected
    this request, answered garbage): the round is recorded with the reason and the stream goes on.
    A plain `ModelError` (no key, authentication, unknown model) stops the stream: every call would fail."""


class ContextOverflowError(ModelCallError):
    """The request does not fit the model's context window: shrink the prompt and ask again."""


class CassetteMissError(ModelError):
    """A replayed model was asked something its recording does not hold."""


class ParseError(KernelsageError):
    """The model's answer does not follow the required format; the message says what is wrong."""


class TaskLoadError(KernelsageError):
    """A task file or folder is malformed (the message names the file and what is wrong)."""


class UnknownTaskError(KernelsageError):
    """A task id is not in the suite that was searched."""


class BackendError(KernelsageError):
    """A kernel backend cannot do its job (unknown backend, missing compiler, worker failure)."""


class EmbeddingValueError(EmbeddingDimensionError):
    """A vector is not one flat sequence of real numbers (text, complex or boolean values, a nested list)."""


class QueryError(KernelsageError):
    """A retrieval query is malformed: its text is not valid Unicode or holds a NUL character."""
