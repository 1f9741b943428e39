package jqjail

import (
	"context"
	"encoding/json"
	"fmt"
)

// Filter languages.
const (
	LangJq    = "jq"
	LangPath  = "path"
	LangShape = "shape"
)

// Arg is a named argument: bound in a jq filter as $Name (and in $ARGS.named), its Value
// sent as JSON text, so it is only ever data, never filter code.
type Arg struct {
	Name  string
	Value any
}

// RunOptions are a run's options; the zero value is the daemon's defaults.
type RunOptions struct {
	// Lang is LangJq (""), LangPath or LangShape.
	Lang string
	// Lines asks for every output as compact JSON text and a newline, rather than the
	// collapsed answer (one output → it, several → an array, none → null).
	Lines bool
	// Hide keeps an output over the output limit as a hide (Result.Hidden) instead of
	// failing with OUTPUT_TOO_LARGE.
	Hide bool
	// Tighter limits for this run; 0 keeps the daemon's.
	TimeoutMs      uint64
	MaxOutputBytes uint64
	MaxDepth       uint32
	// Named arguments ($name, in order) and positional ones ($ARGS.positional).
	Args       []Arg
	Positional []any
}

// Result is a run's answer: Output is JSON text (integers keep every digit), or, when the
// output was kept as a hide (RunOptions.Hide), Hidden holds its entry and page 1.
type Result struct {
	Output []byte
	Cost   Cost
	Hidden *Hidden
}

func (o *RunOptions) request(filter string, input any) (map[string]any, error) {
	if o == nil {
		o = &RunOptions{}
	}
	lang, outputs, oversize := LangJq, "collapsed", "error"
	if o.Lang != "" {
		lang = o.Lang
	}
	if o.Lines {
		outputs = "lines"
	}
	if o.Hide {
		oversize = "hide"
	}
	limits := map[string]any{}
	if o.TimeoutMs > 0 {
		limits["timeout_ms"] = o.TimeoutMs
	}
	if o.MaxOutputBytes > 0 {
		limits["max_output_bytes"] = o.MaxOutputBytes
	}
	if o.MaxDepth > 0 {
		limits["max_depth"] = o.MaxDepth
	}
	run := map[string]any{
		"filter": filter, "lang": lang, "input": input, "outputs": outputs,
		"on_oversize": oversize, "limits": limits,
	}
	if len(o.Args) > 0 || len(o.Positional) > 0 {
		named := make([][2]string, 0, len(o.Args))
		for _, a := range o.Args {
			text, err := json.Marshal(a.Value)
			if err != nil {
				return nil, err
			}
			named = append(named, [2]string{a.Name, string(text)})
		}
		positional := make([]string, 0, len(o.Positional))
		for _, v := range o.Positional {
			text, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			positional = append(positional, string(text))
		}
		run["args"] = map[string]any{"named": orderedObject(named), "positional": positional}
	}
	return map[string]any{"run": run}, nil
}

// Run evaluates filter over input, a JSON text, sent raw after the request.
func (c *Client) Run(ctx context.Context, filter string, input []byte, o *RunOptions) (*Result, error) {
	return c.run(ctx, filter, map[string]any{"inline": len(input)}, input, o)
}

// RunValue evaluates filter over v, which is encoded as JSON first (json.RawMessage is sent
// as it is).
func (c *Client) RunValue(ctx context.Context, filter string, v any, o *RunOptions) (*Result, error) {
	input, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return c.Run(ctx, filter, input, o)
}

// RunHide evaluates filter over one of the caller's hides, read by the daemon off its disk.
func (c *Client) RunHide(ctx context.Context, filter, id string, o *RunOptions) (*Result, error) {
	return c.run(ctx, filter, map[string]any{"hide": id}, nil, o)
}

// RunValues evaluates filter over a stream of JSON texts, which it reads with jq's input and
// inputs; with nullInput it runs once on null (jq -n), else once per value not yet read.
func (c *Client) RunValues(ctx context.Context, filter string, values []byte, nullInput bool, o *RunOptions) (*Result, error) {
	input := map[string]any{"values": map[string]any{"values": len(values), "null_input": nullInput}}
	return c.run(ctx, filter, input, values, o)
}

// Shape is the bounded shape summary of a JSON text (PROTOCOL.md, "Shape request").
func (c *Client) Shape(ctx context.Context, input []byte) (json.RawMessage, error) {
	r, err := c.Run(ctx, "", input, &RunOptions{Lang: LangShape})
	if err != nil {
		return nil, err
	}
	return r.Output, nil
}

// ShapeHide is the shape summary of one of the caller's hides.
func (c *Client) ShapeHide(ctx context.Context, id string) (json.RawMessage, error) {
	r, err := c.RunHide(ctx, "", id, &RunOptions{Lang: LangShape})
	if err != nil {
		return nil, err
	}
	return r.Output, nil
}

func (c *Client) run(ctx context.Context, filter string, input any, tail []byte, o *RunOptions) (*Result, error) {
	request, err := o.request(filter, input)
	if err != nil {
		return nil, err
	}
	r, out, err := c.call(ctx, request, tail, "run", "hidden")
	if err != nil {
		return nil, err
	}
	if r.kind == "hidden" {
		var h Hidden
		if err := json.Unmarshal(r.fields, &h); err != nil {
			return nil, unavailable("the daemon's hidden answer does not decode: %v", err)
		}
		h.First.Content = out
		return &Result{Cost: h.Cost, Hidden: &h}, nil
	}
	var reply struct {
		Cost Cost `json:"cost"`
	}
	if err := json.Unmarshal(r.fields, &reply); err != nil {
		return nil, unavailable("the daemon's run answer does not decode: %v", err)
	}
	return &Result{Output: out, Cost: reply.Cost}, nil
}

// PutResult is a put's answer: the hide, whether it is new (false: the same content was
// there), and the hides the tenant's retention deleted to make room.
type PutResult struct {
	Entry   HideEntry `json:"entry"`
	Created bool      `json:"created"`
	Evicted []string  `json:"evicted"`
}

// HidePut stores content as a hide of the caller; the same content from the same source
// gives the same ID again.
func (c *Client) HidePut(ctx context.Context, kind, source string, content []byte, meta map[string]string) (*PutResult, error) {
	return decodeInto[PutResult](ctx, c, putRequest(kind, source, len(content), meta), content, "hide_put")
}

func putRequest(kind, source string, contentBytes int, meta map[string]string) any {
	if meta == nil {
		meta = map[string]string{}
	}
	return map[string]any{"hide_put": map[string]any{
		"kind": kind, "source": source, "meta": meta, "content_bytes": contentBytes,
	}}
}

func idRequest(kind, id string) any {
	return map[string]any{kind: map[string]any{"id": id}}
}

// HideGet is a hide's entry and its whole content.
func (c *Client) HideGet(ctx context.Context, id string) (*HideEntry, []byte, error) {
	r, tail, err := c.call(ctx, idRequest("hide_get", id), nil, "hide_content")
	if err != nil {
		return nil, nil, err
	}
	var reply struct {
		Entry HideEntry `json:"entry"`
	}
	if err := json.Unmarshal(r.fields, &reply); err != nil {
		return nil, nil, unavailable("the daemon's hide_content answer does not decode: %v", err)
	}
	return &reply.Entry, tail, nil
}

// HideCut is page `page` (from 1) of a hide at pageSize bytes a page (0: 16,384), with the
// reflection hint for a model when hint is set.
func (c *Client) HideCut(ctx context.Context, id string, page, pageSize uint64, hint bool) (*HideCut, error) {
	r, tail, err := c.call(ctx, cutRequest(id, page, pageSize, hint), nil, "hide_cut")
	if err != nil {
		return nil, err
	}
	var cut HideCut
	if err := json.Unmarshal(r.fields, &cut); err != nil {
		return nil, unavailable("the daemon's hide_cut answer does not decode: %v", err)
	}
	cut.Content = tail
	return &cut, nil
}

func cutRequest(id string, page, pageSize uint64, hint bool) any {
	return map[string]any{"hide_cut": map[string]any{
		"id": id, "page": page, "page_size": optional(pageSize), "hint": hint,
	}}
}

// PageOptions tune HidePage; the zero value is a JSON page of at most 16,384 bytes with no
// reflection hint.
type PageOptions struct {
	PageSize uint64
	Hint     bool
	// Bytes asks for byte pages (as HideCut cuts them) instead of JSON pages.
	Bytes bool
}

// HidePage is page `page` (from 1) of a hide in JSON pages: pages that end between values and
// name their paths (a hide that is not one JSON value is cut in bytes, and the answer says so).
// Protocol 3.
func (c *Client) HidePage(ctx context.Context, id string, page uint64, opts PageOptions) (*HidePage, error) {
	return c.hidePage(ctx, pageRequest(id, map[string]any{"page": page}, opts))
}

// HidePageAt is the JSON page that holds the value at path: "$[130].labels", a jq path
// expression of keys and indices (".[130].labels") or jq's array form (`[130,"labels"]`).
// A path the hide has no value at is NOT_FOUND.
func (c *Client) HidePageAt(ctx context.Context, id, path string, opts PageOptions) (*HidePage, error) {
	return c.hidePage(ctx, pageRequest(id, map[string]any{"path": path}, opts))
}

// HidePageHolding is the page that holds byte offset of the hide (a search match's, say), in
// JSON pages or, with opts.Bytes, byte pages.
func (c *Client) HidePageHolding(ctx context.Context, id string, offset uint64, opts PageOptions) (*HidePage, error) {
	return c.hidePage(ctx, pageRequest(id, map[string]any{"offset": offset}, opts))
}

func (c *Client) hidePage(ctx context.Context, request any) (*HidePage, error) {
	r, tail, err := c.call(ctx, request, nil, "hide_page")
	if err != nil {
		return nil, err
	}
	var page HidePage
	if err := json.Unmarshal(r.fields, &page); err != nil {
		return nil, unavailable("the daemon's hide_page answer does not decode: %v", err)
	}
	page.Content = tail
	return &page, nil
}

func pageRequest(id string, at map[string]any, opts PageOptions) any {
	pages := "json"
	if opts.Bytes {
		pages = "bytes"
	}
	return map[string]any{"hide_page": map[string]any{
		"id": id, "at": at, "page_size": optional(opts.PageSize), "hint": opts.Hint, "pages": pages,
	}}
}

// EndsOptions tune HideEnds; the zero value is two ends of 8,192 bytes at most, no reflection
// hint, paths shown whole (up to 1,024 bytes).
type EndsOptions struct {
	// PageSize is what both ends may hold together (128 to 1,048,576; 0: 16,384).
	PageSize     uint64
	Hint         bool
	MaxPathBytes uint32
}

// HideEnds is a hide's head and tail: its beginning and its end, each a JSON page at half the
// page size (byte pages for a hide that is not one JSON value), and what lies between them,
// by bytes, paths and the elements of one array. Protocol 4.
func (c *Client) HideEnds(ctx context.Context, id string, opts EndsOptions) (*HideEnds, error) {
	r, tail, err := c.call(ctx, endsRequest(id, opts), nil, "hide_ends")
	if err != nil {
		return nil, err
	}
	var ends HideEnds
	if err := json.Unmarshal(r.fields, &ends); err != nil {
		return nil, unavailable("the daemon's hide_ends answer does not decode: %v", err)
	}
	ends.Content = tail
	if err := checkEnds(&ends); err != nil {
		return nil, err
	}
	return &ends, nil
}

// checkEnds refuses a head and tail that does not make the hide: head, what is left out and
// tail must be the hide, the content both ends, the elements in order and in their array (a
// lying daemon's numbers are never sliced or summed).
func checkEnds(e *HideEnds) error {
	var tailLen, leftBytes uint64
	if e.Tail != nil {
		tailLen = e.Tail.Length
	}
	if e.LeftOut != nil {
		leftBytes = e.LeftOut.Bytes
	}
	const max = ^uint64(0)
	ok := e.Head.Offset == 0 &&
		e.Head.Length <= max-tailLen && e.Head.Length+tailLen == uint64(len(e.Content)) &&
		leftBytes <= max-e.Head.Length-tailLen && e.Head.Length+leftBytes+tailLen == e.Size &&
		e.Size <= 1<<62 &&
		(e.LeftOut == nil || (e.Tail != nil && e.LeftOut.Offset == e.Head.Length)) &&
		(e.Tail == nil || e.Tail.Offset == e.Head.Length+leftBytes)
	if ok && e.LeftOut != nil && e.LeftOut.Elements != nil {
		el := e.LeftOut.Elements
		ok = el.From <= el.To && (el.Length == nil || el.To < *el.Length)
	}
	if !ok {
		return unavailable("the daemon's head and tail of %s do not make the hide", e.HideID)
	}
	return nil
}

func endsRequest(id string, opts EndsOptions) any {
	return map[string]any{"hide_ends": map[string]any{
		"id": id, "page_size": optional(opts.PageSize), "hint": opts.Hint,
		"max_path_bytes": optional(uint64(opts.MaxPathBytes)),
	}}
}

// SearchOptions tune HideSearch; the zero value is case-sensitive, 16,384-byte pages, at
// most 100 matches.
type SearchOptions struct {
	IgnoreCase bool
	PageSize   uint64
	MaxMatches uint32
}

// Match is one occurrence: the page its first byte is on, and its byte offset.
type Match struct {
	Page   uint64 `json:"page"`
	Offset uint64 `json:"offset"`
}

// SearchResult lists every occurrence of a query in a hide, in ascending offset.
type SearchResult struct {
	HideID     string  `json:"hide_id"`
	Matches    []Match `json:"matches"`
	Truncated  bool    `json:"truncated"`
	TotalPages uint64  `json:"total_pages"`
	PageSize   uint64  `json:"page_size"`
}

// HideSearch finds every occurrence of query (literal, 1 to 1,024 bytes) in a hide.
func (c *Client) HideSearch(ctx context.Context, id, query string, o SearchOptions) (*SearchResult, error) {
	return decodeInto[SearchResult](ctx, c, searchRequest(id, query, o), nil, "hide_search")
}

func searchRequest(id, query string, o SearchOptions) any {
	return map[string]any{"hide_search": map[string]any{
		"id": id, "query": query, "ignore_case": o.IgnoreCase, "page_size": optional(o.PageSize),
		"max_matches": optional(uint64(o.MaxMatches)),
	}}
}

// HideListPage is one page of the caller's hides, newest first; Next is the offset of the
// next page, nil on the last.
type HideListPage struct {
	Entries []HideEntry `json:"entries"`
	Total   uint64      `json:"total"`
	Next    *uint64     `json:"next"`
}

// HideListPage lists up to limit (0: 100) of the caller's hides from offset, newest first.
func (c *Client) HideListPage(ctx context.Context, offset uint64, limit uint32) (*HideListPage, error) {
	return decodeInto[HideListPage](ctx, c, listRequest(offset, limit), nil, "hide_list")
}

func listRequest(offset uint64, limit uint32) any {
	return map[string]any{"hide_list": map[string]any{"offset": offset, "limit": optional(uint64(limit))}}
}

// MaxListed is the most hides HideList gathers: the store's own cap per tenant.
const MaxListed = 10_000

// HideList lists all of the caller's hides, newest first, a page at a time (at most
// MaxListed; a daemon whose pages do not move on is refused).
func (c *Client) HideList(ctx context.Context) ([]HideEntry, error) {
	var all []HideEntry
	offset := uint64(0)
	for {
		page, err := c.HideListPage(ctx, offset, 1000)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Entries...)
		if page.Next == nil {
			return all, nil
		}
		if *page.Next != offset+uint64(len(page.Entries)) || len(page.Entries) == 0 || len(all) > MaxListed {
			return nil, unavailable("the daemon's hide list does not move on (offset %d, %d entries, next %d, %d gathered)",
				offset, len(page.Entries), *page.Next, len(all))
		}
		offset = *page.Next
	}
}

// HideDelete deletes a hide, returning what was deleted.
func (c *Client) HideDelete(ctx context.Context, id string) (*HideEntry, error) {
	return decodeInto[HideEntry](ctx, c, idRequest("hide_delete", id), nil, "hide_entry")
}

// HideUsage is what the caller holds in the store and may hold.
type HideUsage struct {
	Entries    uint64 `json:"entries"`
	Bytes      uint64 `json:"bytes"`
	QuotaBytes uint64 `json:"quota_bytes"`
	MaxAgeSecs uint64 `json:"max_age_secs"`
}

// HideUsage is the caller's usage of the store.
func (c *Client) HideUsage(ctx context.Context) (*HideUsage, error) {
	return decodeInto[HideUsage](ctx, c, "hide_usage", nil, "hide_usage")
}

// Stats are the daemon's counters, as far as the caller may see them.
type Stats struct {
	UptimeMs            uint64      `json:"uptime_ms"`
	Outcomes            []Outcome   `json:"outcomes"`
	Latency             Latency     `json:"latency"`
	Running             uint64      `json:"running"`
	Waiting             uint64      `json:"waiting"`
	Connections         uint64      `json:"connections"`
	WorkersStarted      uint64      `json:"workers_started"`
	WorkerStartFailures uint64      `json:"worker_start_failures"`
	Tenants             []TenantRow `json:"tenants"`
}

// Outcome counts the runs answered with one code ("OK" or an error code).
type Outcome struct {
	Code  string
	Count uint64
}

// UnmarshalJSON reads the wire's [code, count] pair.
func (o *Outcome) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return fmt.Errorf("an outcome is a [code, count] pair, got %d items", len(pair))
	}
	if err := json.Unmarshal(pair[0], &o.Code); err != nil {
		return err
	}
	return json.Unmarshal(pair[1], &o.Count)
}

// Latency is the wall time of the last runs, in microseconds.
type Latency struct {
	Count uint64 `json:"count"`
	P50Us uint64 `json:"p50_us"`
	P90Us uint64 `json:"p90_us"`
	P99Us uint64 `json:"p99_us"`
}

// TenantRow is one tenant's counters.
type TenantRow struct {
	Name     string `json:"name"`
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
}

// Stats asks for the daemon's counters.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	return decodeInto[Stats](ctx, c, "stats", nil, "stats")
}

// decodeInto sends a request without an answer tail and decodes its answer's fields.
func decodeInto[T any](ctx context.Context, c *Client, request any, tail []byte, kind string) (*T, error) {
	r, _, err := c.call(ctx, request, tail, kind)
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(r.fields, &out); err != nil {
		return nil, unavailable("the daemon's %s answer does not decode: %v", kind, err)
	}
	return &out, nil
}

func optional(n uint64) any {
	if n == 0 {
		return nil
	}
	return n
}
