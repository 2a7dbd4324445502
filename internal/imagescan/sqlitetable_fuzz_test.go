package imagescan

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// sqliteFile builds a small SQLite database file by the file format, with pages of
// pageSize bytes (rows must fit on a page): page 1 the schema, naming table Packages at page 2, and page 2 a leaf with
// one row (NULL, blob) per blob. With copies > 0, page 2 holds the first blob's row
// alone and copies cell pointers to it, as a crafted file can.
func sqliteFile(pageSize int, blobs [][]byte, copies int) []byte {
	varint := func(v uint64) []byte {
		if v < 0x80 {
			return []byte{byte(v)}
		}
		var out []byte
		for v > 0 {
			out = append([]byte{byte(v & 0x7f)}, out...)
			v >>= 7
		}
		for i := range out[:len(out)-1] {
			out[i] |= 0x80
		}
		return out
	}
	record := func(cols ...any) []byte {
		var hdr, body []byte
		for _, c := range cols {
			switch c := c.(type) {
			case nil:
				hdr = append(hdr, varint(0)...)
			case int:
				hdr, body = append(hdr, 1), append(body, byte(c))
			case string:
				hdr, body = append(hdr, varint(uint64(13+2*len(c)))...), append(body, c...)
			case []byte:
				hdr, body = append(hdr, varint(uint64(12+2*len(c)))...), append(body, c...)
			}
		}
		return append(append(varint(uint64(len(hdr)+1)), hdr...), body...)
	}
	leaf := func(page []byte, hdr int, rows [][]byte, copies int) {
		end := len(page)
		var ptrs []int
		for i, r := range rows {
			cell := append(append(varint(uint64(len(r))), varint(uint64(i+1))...), r...)
			end -= len(cell)
			copy(page[end:], cell)
			ptrs = append(ptrs, end)
		}
		for len(ptrs) < copies {
			ptrs = append(ptrs, ptrs[0])
		}
		page[hdr] = 0x0d
		binary.BigEndian.PutUint16(page[hdr+3:], uint16(len(ptrs)))
		binary.BigEndian.PutUint16(page[hdr+5:], uint16(end))
		for i, p := range ptrs {
			binary.BigEndian.PutUint16(page[hdr+8+2*i:], uint16(p))
		}
	}
	file := make([]byte, 2*pageSize)
	copy(file, sqliteMagic)
	binary.BigEndian.PutUint16(file[16:], uint16(pageSize))
	file[18], file[19], file[21], file[22], file[23] = 1, 1, 64, 32, 32
	binary.BigEndian.PutUint32(file[28:], 2)
	leaf(file[:pageSize], 100, [][]byte{record("table", "Packages", "Packages", 2, "CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")}, 0)
	rows := make([][]byte, len(blobs))
	for i, b := range blobs {
		rows[i] = record(nil, b)
	}
	if copies > 0 {
		rows = rows[:1]
	}
	leaf(file[pageSize:], 0, rows, copies)
	return file
}

// fakeHeader is an n-byte blob shaped like an RPM package header (one index entry,
// the rest data), which checkHeaderBlob lets through.
func fakeHeader(n int) []byte {
	b := bytes.Repeat([]byte("x"), n)
	binary.BigEndian.PutUint32(b, 1)
	binary.BigEndian.PutUint32(b[4:], uint32(n-24))
	return b
}

// FuzzSQLiteTable reads any bytes as the RPM database's SQLite file, as the image
// scanner does with a file from an image anyone may run. Properties: no panic; a
// refusal is an error with a message; and what it reads is bounded by the file: all
// the rows' payloads together are no larger than the file (a database stores each
// byte of a row once), so a crafted file cannot make the manager hold more than it.
func FuzzSQLiteTable(f *testing.F) {
	f.Add(sqliteFile(1024, [][]byte{fakeHeader(30), fakeHeader(40)}, 0))
	f.Add(sqliteFile(1024, [][]byte{fakeHeader(600)}, 0))
	f.Add(sqliteFile(1024, nil, 0))
	f.Add(sqliteFile(1024, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, 3))
	// One 600-byte row, pointed at 150 times: 90 KB of rows from a 2 KB file.
	f.Add(sqliteFile(1024, [][]byte{fakeHeader(600)}, 150))
	f.Add([]byte("SQLite format 3\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tbl, err := openSQLite(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		conn := &rpmSQLiteConn{t: tbl}
		rows, err := rpmSQLiteStmt{conn}.Query(nil)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		total := 0
		for _, b := range rows.(*rpmSQLiteRows).blobs {
			total += len(b)
		}
		if total > len(data) {
			t.Fatalf("read %d bytes of rows from a file of %d", total, len(data))
		}
	})
}
