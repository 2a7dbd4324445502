package imagescan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/erikvarga/go-rpmdb/pkg/bdb"
)

// The RPM database of an image is written by whoever built the image, and go-rpmdb
// trusts it: a package header whose index count is large allocates that many
// entries before checking anything (a 12-byte header asked for 29 GB, and the
// manager died of it), its Berkeley DB reader indexes pages at offsets read from the
// file and loops forever on an overflow chain that leads to another kind of page,
// and its NDB reader allocates a blob of the length the file states. Its readers run
// in goroutines of their own, where a panic cannot be recovered. So Orderly walks the
// file first, the way go-rpmdb will, and hands it on only when every offset, chain
// and length it would follow is within the file and every header fits its blob; the
// SQLite form is read by Orderly itself (sqlitetable.go), and its headers are checked
// the same way.

// checkHeaderBlob says whether an RPM package header fits in blob: its index count
// and data length (two big-endian int32s) must describe at most blob's bytes.
func checkHeaderBlob(blob []byte) error {
	if len(blob) < 8 {
		return fmt.Errorf("an RPM header of %d bytes is too short", len(blob))
	}
	il := int64(int32(binary.BigEndian.Uint32(blob)))
	dl := int64(int32(binary.BigEndian.Uint32(blob[4:])))
	if il < 1 || dl < 0 || 8+16*il+dl > int64(len(blob)) {
		return fmt.Errorf("an RPM header of %d index entries and %d bytes of data does not fit its %d bytes", il, dl, len(blob))
	}
	return nil
}

// ndbMagic starts an NDB database (Packages.db).
const ndbMagic = 'R' | 'p'<<8 | 'm'<<16 | 'P'<<24

// checkRPMFile checks the NDB or Berkeley DB file at path before go-rpmdb reads it;
// SQLite files are left to Orderly's own reader.
func checkRPMFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	var magic [16]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil {
		return fmt.Errorf("reading the RPM database's header: %w", err)
	}
	switch {
	case bytes.Equal(magic[:], sqliteMagic):
		return nil
	case binary.LittleEndian.Uint32(magic[:]) == ndbMagic:
		return checkNDB(f, info.Size())
	}
	return checkBDB(f, info.Size())
}

// checkNDB walks an NDB file as go-rpmdb's ndb.Read does: a 32-byte header, slot
// pages of 4096 bytes, and for each used slot a blob (16-byte header, then the
// package header) at 16-byte block BlkOffset.
func checkNDB(f io.ReaderAt, size int64) error {
	var hdr [32]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("reading the NDB header: %w", err)
	}
	le := binary.LittleEndian
	pages := int64(le.Uint32(hdr[12:]))
	if le.Uint32(hdr[4:]) != 0 || pages == 0 || pages > 2048 || 32+pages*4096-32 > size {
		return fmt.Errorf("the NDB header's %d slot pages do not fit the file", pages)
	}
	slots := make([]byte, pages*4096-32)
	if _, err := f.ReadAt(slots, 32); err != nil {
		return fmt.Errorf("reading the NDB slots: %w", err)
	}
	for i := 0; i+16 <= len(slots); i += 16 {
		s := slots[i:]
		if le.Uint32(s) != 'S'|'l'<<8|'o'<<16|'t'<<24 {
			return fmt.Errorf("NDB slot %d has a bad magic", i/16)
		}
		pkg, off := le.Uint32(s[4:]), int64(le.Uint32(s[8:]))*16
		if pkg == 0 {
			continue
		}
		var bh [16]byte
		if off+16 > size {
			return fmt.Errorf("NDB slot %d points past the file", i/16)
		}
		if _, err := f.ReadAt(bh[:], off); err != nil {
			return fmt.Errorf("reading NDB blob %d: %w", pkg, err)
		}
		n := int64(le.Uint32(bh[12:]))
		if le.Uint32(bh[:]) != 'B'|'l'<<8|'b'<<16|'S'<<24 || le.Uint32(bh[4:]) != pkg || off+16+n > size {
			return fmt.Errorf("NDB blob of package %d is damaged or runs past the file", pkg)
		}
		blob := make([]byte, n)
		if _, err := f.ReadAt(blob, off+16); err != nil {
			return fmt.Errorf("reading NDB blob %d: %w", pkg, err)
		}
		if err := checkHeaderBlob(blob); err != nil {
			return fmt.Errorf("NDB package %d: %w", pkg, err)
		}
	}
	return nil
}

// checkBDB walks a Berkeley DB hash file as go-rpmdb's bdb.Read does: the metadata
// page, then every page up to the last, and for each off-page item on a hash page
// its chain of overflow pages, concatenated into a package header.
func checkBDB(f io.ReaderAt, size int64) error {
	meta := make([]byte, 512)
	if _, err := f.ReadAt(meta, 0); err != nil {
		return fmt.Errorf("reading the Berkeley DB metadata: %w", err)
	}
	m, err := bdb.ParseHashMetadataPage(meta)
	if err != nil {
		return fmt.Errorf("not an RPM database (SQLite, NDB or Berkeley DB): %w", err)
	}
	ps := int64(m.PageSize)
	if ps < 512 || ps > 65536 || ps&(ps-1) != 0 {
		return fmt.Errorf("the Berkeley DB page size %d is not one of 512 to 65536", ps)
	}
	if (int64(m.LastPageNo)+1)*ps > size {
		return fmt.Errorf("the Berkeley DB's last page %d is past the file", m.LastPageNo)
	}
	read := func(n uint32) ([]byte, error) {
		p := make([]byte, ps)
		if int64(n) > int64(m.LastPageNo) {
			return nil, fmt.Errorf("the Berkeley DB names page %d, past its last", n)
		}
		_, err := f.ReadAt(p, int64(n)*ps)
		return p, err
	}
	total := int64(0)
	for n := uint32(0); n <= m.LastPageNo; n++ {
		page, err := read(n)
		if err != nil {
			return err
		}
		hp, err := bdb.ParseHashPage(page, m.Swapped)
		if err != nil {
			return err
		}
		if hp.PageType != bdb.HashUnsortedPageType && hp.PageType != bdb.HashPageType {
			continue
		}
		idx, err := bdb.HashPageValueIndexes(page, hp.NumEntries, m.Swapped)
		if err != nil {
			return err
		}
		for _, at := range idx {
			if int64(at) >= ps {
				return fmt.Errorf("page %d of the Berkeley DB: an item at %d is past the page", n, at)
			}
			if page[at] != bdb.HashOffIndexPageType {
				continue
			}
			if int64(at)+bdb.HashOffPageSize > ps {
				return fmt.Errorf("page %d of the Berkeley DB: an item at %d runs past the page", n, at)
			}
			e, err := bdb.ParseHashOffPageEntry(page[at:at+bdb.HashOffPageSize], m.Swapped)
			if err != nil {
				return err
			}
			var blob []byte
			seen := map[uint32]bool{}
			for cur := e.PageNo; cur != 0; {
				if seen[cur] {
					return fmt.Errorf("page %d of the Berkeley DB: an overflow chain loops", n)
				}
				seen[cur] = true
				op, err := read(cur)
				if err != nil {
					return err
				}
				oh, err := bdb.ParseHashPage(op, m.Swapped)
				if err != nil {
					return err
				}
				if oh.PageType != bdb.OverflowPageType {
					return fmt.Errorf("page %d of the Berkeley DB: an overflow chain leads to page %d, which is no overflow page", n, cur)
				}
				end := ps
				if oh.NextPageNo == 0 {
					end = bdb.PageHeaderSize + int64(oh.FreeAreaOffset)
				}
				if end > ps {
					return fmt.Errorf("page %d of the Berkeley DB: its content runs past the page", cur)
				}
				if total += end - bdb.PageHeaderSize; total > size {
					return errors.New("the Berkeley DB's overflow chains add up to more than the file: corrupt")
				}
				blob = append(blob, op[bdb.PageHeaderSize:end]...)
				cur = oh.NextPageNo
			}
			if err := checkHeaderBlob(blob); err != nil {
				return fmt.Errorf("page %d of the Berkeley DB: %w", n, err)
			}
		}
	}
	return nil
}
