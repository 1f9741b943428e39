"""jqjail: run untrusted jq filters over large JSON in the jqjail daemon's confined workers.

Standard library only. `Client` (blocking) and `AsyncClient` (asyncio) speak protocol v2 in
its JSON encoding; errors are `JqjailError` with the daemon's stable `code`."""

from ._wire import (
    Cost,
    ConnectionFailed,
    HideContent,
    HideCut,
    HideEntry,
    Hidden,
    JqjailError,
    Limits,
    RunReply,
)
from .aio import AsyncClient
from .client import Client
from .hide_buffer import HideBuffer, format_cut
from .tools import definitions

__all__ = [
    "AsyncClient",
    "Client",
    "ConnectionFailed",
    "Cost",
    "HideBuffer",
    "HideContent",
    "HideCut",
    "HideEntry",
    "Hidden",
    "JqjailError",
    "Limits",
    "RunReply",
    "definitions",
    "format_cut",
]
