"""jqjail: run untrusted jq filters over large JSON in the jqjail daemon's confined workers.

Standard library only. `Client` (blocking) and `AsyncClient` (asyncio) speak protocol v4 in
its JSON encoding; errors are `JqjailError` with the daemon's stable `code`."""

from ._wire import (
    CLIENT_NAME,
    Cost,
    ConnectionFailed,
    HideContent,
    End,
    HideCut,
    HideEnds,
    HideEntry,
    HidePage,
    Hidden,
    JqjailError,
    JsonPlace,
    LeftOut,
    Limits,
    RunReply,
)
from .aio import AsyncClient
from .client import Client
from .hide_buffer import HideBuffer, format_cut, format_ends, format_page
from .tools import definitions

#: The package's version (also in the hello it sends, as `jqjail-python/VERSION`).
__version__ = CLIENT_NAME.split("/", 1)[1]

__all__ = [
    "__version__",
    "AsyncClient",
    "Client",
    "ConnectionFailed",
    "Cost",
    "End",
    "HideBuffer",
    "HideContent",
    "HideCut",
    "HideEnds",
    "HideEntry",
    "HidePage",
    "Hidden",
    "JqjailError",
    "JsonPlace",
    "LeftOut",
    "Limits",
    "RunReply",
    "definitions",
    "format_cut",
    "format_ends",
    "format_page",
]
