package imagescan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// sqliteTable reads the rows of one table of an SQLite database file, read-only,
// page by page, with nothing but the file format (sqlite.org/fileformat2.html):
// enough for the RPM database (rpmdb.sqlite), whose Packages table is all the scanner
// needs. Linking a whole SQLite engine for that would cost every manager about 4 MB
// of resident memory, scanning or not.
//
// Not read: a write-ahead log beside the file (an image holds a closed database,
// checkpointed), indexes, and views.
type sqliteTable struct {
	r        io.ReaderAt
	pageSize int
	usable   int // the page size less the reserved bytes at the end of each page
	pages    int // the file's size in pages: a bound on any page number and on a walk
	// read is what the rows read so far add up to. A database holds each byte of a
	// row once, so more than the file is a crafted file whose cells point at one row
	// many times (a 2 KB file made 90 KB of rows, a 1 MB one could make gigabytes).
	read int64
	// leaf is the page row read last: the cells of a page come one after another.
	leaf struct {
		n uint32
		p []byte
	}
}

var sqliteMagic = []byte("SQLite format 3\x00")

// openSQLite checks the header of the database file r of size bytes.
func openSQLite(r io.ReaderAt, size int64) (*sqliteTable, error) {
	var h [100]byte
	if _, err := r.ReadAt(h[:], 0); err != nil {
		return nil, fmt.Errorf("reading the SQLite header: %w", err)
	}
	if !bytes.Equal(h[:16], sqliteMagic) {
		return nil, errors.New("not an SQLite 3 database")
	}
	pageSize := int(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return nil, fmt.Errorf("SQLite page size %d is not a power of two of at least 512", pageSize)
	}
	usable := pageSize - int(h[20])
	if usable < 480 {
		return nil, fmt.Errorf("SQLite usable page size %d is below 480", usable)
	}
	return &sqliteTable{r: r, pageSize: pageSize, usable: usable, pages: int(size / int64(pageSize))}, nil
}

// page reads page n (numbered from 1).
func (t *sqliteTable) page(n uint32) ([]byte, error) {
	if n == 0 || int(n) > t.pages {
		return nil, fmt.Errorf("SQLite page %d is outside the file's %d pages", n, t.pages)
	}
	p := make([]byte, t.pageSize)
	if _, err := t.r.ReadAt(p, int64(n-1)*int64(t.pageSize)); err != nil {
		return nil, fmt.Errorf("reading SQLite page %d: %w", n, err)
	}
	return p, nil
}

// rootPage finds the root page of the table name in the schema table (page 1).
func (t *sqliteTable) rootPage(name string) (uint32, error) {
	cells, err := t.cells(1)
	if err != nil {
		return 0, err
	}
	for _, c := range cells {
		rec, err := t.row(c)
		if err != nil {
			return 0, err
		}
		// type, name, tbl_name, rootpage, sql
		if len(rec) >= 4 && string(rec[0].text) == "table" && string(rec[1].text) == name {
			return uint32(rec[3].integer), nil
		}
	}
	return 0, fmt.Errorf("the SQLite database has no table %s", name)
}

// sqliteCell is where a row is: its leaf page and the cell's offset in it.
type sqliteCell struct {
	page uint32
	off  int
}

// cells lists the rows of the table b-tree rooted at root, in rowid order. A walk
// that visits more pages than the file has is a loop in a corrupt file, and an error.
func (t *sqliteTable) cells(root uint32) ([]sqliteCell, error) {
	var out []sqliteCell
	visited := 0
	var walk func(n uint32) error
	walk = func(n uint32) error {
		if visited++; visited > t.pages {
			return errors.New("SQLite b-tree visits more pages than the file has: corrupt")
		}
		p, err := t.page(n)
		if err != nil {
			return err
		}
		hdr := 0
		if n == 1 {
			hdr = 100 // the file header comes first on page 1
		}
		kind, cells := p[hdr], int(binary.BigEndian.Uint16(p[hdr+3:hdr+5]))
		ptrs := hdr + 8
		switch kind {
		case 0x05: // interior table page
			ptrs = hdr + 12
		case 0x0d: // leaf table page
		default:
			return fmt.Errorf("SQLite page %d: type %#x is not a table b-tree page", n, kind)
		}
		if ptrs+2*cells > len(p) {
			return fmt.Errorf("SQLite page %d: %d cells do not fit", n, cells)
		}
		for i := range cells {
			off := int(binary.BigEndian.Uint16(p[ptrs+2*i:]))
			if off < ptrs+2*cells || off+4 > len(p) {
				return fmt.Errorf("SQLite page %d: cell %d is outside the page's content", n, i)
			}
			if kind == 0x0d {
				out = append(out, sqliteCell{page: n, off: off})
				continue
			}
			// An interior cell: the left child, then a rowid.
			if err := walk(binary.BigEndian.Uint32(p[off:])); err != nil {
				return err
			}
		}
		if kind == 0x05 {
			return walk(binary.BigEndian.Uint32(p[hdr+8:]))
		}
		return nil
	}
	return out, walk(root)
}

// row reads and splits the row of a leaf cell.
func (t *sqliteTable) row(c sqliteCell) ([]sqliteValue, error) {
	if t.leaf.p == nil || t.leaf.n != c.page {
		p, err := t.page(c.page)
		if err != nil {
			return nil, err
		}
		t.leaf.n, t.leaf.p = c.page, p
	}
	payload, err := t.payload(t.leaf.p, c.off)
	if err != nil {
		return nil, fmt.Errorf("SQLite page %d: %w", c.page, err)
	}
	if t.read += int64(len(payload)); t.read > int64(t.pages)*int64(t.pageSize) {
		return nil, errors.New("SQLite rows add up to more than the file holds: corrupt")
	}
	rec, err := parseRecord(payload)
	if err != nil {
		return nil, fmt.Errorf("SQLite page %d: %w", c.page, err)
	}
	return rec, nil
}

// localBytes is how much of a table leaf cell's payload of size bytes is on the page
// itself, the rest going to overflow pages (the file format's X, M and K).
func (t *sqliteTable) localBytes(size int) int {
	maxLocal := t.usable - 35
	if size <= maxLocal {
		return size
	}
	minLocal := (t.usable-12)*32/255 - 23
	if local := minLocal + (size-minLocal)%(t.usable-4); local <= maxLocal {
		return local
	}
	return minLocal
}

// payload assembles the payload of the leaf table cell at off, following its
// overflow pages.
func (t *sqliteTable) payload(p []byte, off int) ([]byte, error) {
	size, n := sqliteVarint(p[off:])
	if n == 0 {
		return nil, errors.New("bad payload size")
	}
	off += n
	if _, n = sqliteVarint(p[off:]); n == 0 {
		return nil, errors.New("bad rowid")
	}
	off += n
	if size < 0 || size > int64(t.pages)*int64(t.usable) {
		return nil, fmt.Errorf("payload of %d bytes is larger than the file", size)
	}
	local := t.localBytes(int(size))
	if off+local > len(p) || (local < int(size) && off+local+4 > len(p)) {
		return nil, errors.New("payload runs past the page")
	}
	out := make([]byte, 0, size)
	out = append(out, p[off:off+local]...)
	if local == int(size) {
		return out, nil
	}
	next := binary.BigEndian.Uint32(p[off+local:])
	for len(out) < int(size) {
		if next == 0 {
			return nil, errors.New("overflow chain ends before the payload does")
		}
		op, err := t.page(next)
		if err != nil {
			return nil, err
		}
		chunk := min(int(size)-len(out), t.usable-4)
		out = append(out, op[4:4+chunk]...)
		next = binary.BigEndian.Uint32(op)
	}
	return out, nil
}

// sqliteValue is one column of a record: an integer, or the bytes of a text or blob.
type sqliteValue struct {
	integer int64
	text    []byte // text or blob; nil for NULL and numbers
}

// parseRecord splits a record (a header of serial types, then the values).
func parseRecord(b []byte) ([]sqliteValue, error) {
	hsize, n := sqliteVarint(b)
	if n == 0 || hsize < int64(n) || hsize > int64(len(b)) {
		return nil, errors.New("bad record header")
	}
	var types []int64
	for h := n; h < int(hsize); {
		st, m := sqliteVarint(b[h:int(hsize)])
		if m == 0 {
			return nil, errors.New("bad serial type")
		}
		types = append(types, st)
		h += m
	}
	body := b[hsize:]
	vals := make([]sqliteValue, len(types))
	for i, st := range types {
		var size int
		switch {
		case st == 0, st == 8, st == 9:
			vals[i].integer = max(st-8, 0)
		case st >= 1 && st <= 6:
			size = []int{1, 2, 3, 4, 6, 8}[st-1]
		case st == 7:
			size = 8 // a float: not needed, skipped
		case st >= 12:
			size = int((st - 12) / 2)
		default:
			return nil, fmt.Errorf("reserved serial type %d", st)
		}
		if size > len(body) {
			return nil, errors.New("record runs past its payload")
		}
		v := body[:size]
		switch {
		case st >= 1 && st <= 6:
			x := int64(int8(v[0])) // sign-extended big-endian
			for _, c := range v[1:] {
				x = x<<8 | int64(c)
			}
			vals[i].integer = x
		case st >= 12:
			vals[i].text = v
		}
		body = body[size:]
	}
	return vals, nil
}

// sqliteVarint decodes SQLite's big-endian varint (1 to 9 bytes); n is 0 when b ends
// first.
func sqliteVarint(b []byte) (v int64, n int) {
	var x uint64
	for i := 0; i < 9; i++ {
		if i >= len(b) {
			return 0, 0
		}
		if i == 8 {
			return int64(x<<8 | uint64(b[i])), 9
		}
		x = x<<7 | uint64(b[i]&0x7f)
		if b[i] < 0x80 {
			return int64(x), i + 1
		}
	}
	return 0, 0
}
