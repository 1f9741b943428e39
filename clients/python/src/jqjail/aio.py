"""The asyncio client: the same requests as `Client`, awaited."""

from __future__ import annotations

import asyncio
import os
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


class AsyncClient:
    """An asyncio connection to a jqjail daemon; create it with `await AsyncClient.connect()`.
    One request at a time: concurrent calls on one client are serialized by a lock."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str):
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self.socket_path = path
        self.limits: Optional[Limits] = None
        self.server = ""
        self._broken: Optional[str] = None

    @classmethod
    async def connect(cls, socket_path: "str | os.PathLike[str] | None" = None) -> "AsyncClient":
        candidates = candidate_sockets(socket_path)
        startable = socket_path is None and not os.environ.get(SOCKET_ENV)
        for i, path in enumerate(candidates):
            last = i + 1 == len(candidates)
            try:
                reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
                break
            except OSError as e:
                if last and startable:
                    # No daemon anywhere: start the private one, as the CLI does (its wait
                    # blocks, so on a thread).
                    path = await asyncio.get_running_loop().run_in_executor(None, _private.start, path)
                    reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
                    break
                if last:
                    raise ConnectionFailed(f"cannot connect to {path}: {e}") from None
        client = cls(reader, writer, path)
        try:
            pid = check_peer(writer.get_extra_info("socket"), path)
            writer.write(hello())
            variant, fields = decode(await client._read_frame())
            client.limits = _private.hello_limits(variant, fields, path, pid, startable and last)
            client.server = str(fields.get("server", ""))
        except BaseException:
            await client.close()
            raise
        return client

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    async def _read_exact(self, n: int) -> bytes:
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError:
            raise ConnectionFailed("the daemon closed the connection") from None
        except OSError as e:
            raise ConnectionFailed(f"reading from the daemon: {e}") from None

    async def _read_frame(self) -> bytes:
        return await self._read_exact(frame_length(await self._read_exact(4)))

    async def _call(self, request: Request) -> Any:
        async with self._lock:
            if self._broken is not None:
                raise ConnectionFailed(f"this connection is unusable: {self._broken}; connect again")
            try:
                try:
                    self._writer.write(frame(request.body))
                    if request.tail:
                        self._writer.write(request.tail)
                    await self._writer.drain()
                except OSError as e:
                    raise ConnectionFailed(f"writing to the daemon: {e}") from None
                variant, fields = decode(await self._read_frame())
                tail = await self._read_exact(tail_length(variant, fields, self.limits))
            except BaseException as e:
                # Cancelled (asyncio.wait_for, say) or failed between a request and its whole
                # answer: the stream is out of step, so the connection is closed, not reused.
                self._broken = f"a call was interrupted ({type(e).__name__})"
                self._writer.close()
                raise
            return answer(request, variant, fields, tail)

    async def run(
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
        """See `Client.run`."""
        return await self._call(
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

    async def run_values(self, filter: str, values: "str | bytes", *, null_input: bool = False, **options: Any) -> Union[RunReply, Hidden]:
        """Runs `filter` over a stream of JSON texts that it reads with `input` and `inputs`
        (jq's `-n` with `null_input`); `options` as for `run`, but `hide_id`."""
        return await self._call(values_request(filter, values, null_input, **options))

    async def shape(self, input: Any = None, *, hide_id: Optional[str] = None) -> Any:
        reply = await self._call(run_request("", input, hide_id, lang="shape"))
        return reply.value()

    async def stats(self) -> Any:
        return await self._call(req.stats())

    async def hide_put(
        self, content: "str | bytes", *, kind: str = "tool_output", source: str = "", meta: Optional[Mapping[str, str]] = None
    ) -> Any:
        return await self._call(req.hide_put(content, kind, source, meta))

    async def hide_get(self, hide_id: str) -> HideContent:
        return await self._call(req.hide_get(hide_id))

    async def hide_cut(self, hide_id: str, page: int, page_size: Optional[int] = None, hint: bool = False) -> HideCut:
        return await self._call(req.hide_cut(hide_id, page, page_size, hint))

    async def hide_page(
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
        return await self._call(req.hide_page(hide_id, page, path, page_size, hint, pages, offset))

    async def hide_ends(
        self, hide_id: str, *, page_size: Optional[int] = None, hint: bool = False, max_path_bytes: Optional[int] = None
    ) -> HideEnds:
        """A hide's head and tail: its beginning and its end, each half of `page_size` (16,384
        unless given, at least 128), and what lies between them (bytes, paths and the elements
        of one array). Needs a daemon of protocol 4."""
        return await self._call(req.hide_ends(hide_id, page_size, hint, max_path_bytes))

    async def hide_search(
        self, hide_id: str, query: str, *, ignore_case: bool = False, page_size: Optional[int] = None, max_matches: Optional[int] = None
    ) -> Any:
        return await self._call(req.hide_search(hide_id, query, ignore_case, page_size, max_matches))

    async def hide_list_page(self, offset: int = 0, limit: Optional[int] = None) -> Any:
        return await self._call(req.hide_list(offset, limit))

    async def hide_delete(self, hide_id: str) -> HideEntry:
        return await self._call(req.hide_delete(hide_id))

    async def hide_usage(self) -> Any:
        return await self._call(req.hide_usage())


__all__ = ["AsyncClient"]
