"""The blocking client: one connection, one request at a time."""

from __future__ import annotations

import os
import socket
from typing import Any, List, Mapping, Optional, Union

from . import _private
from . import _requests as req
from ._wire import (
    SOCKET_ENV,
    ConnectionFailed,
    HideContent,
    HideCut,
    HideEnds,
    HidePage,
    HideEntry,
    Hidden,
    Limits,
    Request,
    RunReply,
    answer,
    check_peer,
    decode,
    candidate_sockets,
    frame,
    frame_length,
    hello,
    run_request,
    values_request,
    tail_length,
)

#: Every hide of a tenant, as `Client.hide_list` follows the pages (the store's cap).
MAX_LISTED = 10_000


class Client:
    """A connection to a jqjail daemon. `socket_path` defaults to $JQJAIL_SOCKET, then the
    system service's socket, then the user's private daemon's (the order every jqjail client
    shares; PROTOCOL.md, "Finding the socket"). The daemon must be the user's own, root's, or a uid named in
    $JQJAIL_DAEMON_UIDS (checked before anything is sent)."""

    def __init__(self, socket_path: "str | os.PathLike[str] | None" = None, timeout: Optional[float] = None):
        candidates = candidate_sockets(socket_path)
        startable = socket_path is None and not os.environ.get(SOCKET_ENV)
        for i, path in enumerate(candidates):
            last = i + 1 == len(candidates)
            try:
                self._sock = self._open(path, timeout)
                break
            except OSError as e:
                if last and startable:
                    # No daemon anywhere: start the private one, as the CLI does.
                    path = _private.start(path)
                    self._sock = self._open(path, timeout)
                    break
                if last:
                    raise ConnectionFailed(f"cannot connect to {path}: {e}") from None
        self.socket_path = path
        try:
            self._broken: Optional[str] = None
            pid = check_peer(self._sock, self.socket_path)
            self._sock.sendall(hello())
            variant, fields = decode(self._read_frame())
            self.limits: Limits = _private.hello_limits(variant, fields, path, pid, startable and last)
            self.server: str = str(fields.get("server", ""))
        except BaseException:
            self._sock.close()
            raise

    @staticmethod
    def _open(path: str, timeout: Optional[float]) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except BaseException:
            sock.close()
            raise
        return sock

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n > 0:
            try:
                chunk = self._sock.recv(min(n, 1 << 20))
            except OSError as e:
                raise ConnectionFailed(f"reading from the daemon: {e}") from None
            if not chunk:
                raise ConnectionFailed("the daemon closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read_frame(self) -> bytes:
        return self._read_exact(frame_length(self._read_exact(4)))

    def _call(self, request: Request) -> Any:
        if self._broken is not None:
            raise ConnectionFailed(f"this connection is unusable: {self._broken}; open a new Client")
        try:
            try:
                self._sock.sendall(frame(request.body))
                if request.tail:
                    self._sock.sendall(request.tail)
            except OSError as e:
                raise ConnectionFailed(f"writing to the daemon: {e}") from None
            variant, fields = decode(self._read_frame())
            tail = self._read_exact(tail_length(variant, fields, self.limits))
        except BaseException as e:
            # Interrupted between a request and its whole answer (a timeout, a signal, a lost
            # connection): the next answer on this stream would be this one's, so the
            # connection is closed rather than reused out of step.
            self._broken = f"a call was interrupted ({type(e).__name__}: {e})"
            self._sock.close()
            if isinstance(e, (socket.timeout, TimeoutError)):
                raise ConnectionFailed(f"the daemon did not answer in time: {e}") from None
            raise
        return answer(request, variant, fields, tail)

    def run(
        self,
        filter: str,
        input: Any = None,
        *,
        hide_id: Optional[str] = None,
        args: Optional[Mapping[str, Any]] = None,
        positional: Optional[List[Any]] = None,
        lang: str = "jq",
        outputs: str = "collapsed",
        on_oversize: str = "error",
        timeout_ms: Optional[int] = None,
        max_output_bytes: Optional[int] = None,
        max_depth: Optional[int] = None,
    ) -> Union[RunReply, Hidden]:
        """Runs `filter` over `input` (JSON text as `str` or `bytes`, or any JSON value such as a
        dict) or the hide `hide_id`. With
        `on_oversize="hide"` an output over the limit comes back as `Hidden`."""
        return self._call(
            run_request(
                filter,
                input,
                hide_id,
                lang=lang,
                args=args,
                positional=positional,
                outputs=outputs,
                on_oversize=on_oversize,
                timeout_ms=timeout_ms,
                max_output_bytes=max_output_bytes,
                max_depth=max_depth,
            )
        )

    def run_values(self, filter: str, values: "str | bytes", *, null_input: bool = False, **options: Any) -> Union[RunReply, Hidden]:
        """Runs `filter` over a stream of JSON texts that it reads with `input` and `inputs`
        (jq's `-n` with `null_input`); `options` as for `run`, but `hide_id`."""
        return self._call(values_request(filter, values, null_input, **options))

    def shape(self, input: Any = None, *, hide_id: Optional[str] = None) -> Any:
        """The shape summary of a document or a hide, parsed (at most 4 KiB of JSON)."""
        reply = self._call(run_request("", input, hide_id, lang="shape"))
        return reply.value()

    def stats(self) -> Any:
        return self._call(req.stats())

    def hide_put(
        self, content: "str | bytes", *, kind: str = "tool_output", source: str = "", meta: Optional[Mapping[str, str]] = None
    ) -> Any:
        return self._call(req.hide_put(content, kind, source, meta))

    def hide_get(self, hide_id: str) -> HideContent:
        return self._call(req.hide_get(hide_id))

    def hide_cut(self, hide_id: str, page: int, page_size: Optional[int] = None, hint: bool = False) -> HideCut:
        return self._call(req.hide_cut(hide_id, page, page_size, hint))

    def hide_page(
        self,
        hide_id: str,
        page: Optional[int] = None,
        *,
        path: Optional[str] = None,
        page_size: Optional[int] = None,
        hint: bool = False,
        pages: str = "json",
        offset: Optional[int] = None,
    ) -> HidePage:
        """One page of a hide, by number, by a path in it (`$[17].labels`, `.[17].labels`) or by
        a byte `offset` it holds (a search match's), in JSON pages (pages end between values and name their paths; text falls back to byte
        pages and says why) or `pages="bytes"`. Needs a daemon of protocol 3."""
        return self._call(req.hide_page(hide_id, page, path, page_size, hint, pages, offset))

    def hide_ends(
        self, hide_id: str, *, page_size: Optional[int] = None, hint: bool = False, max_path_bytes: Optional[int] = None
    ) -> HideEnds:
        """A hide's head and tail: its beginning and its end, each half of `page_size` (16,384
        unless given, at least 128), and what lies between them (bytes, paths and the elements
        of one array). Needs a daemon of protocol 4."""
        return self._call(req.hide_ends(hide_id, page_size, hint, max_path_bytes))

    def hide_search(
        self, hide_id: str, query: str, *, ignore_case: bool = False, page_size: Optional[int] = None, max_matches: Optional[int] = None
    ) -> Any:
        return self._call(req.hide_search(hide_id, query, ignore_case, page_size, max_matches))

    def hide_list_page(self, offset: int = 0, limit: Optional[int] = None) -> Any:
        return self._call(req.hide_list(offset, limit))

    def hide_list(self) -> List[HideEntry]:
        """Every hide of this tenant, newest first, following the pages."""
        entries: List[HideEntry] = []
        offset = 0
        while True:
            page = self.hide_list_page(offset)
            entries.extend(page["entries"])
            nxt = page["next"]
            if nxt is None:
                return entries
            if not isinstance(nxt, int) or nxt <= offset or nxt > page["total"] or len(entries) > MAX_LISTED:
                raise ConnectionFailed(f"the daemon's list pages do not advance (next {nxt!r} after {offset})")
            offset = nxt

    def hide_delete(self, hide_id: str) -> HideEntry:
        return self._call(req.hide_delete(hide_id))

    def hide_usage(self) -> Any:
        return self._call(req.hide_usage())
