"""`HideBuffer`: the per-turn paginator of oversized tool outputs, backed by the daemon's
store, with the `hide_next`, `hide_jump` and `hide_search` tools (as the Rust crate's)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ._wire import HideCut, HideEntry, Hidden, JqjailError
from .client import Client

TOOL_OUTPUT_KIND = "tool_output"


def format_cut(cut: HideCut) -> str:
    """A page as the model sees it: the hint (page 1), a header, the text, an end marker."""
    out = ""
    if cut.preface:
        out += cut.preface + "\n"
    end = cut.offset + len(cut.content)
    out += f"[HIDE id={cut.hide_id} page={cut.page}/{cut.total_pages} bytes {cut.offset}..{end} of {cut.size}]\n"
    out += cut.text
    out += f"\n[END page {cut.page}/{cut.total_pages}]"
    return out


class HideBuffer:
    """Remembers the latest hide and, per hide, the last page served, so `hide_next` reads
    on. The pages stay on the daemon's disk."""

    def __init__(self, client: Client, page_size: int = 16_384):
        self.client = client
        self.page_size = page_size
        self.latest: Optional[Tuple[str, int]] = None
        self._cursors: Dict[str, int] = {}

    def store(self, content: "str | bytes", source: str = "") -> HideEntry:
        entry = self.client.hide_put(content, kind=TOOL_OUTPUT_KIND, source=source)["entry"]
        self.latest = (entry.id, entry.size)
        self._cursors.pop(entry.id, None)
        return entry

    def take_over(self, hidden: Hidden) -> None:
        """Makes a run's hidden output (`Client.run(..., on_oversize="hide")`) the latest
        hide. Its page 1 counts as served when it was cut at this buffer's page size (`next()`
        goes on to page 2); cut at another size, `next()` serves page 1 again at this buffer's
        size, rather than skip or repeat bytes."""
        self.latest = (hidden.entry.id, hidden.entry.size)
        self._cursors.pop(hidden.entry.id, None)
        if hidden.first.page_size == self.page_size:
            self._cursors[hidden.entry.id] = hidden.first.page

    def needs_paging(self) -> bool:
        return self.latest is not None and self.latest[1] > self.page_size

    def first_cut(self) -> HideCut:
        return self._serve(self._pick(None), 1, True)

    def next(self, hide_id: Optional[str] = None) -> HideCut:
        hide_id = self._pick(hide_id)
        return self._serve(hide_id, self._cursors.get(hide_id, 0) + 1, False)

    def cut(self, hide_id: str, page: int) -> HideCut:
        return self._serve(hide_id, page, False)

    def search(self, hide_id: str, query: str, ignore_case: bool = False) -> Optional[HideCut]:
        found = self.client.hide_search(hide_id, query, ignore_case=ignore_case, page_size=self.page_size, max_matches=1)
        if not found["matches"]:
            return None
        return self._serve(hide_id, int(found["matches"][0]["page"]), False)

    def call_tool(self, name: str, args: Mapping[str, Any]) -> str:
        """Answers a paging tool call with text for the model; failures as `error: CODE: …`."""
        hide_id = args.get("hide_id")
        try:
            if name == "hide_next":
                return format_cut(self.next(hide_id))
            if name == "hide_jump":
                page = args.get("page")
                if not isinstance(page, int) or isinstance(page, bool) or page < 1:
                    return "error: hide_jump needs a positive integer `page`"
                return format_cut(self.cut(self._pick(hide_id), page))
            if name == "hide_search":
                query = args.get("query")
                if not isinstance(query, str):
                    return "error: hide_search needs a string `query`"
                hide_id = self._pick(hide_id)
                cut = self.search(hide_id, query, bool(args.get("ignore_case", False)))
                if cut is None:
                    return f"Not found: {query!r} does not occur in hide {hide_id}."
                return f"Found {query!r} on page {cut.page}:\n{format_cut(cut)}"
            return f"error: {name} is not a hide tool"
        except JqjailError as e:
            return f"error: {e.code}: {e.message}"

    def _serve(self, hide_id: str, page: int, hint: bool) -> HideCut:
        cut = self.client.hide_cut(hide_id, page, self.page_size, hint)
        self._cursors[cut.hide_id] = cut.page
        return cut

    def _pick(self, hide_id: Optional[str]) -> str:
        if hide_id is not None:
            return hide_id
        if self.latest is None:
            raise JqjailError("NOT_FOUND", "no hide was stored or loaded in this buffer yet")
        return self.latest[0]
