package backupverification

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name       string
		in         []byte
		wantFormat string
		wantErr    bool
	}{
		{"custom", []byte("PGDMP\x01\x0f..."), "custom", false},
		{"custom gzip", gz([]byte("PGDMP\x01\x0f...")), "custom+gzip", false},
		{"plain", []byte("--\n-- PostgreSQL database dump\n"), "plain", false},
		{"plain gzip", gz([]byte("--\n-- PostgreSQL database dump\n")), "plain+gzip", false},
		{"empty", nil, "", true},
		{"gzip header cut short", []byte{0x1f, 0x8b, 0x08}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, format, err := detect(bufio.NewReader(bytes.NewReader(tt.in)))
			if (err != nil) != tt.wantErr || format != tt.wantFormat {
				t.Fatalf("detect = %q, %v; want %q, error %v", format, err, tt.wantFormat, tt.wantErr)
			}
			if err == nil {
				// Detection consumes nothing: the tool gets the dump from its first byte.
				got, _ := io.ReadAll(r)
				want := tt.in
				if strings.HasSuffix(tt.wantFormat, gzipSuffix) {
					zr, _ := gzip.NewReader(bytes.NewReader(tt.in))
					want, _ = io.ReadAll(zr)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("read %q, want %q", got, want)
				}
			}
		})
	}
}

// psql's restricted mode is Orderly's; the dump's own \restrict and \unrestrict
// lines go, everything else (COPY data included) passes unchanged.
func TestRestrictFilter(t *testing.T) {
	in := "\\restrict abc\nSET x = 1;\nCOPY t (a) FROM stdin;\n1\n\\\\restrict not-a-command\n\\.\n\\unrestrict abc\n" + strings.Repeat("x", 100000) + "\n"
	want := "SET x = 1;\nCOPY t (a) FROM stdin;\n1\n\\\\restrict not-a-command\n\\.\n" + strings.Repeat("x", 100000) + "\n"
	got, err := io.ReadAll(&restrictFilter{r: bufio.NewReaderSize(strings.NewReader(in), 64<<10)})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("filtered:\n%.200q\nwant:\n%.200q", got, want)
	}
}
