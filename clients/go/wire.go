// Package jqjail is the Go client of jqjail, the daemon that runs untrusted jq filters (and
// a small path language) in confined workers and keeps oversized tool outputs as pages on
// its disk. It speaks protocol v4 in its JSON encoding (PROTOCOL.md) with the standard
// library only.
//
// The subpackages are drop-ins for the systems jqjail replaces: jqjail.dev/jqjail/jq for a
// package that ran gojq in-process (jq.Run), jqjail.dev/jqjail/hide for a hide store and
// paging buffer (Store, HideBuffer, ToolDefs).
package jqjail

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

const (
	// ProtocolVersion is the protocol this client speaks.
	ProtocolVersion = 4
	// Version is this client's version.
	Version = "0.1.0"
	// MaxResponseFrameBytes bounds every response frame (the daemon's never pass 8 MiB).
	MaxResponseFrameBytes = 8 << 20
	// maxTailBytes bounds a response's tail whatever the daemon's limits say.
	maxTailBytes = 1 << 30
)

// Error is an answer of the daemon that is an error, or a failure to reach or trust it
// (Code "UNAVAILABLE"). Code is the stable code to branch on (PROTOCOL.md, "Error codes");
// Limit and Actual name the limit that was hit and the value that hit it, where there is one.
type Error struct {
	Code    string
	Message string
	Limit   *uint64
	Actual  *uint64
	Detail  string
	// untrusted: the socket is served by a uid this client does not trust (errors.Is
	// ErrUntrusted); discovery never falls back from such a socket.
	untrusted bool
}

// ErrUntrusted matches (errors.Is) the error of a socket served by a uid the client does not
// trust.
var ErrUntrusted = errors.New("jqjail: untrusted daemon")

// Is makes an untrusted daemon's error match ErrUntrusted.
func (e *Error) Is(target error) bool { return target == ErrUntrusted && e.untrusted }

func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Unavailable is the code of errors in reaching, trusting or understanding the daemon; the
// connection that had one is closed.
const Unavailable = "UNAVAILABLE"

func unavailable(format string, args ...any) *Error {
	return &Error{Code: Unavailable, Message: fmt.Sprintf(format, args...)}
}

// Limits are the daemon's limits, from its hello reply; a request may lower some.
type Limits struct {
	MaxInputBytes  uint64 `json:"max_input_bytes"`
	MaxFilterBytes uint64 `json:"max_filter_bytes"`
	MaxDepth       uint32 `json:"max_depth"`
	MaxOutputBytes uint64 `json:"max_output_bytes"`
	TimeoutMs      uint64 `json:"timeout_ms"`
	MaxHeapBytes   uint64 `json:"max_heap_bytes"`
}

// Cost is what a run cost.
type Cost struct {
	WallUs       uint64 `json:"wall_us"`
	CPUUs        uint64 `json:"cpu_us"`
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	InputBytes   uint64 `json:"input_bytes"`
	OutputBytes  uint64 `json:"output_bytes"`
}

// HideEntry is a stored hide's metadata.
type HideEntry struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind"`
	Source    string            `json:"source"`
	Size      uint64            `json:"size"`
	Sha256    string            `json:"sha256"`
	Meta      map[string]string `json:"meta"`
	CreatedMs uint64            `json:"created_ms"`
}

// HideCut is one page of a hide. Content is the page's bytes; Preface the reflection hint,
// when it was asked for.
type HideCut struct {
	HideID     string `json:"hide_id"`
	Page       uint64 `json:"page"`
	TotalPages uint64 `json:"total_pages"`
	PageSize   uint64 `json:"page_size"`
	Offset     uint64 `json:"offset"`
	Size       uint64 `json:"size"`
	Content    []byte `json:"-"`
	Preface    string `json:"preface"`
}

// HidePage is a page of a hide (protocol 3). Pages is "json" (then JSON says where the page is)
// or "bytes" (asked for, or the hide is not one JSON value: NotJSON says why).
type HidePage struct {
	HideCut
	Pages   string     `json:"pages"`
	JSON    *JSONPlace `json:"json"`
	NotJSON string     `json:"not_json"`
}

// JSONPlace is where a JSON page is: the paths of its first and last values ("$[1].labels[0]"),
// the innermost array open around its start, its depth, and the offsets into a string longer
// than a page where it starts or stops.
type JSONPlace struct {
	First          string      `json:"first"`
	Last           string      `json:"last"`
	Array          *ArrayPlace `json:"array"`
	Depth          uint64      `json:"depth"`
	StartsInString *uint64     `json:"starts_in_string"`
	EndsInString   *uint64     `json:"ends_in_string"`
}

// ArrayPlace is an array a JSON page is in: its path and its number of elements.
type ArrayPlace struct {
	Path   string `json:"path"`
	Length uint64 `json:"length"`
}

// HideEnds is a hide's head and tail (protocol 4): its beginning and its end, each half the
// page size, and what lies between them. Tail is nil when the head is the whole hide, LeftOut
// when head and tail meet. Content is the head's bytes, then the tail's.
type HideEnds struct {
	HideID   string   `json:"hide_id"`
	Size     uint64   `json:"size"`
	PageSize uint64   `json:"page_size"`
	Pages    string   `json:"pages"`
	Head     End      `json:"head"`
	Tail     *End     `json:"tail"`
	LeftOut  *LeftOut `json:"left_out"`
	NotJSON  string   `json:"not_json"`
	Content  []byte   `json:"-"`
	Preface  string   `json:"preface"`
}

// End is one end of a hide: its offset and length, and where it is (JSON pages).
type End struct {
	Offset uint64     `json:"offset"`
	Length uint64     `json:"length"`
	JSON   *JSONPlace `json:"json"`
}

// LeftOut is what lies between a hide's head and tail: its offset and bytes, the paths of its
// first and last values, and the elements of one array it touches, in whole or in part.
type LeftOut struct {
	Offset   uint64           `json:"offset"`
	Bytes    uint64           `json:"bytes"`
	First    string           `json:"first"`
	Last     string           `json:"last"`
	Elements *ElementsLeftOut `json:"elements"`
}

// ElementsLeftOut are elements From to To of the array at Array (of Length, where known).
type ElementsLeftOut struct {
	Array  string  `json:"array"`
	From   uint64  `json:"from"`
	To     uint64  `json:"to"`
	Length *uint64 `json:"length"`
}

// Hidden is a run's output over the output limit, kept as a hide: its entry and page 1.
type Hidden struct {
	Entry HideEntry `json:"entry"`
	First HideCut   `json:"first"`
	Cost  Cost      `json:"cost"`
}

// frame is a JSON frame body with its length prefix.
func frame(body []byte) []byte {
	out := make([]byte, 4, 4+len(body))
	binary.LittleEndian.PutUint32(out, uint32(len(body)))
	return append(out, body...)
}

// response is one decoded response frame: its variant and fields.
type response struct {
	kind   string
	fields json.RawMessage
}

// decodeResponse splits a response body into its variant and fields.
func decodeResponse(body []byte) (response, error) {
	var bare string
	if json.Unmarshal(body, &bare) == nil {
		return response{kind: bare}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return response{}, unavailable("the daemon's frame is not JSON: %v", err)
	}
	if len(m) != 1 {
		return response{}, unavailable("the daemon's frame holds %d responses, not one", len(m))
	}
	for k, v := range m {
		return response{kind: k, fields: v}, nil
	}
	panic("unreachable")
}

// tailLength is how many raw bytes follow a response's frame (PROTOCOL.md, "Tails"),
// checked against bound before anything is allocated for them.
func tailLength(r response, bound uint64) (uint64, error) {
	var n struct {
		OutputBytes  *uint64 `json:"output_bytes"`
		ContentBytes *uint64 `json:"content_bytes"`
		First        *struct {
			ContentBytes *uint64 `json:"content_bytes"`
		} `json:"first"`
	}
	switch r.kind {
	case "run", "hide_content", "hide_cut", "hide_page", "hide_ends", "hidden":
	default:
		return 0, nil
	}
	if err := json.Unmarshal(r.fields, &n); err != nil {
		return 0, unavailable("the daemon's %s answer does not decode: %v", r.kind, err)
	}
	var announced *uint64
	switch r.kind {
	case "run":
		announced = n.OutputBytes
	case "hide_content", "hide_cut", "hide_page", "hide_ends":
		announced = n.ContentBytes
	case "hidden":
		if n.First != nil {
			announced = n.First.ContentBytes
		}
	}
	if announced == nil {
		return 0, unavailable("the daemon's %s answer has no tail length", r.kind)
	}
	if *announced > bound {
		return 0, unavailable("the daemon announced a %d-byte tail, over the %d-byte bound", *announced, bound)
	}
	return *announced, nil
}

// errorOf is the error a response carries.
func errorOf(fields json.RawMessage) error {
	var e struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Limit   *uint64 `json:"limit"`
		Actual  *uint64 `json:"actual"`
		Detail  *string `json:"detail"`
	}
	if err := json.Unmarshal(fields, &e); err != nil || e.Code == "" {
		return unavailable("the daemon's error answer does not decode")
	}
	out := &Error{Code: e.Code, Message: e.Message, Limit: e.Limit, Actual: e.Actual}
	if e.Detail != nil {
		out.Detail = *e.Detail
	}
	return out
}

// orderedObject writes name/value pairs as a JSON object in the order given (jq lists
// $ARGS.named in that order).
func orderedObject(pairs [][2]string) json.RawMessage {
	out := []byte{'{'}
	for i, p := range pairs {
		if i > 0 {
			out = append(out, ',')
		}
		name, _ := json.Marshal(p[0])
		value, _ := json.Marshal(p[1])
		out = append(append(append(out, name...), ':'), value...)
	}
	return append(out, '}')
}
