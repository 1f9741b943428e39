"""The jqjail protocol v4 in its JSON encoding (PROTOCOL.md): frames, tails, and the one
response each request gets. Shared by the blocking and the asyncio clients, which only move
bytes; everything here is pure."""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

PROTOCOL_VERSION = 4
CLIENT_NAME = "jqjail-python/0.1.0"
SYSTEM_SOCKET = "/run/jqjail/jqjail.sock"
SOCKET_ENV = "JQJAIL_SOCKET"
DAEMON_UIDS_ENV = "JQJAIL_DAEMON_UIDS"
#: Response frames longer than this are refused (the daemon's never are).
MAX_RESPONSE_FRAME_BYTES = 8 << 20
#: No tail is read past this, whatever the daemon's limits say.
MAX_RESPONSE_TAIL_BYTES = 1 << 30


class JqjailError(Exception):
    """A request the daemon answered with an error: `code` is the stable code to branch on."""

    def __init__(
        self,
        code: str,
        message: str,
        limit: Optional[int] = None,
        actual: Optional[int] = None,
        detail: Optional[str] = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.limit = limit
        self.actual = actual
        self.detail = detail


class ConnectionFailed(JqjailError):
    """The daemon could not be reached, broke the protocol, or is not trusted."""

    def __init__(self, message: str) -> None:
        super().__init__("UNAVAILABLE", message)


@dataclass(frozen=True)
class Limits:
    max_input_bytes: int
    max_filter_bytes: int
    max_depth: int
    max_output_bytes: int
    timeout_ms: int
    max_heap_bytes: int


@dataclass(frozen=True)
class Cost:
    wall_us: int = 0
    cpu_us: int = 0
    peak_rss_bytes: int = 0
    input_bytes: int = 0
    output_bytes: int = 0


@dataclass(frozen=True)
class RunReply:
    """A run's answer: `output` is JSON text (integers keep every digit)."""

    output: str
    cost: Cost

    def value(self) -> Any:
        """The output parsed (Python's `json` keeps big integers exact)."""
        return json.loads(self.output)


@dataclass(frozen=True)
class HideEntry:
    id: str
    kind: str
    source: str
    size: int
    sha256: str
    meta: Dict[str, str]
    created_ms: int


@dataclass(frozen=True)
class HideCut:
    hide_id: str
    page: int
    total_pages: int
    page_size: int
    offset: int
    size: int
    content: bytes
    preface: Optional[str] = None

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class JsonPlace:
    """Where a JSON page is: the paths of its first and last values (`$[1].labels[0]`), the
    innermost array around its start (`{"path", "length"}`, or None), its depth, and the offsets
    into a string longer than a page where it starts or stops (or None)."""

    first: str
    last: str
    array: Optional[Dict[str, Any]]
    depth: int
    starts_in_string: Optional[int] = None
    ends_in_string: Optional[int] = None


@dataclass(frozen=True)
class HidePage(HideCut):
    """A page of a hide (protocol v3): `pages` is "json" (then `json` says where it is) or
    "bytes" (asked for, or the hide is not one JSON value: `not_json` says why)."""

    pages: str = "json"
    json: Optional[JsonPlace] = None
    not_json: Optional[str] = None


@dataclass(frozen=True)
class End:
    """One end of a hide (protocol v4): its offset and length, and where it is (JSON)."""

    offset: int
    length: int
    json: Optional[JsonPlace] = None


@dataclass(frozen=True)
class LeftOut:
    """What lies between a hide's head and tail: its offset and bytes, the paths of its first and
    last values, and the elements of one array it touches (`{"array", "from", "to", "length"}`)."""

    offset: int
    bytes: int
    first: Optional[str] = None
    last: Optional[str] = None
    elements: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class HideEnds:
    """A hide's head and tail (protocol v4): `head` and `tail` (None: the head is all of it),
    `left_out` (None: they meet), `content` the head's bytes then the tail's."""

    hide_id: str
    size: int
    page_size: int
    pages: str
    head: End
    tail: Optional[End]
    left_out: Optional[LeftOut]
    not_json: Optional[str]
    content: bytes
    preface: Optional[str] = None

    @property
    def head_text(self) -> str:
        return self.content[: self.head.length].decode("utf-8", errors="replace")

    @property
    def tail_text(self) -> str:
        return self.content[self.head.length :].decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Hidden:
    """A run's output over the output limit, kept as a hide: its entry and page 1."""

    entry: HideEntry
    first: HideCut
    cost: Cost


@dataclass(frozen=True)
class HideContent:
    entry: HideEntry
    content: bytes


@dataclass
class Request:
    """One request: its frame, its tail, and how to read its answer's tail."""

    body: bytes
    tail: bytes = b""
    #: The response variants this request may get (besides `error`).
    expect: Tuple[str, ...] = field(default_factory=tuple)


def encode(message: Any) -> bytes:
    """A JSON frame body: non-ASCII sent raw, as UTF-8."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def frame(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


def hello() -> bytes:
    return frame(encode({"hello": {"protocol": PROTOCOL_VERSION, "client": CLIENT_NAME}}))


def frame_length(prefix: bytes) -> int:
    (length,) = struct.unpack("<I", prefix)
    if length > MAX_RESPONSE_FRAME_BYTES:
        raise ConnectionFailed(
            f"the daemon sent a {length}-byte frame, over the {MAX_RESPONSE_FRAME_BYTES}-byte maximum"
        )
    return length


def decode(body: bytes) -> Tuple[str, Any]:
    """A response body as (variant, fields)."""
    try:
        message = json.loads(body)
    except ValueError as e:
        raise ConnectionFailed(f"the daemon's frame is not JSON: {e}") from None
    except RecursionError:
        # A frame nested deeper than Python's stack (a lying or broken daemon): the client's
        # own error, not the interpreter's.
        raise ConnectionFailed("the daemon's frame is nested too deeply to decode") from None
    if isinstance(message, str):
        return message, {}
    if not isinstance(message, dict) or len(message) != 1:
        raise ConnectionFailed("the daemon's frame is not one response")
    ((variant, fields),) = message.items()
    return variant, fields


def tail_length(variant: str, fields: Any, limits: Optional[Limits]) -> int:
    """How many raw bytes follow this response's frame (PROTOCOL.md, "Tails")."""
    if variant == "run":
        n = fields.get("output_bytes", 0)
    elif variant in ("hide_content", "hide_cut", "hide_page", "hide_ends"):
        n = fields.get("content_bytes", 0)
    elif variant == "hidden":
        n = fields.get("first", {}).get("content_bytes", 0)
    else:
        return 0
    if not isinstance(n, int) or n < 0:
        raise ConnectionFailed(f"the daemon's {variant} answer has a bad tail length")
    bound = MAX_RESPONSE_TAIL_BYTES
    if limits is not None:
        bound = min(bound, max(limits.max_input_bytes, limits.max_output_bytes))
    if n > bound:
        raise ConnectionFailed(f"the daemon announced a {n}-byte tail, over the {bound}-byte bound")
    return n


def limits_of(fields: Any) -> Limits:
    try:
        l = fields["limits"]
        return Limits(**{k: int(l[k]) for k in Limits.__dataclass_fields__})
    except (KeyError, TypeError, ValueError) as e:
        raise ConnectionFailed(f"the daemon's hello reply has no usable limits: {e}") from None


def check_hello(variant: str, fields: Any) -> Limits:
    if variant == "error":
        raise error_of(fields)
    if variant != "hello":
        raise ConnectionFailed(f"expected a hello reply, got {variant}")
    return limits_of(fields)


def error_of(fields: Any) -> JqjailError:
    return JqjailError(
        str(fields.get("code", "INTERNAL")),
        str(fields.get("message", "")),
        fields.get("limit"),
        fields.get("actual"),
        fields.get("detail"),
    )


def cost_of(fields: Any) -> Cost:
    c = fields or {}
    return Cost(**{k: int(c.get(k, 0) or 0) for k in Cost.__dataclass_fields__})


def entry_of(e: Any) -> HideEntry:
    return HideEntry(
        id=e["id"],
        kind=e.get("kind", ""),
        source=e.get("source", ""),
        size=int(e.get("size", 0)),
        sha256=e.get("sha256", ""),
        meta=dict(e.get("meta") or {}),
        created_ms=int(e.get("created_ms", 0)),
    )


def cut_of(c: Any, content: bytes) -> HideCut:
    return HideCut(
        hide_id=c["hide_id"],
        page=int(c["page"]),
        total_pages=int(c["total_pages"]),
        page_size=int(c["page_size"]),
        offset=int(c["offset"]),
        size=int(c["size"]),
        content=content,
        preface=c.get("preface"),
    )


def place_of(place: Any) -> Optional[JsonPlace]:
    if place is None:
        return None
    return JsonPlace(
        first=place["first"],
        last=place["last"],
        array=place.get("array"),
        depth=int(place["depth"]),
        starts_in_string=place.get("starts_in_string"),
        ends_in_string=place.get("ends_in_string"),
    )


def page_of(c: Any, content: bytes) -> HidePage:
    return HidePage(
        **vars(cut_of(c, content)),
        pages=str(c["pages"]),
        json=place_of(c.get("json")),
        not_json=c.get("not_json"),
    )


def ends_of(c: Any, content: bytes) -> HideEnds:
    """A head and tail, checked: head, what is left out and tail must be the hide, and the
    content both ends (a lying daemon's numbers are refused, never sliced or summed)."""

    def count(v: Any) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 64:
            raise ConnectionFailed(f"the daemon's hide_ends answer has a bad number: {v!r}")
        return v

    def end(e: Any) -> Optional[End]:
        if e is None:
            return None
        return End(count(e["offset"]), count(e["length"]), place_of(e.get("json")))

    try:
        left = c.get("left_out")
        head, tail, size = end(c["head"]), end(c.get("tail")), count(c["size"])
        left_bytes = 0 if left is None else count(left["bytes"])
        elements = None if left is None else left.get("elements")
        if elements is not None:
            el_from, el_to = count(elements["from"]), count(elements["to"])
            length = elements.get("length")
            if not isinstance(elements.get("array"), str) or el_from > el_to or (length is not None and el_to >= count(length)):
                raise ConnectionFailed(f"the daemon's hide_ends answer has bad elements: {elements!r}")
        tail_length = 0 if tail is None else tail.length
        if (
            head is None
            or head.offset != 0
            or head.length + tail_length != len(content)
            or head.length + left_bytes + tail_length != size
            or (left is not None and (tail is None or count(left["offset"]) != head.length))
            or (tail is not None and tail.offset != head.length + left_bytes)
        ):
            raise ConnectionFailed("the daemon's head and tail do not make the hide")
        return HideEnds(
            hide_id=str(c["hide_id"]),
            size=size,
            page_size=count(c["page_size"]),
            pages=str(c["pages"]),
            head=head,
            tail=tail,
            left_out=None if left is None else LeftOut(head.length, left_bytes, left.get("first"), left.get("last"), elements),
            not_json=c.get("not_json"),
            content=content,
            preface=c.get("preface"),
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise ConnectionFailed(f"the daemon's hide_ends answer does not decode: {e!r}") from None


def answer(request: Request, variant: str, fields: Any, tail: bytes) -> Any:
    """The Python value of a response, or the error it carries."""
    if variant == "error":
        raise error_of(fields)
    if variant not in request.expect:
        raise ConnectionFailed(f"the daemon answered {variant}, expected {' or '.join(request.expect)}")
    if variant == "run":
        try:
            output = tail.decode("utf-8")
        except UnicodeDecodeError:
            raise JqjailError("INTERNAL", "the daemon's output is not UTF-8") from None
        return RunReply(output, cost_of(fields.get("cost")))
    if variant == "hidden":
        return Hidden(entry_of(fields["entry"]), cut_of(fields["first"], tail), cost_of(fields.get("cost")))
    if variant == "hide_content":
        return HideContent(entry_of(fields["entry"]), tail)
    if variant == "hide_cut":
        return cut_of(fields, tail)
    if variant == "hide_page":
        return page_of(fields, tail)
    if variant == "hide_ends":
        return ends_of(fields, tail)
    if variant == "hide_put":
        return {
            "entry": entry_of(fields["entry"]),
            "created": bool(fields.get("created")),
            "evicted": list(fields.get("evicted") or []),
        }
    if variant == "hide_entry":
        return entry_of(fields)
    if variant == "hide_list":
        return {
            "entries": [entry_of(e) for e in fields.get("entries", [])],
            "total": int(fields.get("total", 0)),
            "next": fields.get("next"),
        }
    return fields


def as_bytes(text: "str | bytes") -> bytes:
    return text.encode("utf-8") if isinstance(text, str) else bytes(text)


def input_bytes(input: Any) -> bytes:
    """An input as JSON text: `str` and `bytes` are JSON text already; any other value (a dict,
    a list, a number, None…) is encoded as JSON, non-ASCII as UTF-8."""
    if isinstance(input, (str, bytes, bytearray, memoryview)):
        return as_bytes(input) if isinstance(input, str) else bytes(input)
    try:
        return json.dumps(input, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise TypeError(f"the input is not JSON text or a JSON value: {e}") from None


def run_request(filter: str, input: Any, hide_id: Optional[str], **options: Any) -> Request:
    """A run: `input` is JSON text (`str` or `bytes`) or any other JSON value (`None` means no
    input: then `hide_id` names a hide; send `"null"` for null). `options` as for `_run`."""
    if (input is None) == (hide_id is None):
        raise ValueError("give exactly one of input and hide_id")
    if input is None:
        return _run(filter, {"hide": hide_id}, b"", **options)
    tail = input_bytes(input)
    return _run(filter, {"inline": len(tail)}, tail, **options)


def values_request(filter: str, values: "str | bytes", null_input: bool, **options: Any) -> Request:
    """A run over a stream of JSON texts (`values`, separated by whitespace), which the filter
    reads with `input` and `inputs`; with `null_input` it runs once on null (jq's `-n`),
    else once for each value not yet read. `options` as for `_run`."""
    tail = as_bytes(values)
    source = {"values": {"values": len(tail), "null_input": bool(null_input)}}
    return _run(filter, source, tail, **options)


def _run(
    filter: str,
    source: Dict[str, Any],
    tail: bytes,
    *,
    lang: str = "jq",
    args: Optional[Mapping[str, Any]] = None,
    positional: Optional[List[Any]] = None,
    outputs: str = "collapsed",
    on_oversize: str = "error",
    timeout_ms: Optional[int] = None,
    max_output_bytes: Optional[int] = None,
    max_depth: Optional[int] = None,
) -> Request:
    """A run request over `source` (the protocol's `input` field), `tail` its bytes. `args`
    values are Python values, sent as JSON texts: data, never filter code."""
    run: Dict[str, Any] = {
        "filter": filter,
        "lang": lang,
        "input": source,
        "outputs": outputs,
        "on_oversize": on_oversize,
        "limits": {"timeout_ms": timeout_ms, "max_output_bytes": max_output_bytes, "max_depth": max_depth},
    }
    if args or positional:
        run["args"] = {
            "named": {name: json.dumps(value, ensure_ascii=False) for name, value in (args or {}).items()},
            "positional": [json.dumps(value, ensure_ascii=False) for value in (positional or [])],
        }
    return Request(encode({"run": run}), tail, ("run", "hidden"))


def candidate_sockets(path: "str | os.PathLike[str] | None") -> List[str]:
    """Where to connect, in the order every jqjail client shares (PROTOCOL.md, "Finding the
    socket"): the path given; else $JQJAIL_SOCKET; else the system service's socket, then
    (when nothing accepts a connection there) the user's private daemon's."""
    if path is not None:
        return [os.fspath(path)]
    if os.environ.get(SOCKET_ENV):
        return [os.environ[SOCKET_ENV]]
    return [SYSTEM_SOCKET, private_socket()]


def private_socket() -> str:
    """The socket of the user's private daemon (the one the `jqjail` CLI starts), found as
    the CLI finds its directory: the first usable of $XDG_RUNTIME_DIR/jqjail,
    $TMPDIR/jqjail-UID and ${XDG_CACHE_HOME:-$HOME/.cache}/jqjail, where usable is a directory
    of the user's own, not a link, closed to others, or nothing yet in a directory the user
    may write in. When none is (a service account with no runtime dir, no writable home, and
    a jqjail-UID another user planted), the CLI made $TMPDIR/jqjail-UID-XXXXXX instead: the
    first by name of the user's own is it."""
    uid = os.getuid()
    candidates = []
    # Absolute paths only: a relative one would be under whatever directory the program runs in.
    absolute = lambda p: p if p and os.path.isabs(p) else ""  # noqa: E731
    runtime = absolute(os.environ.get("XDG_RUNTIME_DIR"))
    if runtime and os.path.isdir(runtime):
        candidates.append(os.path.join(runtime, "jqjail"))
    temp = temp_dir()
    candidates.append(os.path.join(temp, f"jqjail-{uid}"))
    home = absolute(os.environ.get("HOME"))
    cache = absolute(os.environ.get("XDG_CACHE_HOME")) or (os.path.join(home, ".cache") if home else "")
    if cache:
        candidates.append(os.path.join(cache, "jqjail"))
    for d in candidates:
        if _usable(d, uid):
            return os.path.join(d, "jqjail.sock")
    own = own_temp_dir(temp, uid)
    return os.path.join(own or candidates[-1], "jqjail.sock")


def own_temp_dir(temp: str, uid: int) -> Optional[str]:
    """The first (by name) temp/jqjail-UID-* directory of the user's own, if any."""
    prefix = f"jqjail-{uid}-"
    try:
        names = sorted(os.listdir(temp))
    except OSError:
        names = []
    for name in names:
        d = os.path.join(temp, name)
        if name.startswith(prefix) and os.path.lexists(d) and _usable(d, uid):
            return d
    return None


def temp_dir() -> str:
    """$TMPDIR when it is an absolute path, else /tmp."""
    temp = os.environ.get("TMPDIR")
    return temp if temp and os.path.isabs(temp) else "/tmp"


def _usable(d: str, uid: int) -> bool:
    """A directory of `uid`'s own (not a link) closed to others, or nothing there yet in a
    directory this process may write in."""
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        parent = os.path.dirname(d)
        while not os.path.lexists(parent) and parent != os.path.dirname(parent):
            parent = os.path.dirname(parent)
        return os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and st.st_mode & 0o077 == 0


def trusted_uids() -> List[int]:
    uids = [os.getuid(), 0]
    for part in os.environ.get(DAEMON_UIDS_ENV, "").split(","):
        part = part.strip()
        if part:
            if not part.isdigit():
                raise ConnectionFailed(f"${DAEMON_UIDS_ENV} holds {part!r}, which is not a uid")
            uids.append(int(part))
    return uids


def check_peer(sock: socket.socket, path: str) -> int:
    """Refuses a daemon that is not the user, root, or a uid in $JQJAIL_DAEMON_UIDS: a
    socket in a shared directory may be another user's, who would read everything sent.
    Returns the daemon's pid."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    trusted = trusted_uids()
    if uid not in trusted:
        raise ConnectionFailed(
            f"{path} is served by uid {uid}, which is not trusted (trusted: {trusted}); "
            f"set ${DAEMON_UIDS_ENV} if that uid runs your daemon"
        )
    return pid
