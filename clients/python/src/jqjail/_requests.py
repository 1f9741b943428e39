"""The requests of the protocol as `Request` values, for both clients."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ._wire import Request, as_bytes, encode


def stats() -> Request:
    return Request(encode("stats"), b"", ("stats",))


def hide_put(content: "str | bytes", kind: str, source: str, meta: Optional[Mapping[str, str]]) -> Request:
    tail = as_bytes(content)
    body = {"kind": kind, "source": source, "meta": dict(meta or {}), "content_bytes": len(tail)}
    return Request(encode({"hide_put": body}), tail, ("hide_put",))


def hide_get(hide_id: str) -> Request:
    return Request(encode({"hide_get": {"id": hide_id}}), b"", ("hide_content",))


def hide_cut(hide_id: str, page: int, page_size: Optional[int], hint: bool) -> Request:
    body = {"id": hide_id, "page": page, "page_size": page_size, "hint": hint}
    return Request(encode({"hide_cut": body}), b"", ("hide_cut",))


def hide_page(
    hide_id: str,
    page: Optional[int],
    path: Optional[str],
    page_size: Optional[int],
    hint: bool,
    pages: str,
    offset: Optional[int] = None,
) -> Request:
    given = {k: v for k, v in (("page", page), ("path", path), ("offset", offset)) if v is not None}
    if len(given) != 1:
        raise TypeError("give one of a page number, a path or a byte offset")
    if pages not in ("json", "bytes"):
        raise ValueError(f"pages is 'json' or 'bytes', not {pages!r}")
    at: Dict[str, Any] = given
    body = {"id": hide_id, "at": at, "page_size": page_size, "hint": hint, "pages": pages}
    return Request(encode({"hide_page": body}), b"", ("hide_page",))


def hide_ends(hide_id: str, page_size: Optional[int], hint: bool, max_path_bytes: Optional[int] = None) -> Request:
    body = {"id": hide_id, "page_size": page_size, "hint": hint, "max_path_bytes": max_path_bytes}
    return Request(encode({"hide_ends": body}), b"", ("hide_ends",))


def hide_search(
    hide_id: str, query: str, ignore_case: bool, page_size: Optional[int], max_matches: Optional[int]
) -> Request:
    body = {
        "id": hide_id,
        "query": query,
        "ignore_case": ignore_case,
        "page_size": page_size,
        "max_matches": max_matches,
    }
    return Request(encode({"hide_search": body}), b"", ("hide_search",))


def hide_list(offset: int, limit: Optional[int]) -> Request:
    body: Dict[str, Any] = {"offset": offset, "limit": limit}
    return Request(encode({"hide_list": body}), b"", ("hide_list",))


def hide_delete(hide_id: str) -> Request:
    return Request(encode({"hide_delete": {"id": hide_id}}), b"", ("hide_entry",))


def hide_usage() -> Request:
    return Request(encode("hide_usage"), b"", ("hide_usage",))
