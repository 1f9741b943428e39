// Package hide is the persistent store of oversized tool outputs ("hides") and the per-turn
// paginator that serves them to a model through the hide_next, hide_jump and hide_search
// tools, as the flock'd directory store it replaces offered, now kept by a jqjail daemon:
// hides are owned by the uid that put them, paged off the daemon's disk, and can be
// filtered by ID with jq (jqjail.Client.RunHide).
//
// Changing from the old package: its import path becomes "jqjail.dev/jqjail/hide", and
// NewStore takes the daemon's Socket ("" to find it) instead of a directory: a directory in a
// string variable does not compile there, rather than fail at run time. Every other call keeps
// the seed's signature. HideBuffer.Store can now fail (storing crosses a socket): it still
// returns the seed's *Hide, the failure is kept (Err, and FirstCut returns it), and Put is the
// form that returns it. Page sizes under MinPageSize are raised to it.
package hide

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"jqjail.dev/jqjail"
)

// Hide is one stored input.
type Hide struct {
	ID        string
	Source    string
	Content   string
	CreatedAt time.Time
}

// Cut is one page of a hide (pages from 1). Preface is the reflection hint a model gets with
// page 1 of a FirstCut: where it is, and to summarise before paging on. A buffer's pages are
// JSON pages where the hide is JSON: they end between values, First and Last are the paths
// of the values the page starts and ends in ("$[3].labels[0]"), and Array the array it is in
// with its ArrayLength ("" and 0 on byte pages, and where no array is open).
type Cut struct {
	HideID      string
	Page        int
	TotalPages  int
	Content     string
	Preface     string
	First       string
	Last        string
	Array       string
	ArrayLength int
}

// StoreEntry is a hide's metadata.
type StoreEntry struct {
	ID        string
	Kind      string
	Source    string
	SizeBytes int64
	Meta      map[string]string
	CreatedAt time.Time
}

// DefaultPageSize is the daemon's page size (bytes).
const DefaultPageSize = 16_384

// MinPageSize and MaxPageSize bound a page (bytes): a buffer asked for a size outside them
// pages at the nearest bound (the daemon refuses a cut of another size).
const (
	MinPageSize = 64
	MaxPageSize = 1 << 20
)

// callTimeout bounds each call the store makes on the daemon.
const callTimeout = 30 * time.Second

// Store is the caller's part of the daemon's hide store. Its methods may be called from
// several goroutines.
type Store struct {
	socket string
	mu     sync.Mutex
	client *jqjail.Client
}

// Socket is a jqjail daemon's socket path; "" finds it as every jqjail client does.
type Socket string

// NewStore is the store of the daemon at socket; it connects on first use, and again after a
// connection fails. (The seed's NewStore took a directory: the hides now live in the daemon's
// store, and a string variable does not convert to a Socket silently.)
func NewStore(socket Socket) *Store {
	return &Store{socket: string(socket)}
}

// with runs f on a connection, dialling one if there is none; a connection that failed is
// dropped, so the next call dials again.
func (s *Store) with(f func(ctx context.Context, c *jqjail.Client) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		c, err := jqjail.Dial(ctx, s.socket)
		if err != nil {
			return fmt.Errorf("hide: %w", err)
		}
		s.client = c
	}
	err := f(ctx, s.client)
	var e *jqjail.Error
	if err != nil && (!errors.As(err, &e) || e.Code == jqjail.Unavailable) {
		s.client.Close()
		s.client = nil
	}
	if err != nil {
		return fmt.Errorf("hide: %w", err)
	}
	return nil
}

func entryOf(e *jqjail.HideEntry) StoreEntry {
	return StoreEntry{
		ID: e.ID, Kind: e.Kind, Source: e.Source, SizeBytes: int64(e.Size), Meta: e.Meta,
		CreatedAt: time.UnixMilli(int64(e.CreatedMs)),
	}
}

func cutOf(c *jqjail.HideCut) Cut {
	return Cut{
		HideID: c.HideID, Page: int(c.Page), TotalPages: int(c.TotalPages),
		Content: string(c.Content), Preface: c.Preface,
	}
}

func pageOf(p *jqjail.HidePage) Cut {
	cut := Cut{
		HideID: p.HideID, Page: int(p.Page), TotalPages: int(p.TotalPages),
		Content: string(p.Content), Preface: p.Preface,
	}
	if p.JSON != nil {
		cut.First, cut.Last = p.JSON.First, p.JSON.Last
		if p.JSON.Array != nil {
			cut.Array, cut.ArrayLength = p.JSON.Array.Path, int(p.JSON.Array.Length)
		}
	}
	return cut
}

// at is where a buffer opens a hide: a page number, a path, or the page holding a byte.
type at struct {
	page   int
	path   string
	offset uint64
	// byOffset: offset names the page (offset 0 is a real offset).
	byOffset bool
}

// page is one JSON page of a hide at pageSize bytes a page.
func (s *Store) page(id string, where at, pageSize int, hint bool) (Cut, error) {
	var out Cut
	opts := jqjail.PageOptions{PageSize: uint64(pageSize), Hint: hint}
	err := s.with(func(ctx context.Context, c *jqjail.Client) error {
		var p *jqjail.HidePage
		var err error
		switch {
		case where.path != "":
			p, err = c.HidePageAt(ctx, id, where.path, opts)
		case where.byOffset:
			p, err = c.HidePageHolding(ctx, id, where.offset, opts)
		case where.page < 1:
			return fmt.Errorf("hide: page %d: pages start at 1", where.page)
		default:
			p, err = c.HidePage(ctx, id, uint64(where.page), opts)
		}
		if err == nil {
			out = pageOf(p)
		}
		return err
	})
	return out, err
}

// Put persists one hide; the same content from the same source gives the same ID again.
func (s *Store) Put(kind, source string, content []byte, meta map[string]string) (StoreEntry, error) {
	var out StoreEntry
	err := s.with(func(ctx context.Context, c *jqjail.Client) error {
		put, err := c.HidePut(ctx, kind, source, content, meta)
		if err == nil {
			out = entryOf(&put.Entry)
		}
		return err
	})
	return out, err
}

// Get reads a hide's metadata and bytes.
func (s *Store) Get(id string) (StoreEntry, []byte, error) {
	var out StoreEntry
	var content []byte
	err := s.with(func(ctx context.Context, c *jqjail.Client) error {
		entry, bytes, err := c.HideGet(ctx, id)
		if err == nil {
			out, content = entryOf(entry), bytes
		}
		return err
	})
	return out, content, err
}

// Cut is page `page` (from 1) at pageSizeBytes a page (64 to 1,048,576), paged off the
// daemon's disk; no page splits a UTF-8 character.
func (s *Store) Cut(id string, page, pageSizeBytes int) (Cut, error) {
	return s.cut(id, page, pageSizeBytes, false)
}

func (s *Store) cut(id string, page, pageSize int, hint bool) (Cut, error) {
	if page < 1 || pageSize < 1 {
		return Cut{}, fmt.Errorf("hide: page %d at %d bytes a page: both must be positive", page, pageSize)
	}
	var out Cut
	err := s.with(func(ctx context.Context, c *jqjail.Client) error {
		cut, err := c.HideCut(ctx, id, uint64(page), uint64(pageSize), hint)
		if err == nil {
			out = cutOf(cut)
		}
		return err
	})
	return out, err
}

// List is every hide of the caller, newest first.
func (s *Store) List() ([]StoreEntry, error) {
	var out []StoreEntry
	err := s.with(func(ctx context.Context, c *jqjail.Client) error {
		entries, err := c.HideList(ctx)
		for i := range entries {
			out = append(out, entryOf(&entries[i]))
		}
		return err
	})
	return out, err
}

// Delete removes a hide.
func (s *Store) Delete(id string) error {
	return s.with(func(ctx context.Context, c *jqjail.Client) error {
		_, err := c.HideDelete(ctx, id)
		return err
	})
}

// LoadIntoBuffer is a buffer whose latest hide is the stored hide id.
func (s *Store) LoadIntoBuffer(id string, pageSize int) (*HideBuffer, error) {
	b := s.NewHideBuffer(pageSize)
	entry, _, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	b.latest, b.latestSize = entry.ID, int(entry.SizeBytes)
	return b, nil
}

// HideBuffer pages oversized tool outputs for one turn of a model: it remembers the latest
// hide and, per hide, the last page served, so hide_next reads on. The pages stay on the
// daemon's disk. Its methods may be called from several goroutines.
type HideBuffer struct {
	store      *Store
	pageSize   int
	mu         sync.Mutex
	latest     string
	latestSize int
	cursors    map[string]int
	// Why the last Store failed, and whether its content needed paging.
	failed     error
	failedSize int
	// What FirstAnswer shows.
	first First
}

// First is what a buffer's first answer of an oversized output shows.
type First int

const (
	// HeadAndTail is its beginning and its end, each half a page, and what lies between them
	// (the default: a reader knows, say, the main array's length from it; jqjail-bench --reader).
	HeadAndTail First = iota
	// Page is page 1.
	Page
)

// MinEndsPageSize is the smallest page size a head and tail is cut at (two ends of the
// smallest page); a buffer of smaller pages shows page 1 first.
const MinEndsPageSize = 128

// SetFirst makes FirstAnswer show first.
func (b *HideBuffer) SetFirst(first First) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.first = first
}

// FirstAnswer is the first answer of a hide ("" for the latest) with the reflection hint, as a
// model reads it: its head and tail (then Next reads page 1), or page 1 (then page 2), as
// SetFirst chose.
func (b *HideBuffer) FirstAnswer(id string) (string, error) {
	id, err := b.pick(id)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	first := b.first
	b.mu.Unlock()
	if first == Page || b.pageSize < MinEndsPageSize {
		cut, err := b.serve(id, at{page: 1}, true)
		if err != nil {
			return "", err
		}
		return Format(cut), nil
	}
	var ends *jqjail.HideEnds
	err = b.store.with(func(ctx context.Context, c *jqjail.Client) error {
		var err error
		ends, err = c.HideEnds(ctx, id, jqjail.EndsOptions{PageSize: uint64(b.pageSize), Hint: true})
		return err
	})
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.latest, b.latestSize = ends.HideID, int(ends.Size)
	delete(b.cursors, ends.HideID)
	b.mu.Unlock()
	return FormatEnds(ends), nil
}

// FormatEnds is a head and tail as a model sees it: the hint, the head with a header naming
// its bytes and paths, a line for what is left out between (bytes, paths, the elements of one
// array), the tail with its header, an end marker.
func FormatEnds(e *jqjail.HideEnds) string {
	var out strings.Builder
	if e.Preface != "" {
		out.WriteString(e.Preface + "\n")
	}
	header := func(what string, end jqjail.End) {
		fmt.Fprintf(&out, "[HIDE id=%s %s: bytes %d..%d of %d", e.HideID, what, end.Offset, end.Offset+end.Length, e.Size)
		if end.JSON != nil {
			fmt.Fprintf(&out, " · %s … %s", end.JSON.First, end.JSON.Last)
		}
		out.WriteString("]\n")
	}
	head := len(e.Content)
	if int(e.Head.Length) < head {
		head = int(e.Head.Length)
	}
	header("head", e.Head)
	out.Write(e.Content[:head])
	if l := e.LeftOut; l != nil {
		fmt.Fprintf(&out, "\n[… left out: bytes %d..%d (%d bytes)", l.Offset, l.Offset+l.Bytes, l.Bytes)
		if l.First != "" && l.Last != "" {
			fmt.Fprintf(&out, " · %s … %s", l.First, l.Last)
		}
		if el := l.Elements; el != nil {
			fmt.Fprintf(&out, " · elements %d to %d of %s, in whole or in part", el.From, el.To, el.Array)
			if el.Length != nil {
				fmt.Fprintf(&out, " (%d elements)", *el.Length)
			}
		}
		out.WriteString(" …]")
	}
	if e.Tail != nil {
		out.WriteString("\n")
		header("tail", *e.Tail)
		out.Write(e.Content[head:])
	}
	fmt.Fprintf(&out, "\n[END head and tail of %s; hide_next reads from page 1]", e.HideID)
	return out.String()
}

// NewHideBuffer is a buffer of pageSize-byte pages over the store of the daemon found as
// every jqjail client finds it.
func NewHideBuffer(pageSize int) *HideBuffer {
	return NewStore("").NewHideBuffer(pageSize)
}

// NewHideBuffer is a buffer of pageSize-byte pages over this store: 0 or less is
// DefaultPageSize, and a size outside MinPageSize..MaxPageSize is the nearest bound.
func (s *Store) NewHideBuffer(pageSize int) *HideBuffer {
	switch {
	case pageSize <= 0:
		pageSize = DefaultPageSize
	case pageSize < MinPageSize:
		pageSize = MinPageSize
	case pageSize > MaxPageSize:
		pageSize = MaxPageSize
	}
	return &HideBuffer{store: s, pageSize: pageSize, cursors: map[string]int{}}
}

// PageSize is the size of this buffer's pages, in bytes.
func (b *HideBuffer) PageSize() int { return b.pageSize }

// ToolOutputKind is the kind of the hides a buffer stores.
const ToolOutputKind = "tool_output"

// Store adds a hide (kind tool_output) and makes it the latest, as the seed's did. If the
// daemon cannot store it, the *Hide has no ID, Err says why, NeedsPaging is true when the
// content was larger than a page (so it is not put in a prompt whole) and FirstCut returns
// the error. Put returns the error instead.
func (b *HideBuffer) Store(source, content string) *Hide {
	h, err := b.Put(source, content)
	if err != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.latest, b.latestSize = "", 0
		b.failed, b.failedSize = err, len(content)
		return &Hide{Source: source, Content: content, CreatedAt: time.Now()}
	}
	return h
}

// Put adds a hide (kind tool_output) and makes it the latest, or says why it cannot.
func (b *HideBuffer) Put(source, content string) (*Hide, error) {
	entry, err := b.store.Put(ToolOutputKind, source, []byte(content), nil)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.latest, b.latestSize = entry.ID, int(entry.SizeBytes)
	b.failed, b.failedSize = nil, 0
	delete(b.cursors, entry.ID)
	return &Hide{ID: entry.ID, Source: source, Content: content, CreatedAt: entry.CreatedAt}, nil
}

// Err is why the last Store failed, or nil.
func (b *HideBuffer) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

// Get reads a hide back; false when there is none of that ID for the caller, or the daemon
// could not be asked (Load says which).
func (b *HideBuffer) Get(id string) (*Hide, bool) {
	h, err := b.Load(id)
	return h, err == nil
}

// Load reads a hide back, or says why it cannot.
func (b *HideBuffer) Load(id string) (*Hide, error) {
	entry, content, err := b.store.Get(id)
	if err != nil {
		return nil, err
	}
	return &Hide{ID: entry.ID, Source: entry.Source, Content: string(content), CreatedAt: entry.CreatedAt}, nil
}

// Cut is page `page` (from 1) of a hide, which becomes that hide's position for Next.
func (b *HideBuffer) Cut(id string, page int) (Cut, error) {
	return b.serve(id, at{page: page}, false)
}

// Jump is the JSON page holding the value at path ("$[17].labels" or ".[17].labels"), which
// becomes that hide's position for Next.
func (b *HideBuffer) Jump(id, path string) (Cut, error) {
	return b.serve(id, at{path: path}, false)
}

// Next is the page after the last one served of hide id ("" for the latest).
func (b *HideBuffer) Next(id string) (Cut, error) {
	id, err := b.pick(id)
	if err != nil {
		return Cut{}, err
	}
	b.mu.Lock()
	page := b.cursors[id] + 1
	b.mu.Unlock()
	return b.serve(id, at{page: page}, false)
}

// Search is the page holding the first occurrence of query; false when there is none.
func (b *HideBuffer) Search(id, query string) (Cut, bool, error) {
	return b.search(id, query, false)
}

func (b *HideBuffer) search(id, query string, ignoreCase bool) (Cut, bool, error) {
	var found *jqjail.SearchResult
	err := b.store.with(func(ctx context.Context, c *jqjail.Client) error {
		var err error
		found, err = c.HideSearch(ctx, id, query, jqjail.SearchOptions{
			IgnoreCase: ignoreCase, PageSize: uint64(b.pageSize), MaxMatches: 1,
		})
		return err
	})
	if err != nil {
		return Cut{}, false, err
	}
	if len(found.Matches) == 0 {
		return Cut{}, false, nil
	}
	// The search's page numbers are byte pages': the page is found by the match's offset.
	cut, err := b.serve(id, at{offset: found.Matches[0].Offset, byOffset: true}, false)
	return cut, err == nil, err
}

// NeedsPaging: the latest hide is larger than a page (or the last Store failed on content
// that was: it must not go into a prompt whole either).
func (b *HideBuffer) NeedsPaging() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed != nil {
		return b.failedSize > b.pageSize
	}
	return b.latest != "" && b.latestSize > b.pageSize
}

// FirstCut is page 1 of the latest hide, with the reflection hint.
func (b *HideBuffer) FirstCut() (Cut, error) {
	id, err := b.pick("")
	if err != nil {
		return Cut{}, err
	}
	return b.serve(id, at{page: 1}, true)
}

// TakeOver makes a run's hidden output (jqjail.Result.Hidden) the latest hide. Its page 1 (a
// byte page at the daemon's page size) counts as served when it is this buffer's page 1: the
// whole hide in one page of this buffer's size, so Next goes on to page 2; otherwise Next
// serves page 1 as this buffer cuts pages (JSON pages end elsewhere), rather than skip bytes.
func (b *HideBuffer) TakeOver(h *jqjail.Hidden) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.latest, b.latestSize = h.Entry.ID, int(h.Entry.Size)
	delete(b.cursors, h.Entry.ID)
	if int(h.First.PageSize) == b.pageSize && h.First.TotalPages == 1 {
		b.cursors[h.Entry.ID] = 1
	}
}

func (b *HideBuffer) serve(id string, where at, hint bool) (Cut, error) {
	cut, err := b.store.page(id, where, b.pageSize, hint)
	if err != nil {
		return Cut{}, err
	}
	b.mu.Lock()
	b.cursors[cut.HideID] = cut.Page
	b.mu.Unlock()
	return cut, nil
}

func (b *HideBuffer) pick(id string) (string, error) {
	if id != "" {
		return id, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed != nil {
		return "", b.failed
	}
	if b.latest == "" {
		return "", &jqjail.Error{Code: "NOT_FOUND", Message: "no hide was stored or loaded in this buffer yet"}
	}
	return b.latest, nil
}

// Format is a page as a model sees it: the hint (page 1), a header, the text, an end marker.
func Format(c Cut) string {
	var out strings.Builder
	if c.Preface != "" {
		out.WriteString(c.Preface + "\n")
	}
	fmt.Fprintf(&out, "[HIDE id=%s page=%d/%d", c.HideID, c.Page, c.TotalPages)
	if c.First != "" {
		fmt.Fprintf(&out, " · %s … %s", c.First, c.Last)
		if c.Array != "" {
			fmt.Fprintf(&out, " · in %s (%d elements)", c.Array, c.ArrayLength)
		}
	}
	fmt.Fprintf(&out, "]\n%s\n[END page %d/%d]", c.Content, c.Page, c.TotalPages)
	return out.String()
}

// CallTool answers a model's hide_next, hide_jump or hide_search call (arguments as the
// tool definitions give them) with text for the model; failures as "error: CODE: …".
func (b *HideBuffer) CallTool(name string, args map[string]any) string {
	id, _ := args["hide_id"].(string)
	answer := func(c Cut, err error) string {
		if err != nil {
			return "error: " + strings.TrimPrefix(err.Error(), "hide: ")
		}
		return Format(c)
	}
	switch name {
	case "hide_next":
		return answer(b.Next(id))
	case "hide_jump":
		page, isPage := args["page"].(float64)
		path, isPath := args["path"].(string)
		_, hasPage := args["page"]
		if isPath && !hasPage {
			id, err := b.pick(id)
			if err != nil {
				return answer(Cut{}, err)
			}
			return answer(b.Jump(id, path))
		}
		if !isPage || isPath || page < 1 || page != float64(int(page)) {
			return "error: hide_jump needs a positive integer `page` or a string `path`, one of the two"
		}
		id, err := b.pick(id)
		if err != nil {
			return answer(Cut{}, err)
		}
		return answer(b.Cut(id, int(page)))
	case "hide_search":
		query, ok := args["query"].(string)
		if !ok {
			return "error: hide_search needs a string `query`"
		}
		id, err := b.pick(id)
		if err != nil {
			return answer(Cut{}, err)
		}
		ignoreCase, _ := args["ignore_case"].(bool)
		cut, found, err := b.search(id, query, ignoreCase)
		if err != nil {
			return answer(Cut{}, err)
		}
		if !found {
			return fmt.Sprintf("Not found: %q does not occur in hide %s.", query, id)
		}
		return fmt.Sprintf("Found %q on page %d:\n%s", query, cut.Page, answer(cut, nil))
	}
	return "error: " + name + " is not a hide tool"
}

// ToolDefs are the seed's tool definitions for a model: hide_next, hide_jump and
// hide_search, from the same list as `jqjail tools`. AllToolDefs adds jq, json_path and
// json_shape.
func ToolDefs() []jqjail.ToolDefinition {
	var defs []jqjail.ToolDefinition
	for _, d := range jqjail.ToolDefs() {
		if strings.HasPrefix(d.Name, "hide_") {
			defs = append(defs, d)
		}
	}
	return defs
}

// AllToolDefs are every jqjail tool's definition: the hide tools, jq, json_path and
// json_shape.
func AllToolDefs() []jqjail.ToolDefinition {
	return jqjail.ToolDefs()
}
