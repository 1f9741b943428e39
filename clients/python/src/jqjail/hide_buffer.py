"""`HideBuffer`: the per-turn paginator of oversized tool outputs, backed by the daemon's
store, with the `hide_next`, `hide_jump` and `hide_search` tools (as the Rust crate's).

Pages are JSON pages (protocol 3): a JSON hide's pages end between values and each header
names the paths the page holds and the array it is in; text is paged in bytes.

The first answer (`first_answer`) is the hide's head and tail by default (protocol 4): its
beginning and its end, each half a page, and a line saying what lies between them; a reader
then knows, say, the main array's length from the first answer (`jqjail-bench --reader`,
BENCHMARKS.md). `HideBuffer(..., first="page")` shows page 1 instead."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ._wire import End, HideCut, HideEnds, HideEntry, HidePage, Hidden, JqjailError
from .client import Client

TOOL_OUTPUT_KIND = "tool_output"

#: The smallest page size a head and tail is cut at (two ends of the smallest page).
MIN_ENDS_PAGE_SIZE = 128


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


def format_page(page: HidePage) -> str:
    """A page as the model sees it: the hint, a header with the paths a JSON page holds, the
    text, an end marker."""
    out = ""
    if page.preface:
        out += page.preface + "\n"
    end = page.offset + len(page.content)
    out += f"[HIDE id={page.hide_id} page={page.page}/{page.total_pages} bytes {page.offset}..{end} of {page.size}"
    if page.json is not None:
        out += f" · {page.json.first} … {page.json.last}"
        if page.json.array is not None:
            out += f" · in {page.json.array['path']} ({page.json.array['length']} elements)"
    out += "]\n"
    out += page.text
    out += f"\n[END page {page.page}/{page.total_pages}]"
    return out


def format_ends(ends: HideEnds) -> str:
    """A head and tail as the model sees it: the hint, the head with a header naming its bytes
    and paths, a line for what is left out between (bytes, paths, the elements of one array),
    the tail with its header, an end marker (as the Rust crate's `format_ends`)."""

    def header(what: str, end: End) -> str:
        out = f"[HIDE id={ends.hide_id} {what}: bytes {end.offset}..{end.offset + end.length} of {ends.size}"
        if end.json is not None:
            out += f" · {end.json.first} … {end.json.last}"
        return out + "]\n"

    out = (ends.preface + "\n") if ends.preface else ""
    out += header("head", ends.head) + ends.head_text
    left = ends.left_out
    if left is not None:
        out += f"\n[… left out: bytes {left.offset}..{left.offset + left.bytes} ({left.bytes} bytes)"
        if left.first is not None and left.last is not None:
            out += f" · {left.first} … {left.last}"
        if left.elements is not None:
            el = left.elements
            out += f" · elements {el['from']} to {el['to']} of {el['array']}, in whole or in part"
            if el.get("length") is not None:
                out += f" ({el['length']} elements)"
        out += " …]"
    if ends.tail is not None:
        out += "\n" + header("tail", ends.tail) + ends.tail_text
    out += f"\n[END head and tail of {ends.hide_id}; hide_next reads from page 1]"
    return out


class HideBuffer:
    """Remembers the latest hide and, per hide, the last page served, so `hide_next` reads
    on. The pages stay on the daemon's disk."""

    def __init__(self, client: Client, page_size: int = 16_384, pages: str = "json", first: str = "head_and_tail"):
        if first not in ("head_and_tail", "page"):
            raise ValueError(f"first is 'head_and_tail' or 'page', not {first!r}")
        self.client = client
        self.page_size = page_size
        self.pages = pages
        self.first = first
        self.latest: Optional[Tuple[str, int]] = None
        self._cursors: Dict[str, int] = {}

    def store(self, content: "str | bytes", source: str = "") -> HideEntry:
        entry = self.client.hide_put(content, kind=TOOL_OUTPUT_KIND, source=source)["entry"]
        self.latest = (entry.id, entry.size)
        self._cursors.pop(entry.id, None)
        return entry

    def take_over(self, hidden: Hidden) -> None:
        """Makes a run's hidden output (`Client.run(..., on_oversize="hide")`) the latest
        hide. Its page 1 (a byte page at the daemon's page size) counts as served when it is
        this buffer's page 1: a byte page of the same size, or the whole hide in one page of that
        size (`next()` goes on to page 2); otherwise `next()` serves page 1 as this buffer cuts
        pages, rather than skip bytes."""
        self.latest = (hidden.entry.id, hidden.entry.size)
        self._cursors.pop(hidden.entry.id, None)
        if hidden.first.page_size == self.page_size and (self.pages == "bytes" or hidden.first.total_pages == 1):
            self._cursors[hidden.entry.id] = 1

    def needs_paging(self) -> bool:
        return self.latest is not None and self.latest[1] > self.page_size

    def first_cut(self) -> HidePage:
        return self._serve(self._pick(None), {"page": 1}, True)

    def first_answer(self, hide_id: Optional[str] = None) -> str:
        """The first answer of a hide (default: the latest) with the hint, as the model reads it:
        its head and tail (then `next()` reads page 1), or page 1 (then page 2), as the buffer
        was made. Pages under 128 bytes have no room for two ends: page 1 is shown."""
        hide_id = self._pick(hide_id)
        if self.first == "page" or self.page_size < MIN_ENDS_PAGE_SIZE:
            page = self._serve(hide_id, {"page": 1}, True)
            self.latest = (page.hide_id, page.size)
            return format_page(page)
        ends = self.client.hide_ends(hide_id, page_size=self.page_size, hint=True)
        self.latest = (ends.hide_id, ends.size)
        self._cursors.pop(ends.hide_id, None)
        return format_ends(ends)

    def next(self, hide_id: Optional[str] = None) -> HidePage:
        hide_id = self._pick(hide_id)
        return self._serve(hide_id, {"page": self._cursors.get(hide_id, 0) + 1}, False)

    def cut(self, hide_id: str, page: int) -> HidePage:
        return self._serve(hide_id, {"page": page}, False)

    def jump(self, hide_id: str, path: str) -> HidePage:
        """The JSON page holding the value at `path` (`$[17].labels`, `.[17].labels`)."""
        return self._serve(hide_id, {"path": path}, False)

    def search(self, hide_id: str, query: str, ignore_case: bool = False) -> Optional[HidePage]:
        found = self.client.hide_search(hide_id, query, ignore_case=ignore_case, page_size=self.page_size, max_matches=1)
        if not found["matches"]:
            return None
        # The search's page numbers are byte pages': the page is found by the match's offset.
        return self._serve(hide_id, {"offset": int(found["matches"][0]["offset"])}, False)

    def call_tool(self, name: str, args: Mapping[str, Any]) -> str:
        """Answers a paging tool call with text for the model; failures as `error: CODE: …`."""
        hide_id = args.get("hide_id")
        try:
            if name == "hide_next":
                return format_page(self.next(hide_id))
            if name == "hide_jump":
                page, path = args.get("page"), args.get("path")
                if isinstance(path, str) and page is None:
                    return format_page(self.jump(self._pick(hide_id), path))
                if path is not None or not isinstance(page, int) or isinstance(page, bool) or page < 1:
                    return "error: hide_jump needs a positive integer `page` or a string `path`, one of the two"
                return format_page(self.cut(self._pick(hide_id), page))
            if name == "hide_search":
                query = args.get("query")
                if not isinstance(query, str):
                    return "error: hide_search needs a string `query`"
                hide_id = self._pick(hide_id)
                cut = self.search(hide_id, query, bool(args.get("ignore_case", False)))
                if cut is None:
                    return f"Not found: {query!r} does not occur in hide {hide_id}."
                return f"Found {query!r} on page {cut.page}:\n{format_page(cut)}"
            return f"error: {name} is not a hide tool"
        except JqjailError as e:
            return f"error: {e.code}: {e.message}"

    def _serve(self, hide_id: str, at: Dict[str, Any], hint: bool) -> HidePage:
        page = self.client.hide_page(hide_id, page_size=self.page_size, hint=hint, pages=self.pages, **at)
        self._cursors[page.hide_id] = page.page
        return page

    def _pick(self, hide_id: Optional[str]) -> str:
        if hide_id is not None:
            return hide_id
        if self.latest is None:
            raise JqjailError("NOT_FOUND", "no hide was stored or loaded in this buffer yet")
        return self.latest[0]
