package backupverification

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/localpg"
)

// Reasons of failed restores.
const (
	ReasonRestoreFailed    = "RestoreFailed"
	ReasonRestoreTooSlow   = "RestoreTooSlow"
	ReasonChecksumMismatch = "ChecksumMismatch"
	ReasonCorrupt          = "BackupCorrupt"
)

// Formats of dumps, told apart by their first bytes.
const (
	formatCustom = "custom"
	formatPlain  = "plain"
	gzipSuffix   = "+gzip"
)

// target is where a restore goes: the throwaway database, logged in as its own
// throwaway role (never the admin: a dump is untrusted input).
type target struct {
	server   database.Server // Host, Port, SSLMode, CACert; its admin fields are not used
	database string
	role     string
	password string
}

// restoreResult is what a restore observed.
type restoreResult struct {
	format   string
	sha256   string
	bytes    int64
	duration time.Duration
	// complete is true when the object was read to its end, so that sha256 is its digest.
	complete bool
}

// restoreError is a restore that failed, with its reason.
type restoreError struct {
	reason string
	msg    string
}

func (e *restoreError) Error() string { return e.msg }

// toolsDir finds pg_restore and psql: the PostgreSQL installation internal/localpg
// finds ($ORDERLY_POSTGRES_BIN_DIR or Debian's newest).
var toolsDir = sync.OnceValues(localpg.FindBinDir)

// restore streams body into t within limit: through gzip when compressed, into
// pg_restore (custom format) or psql (plain). body is read once, in small buffers;
// the manager never holds the dump. The SHA-256 covers every byte of body, read to
// its end even when the tool stops early.
func restore(ctx context.Context, body io.Reader, t target, limit time.Duration) (restoreResult, error) {
	start := time.Now()
	var res restoreResult
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(body, h)}
	raw := bufio.NewReaderSize(counted, 64<<10)
	finish := func() {
		// What the tool did not read still belongs to the checksum.
		_, err := io.Copy(io.Discard, raw)
		res.complete = err == nil
		res.sha256 = hex.EncodeToString(h.Sum(nil))
		res.bytes = counted.n
		res.duration = time.Since(start)
	}
	in, format, err := detect(raw)
	if err != nil {
		finish()
		return res, err
	}
	res.format = format
	dir, err := toolsDir()
	if err != nil {
		finish()
		return res, &restoreError{ReasonRestoreFailed, fmt.Sprintf("the PostgreSQL client tools are not installed on the manager: %v", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tmp, err := os.MkdirTemp("", "orderly-restore-")
	if err != nil {
		finish()
		return res, err
	}
	defer os.RemoveAll(tmp)
	env, err := toolEnv(t, tmp)
	if err != nil {
		finish()
		return res, err
	}
	var cmd *exec.Cmd
	if strings.HasPrefix(format, formatCustom) {
		// --no-owner and --no-privileges: the dump's roles do not exist here, and the
		// throwaway role could not take them anyway. --exit-on-error: a corrupt dump
		// fails instead of restoring what it can.
		cmd = exec.CommandContext(ctx, filepath.Join(dir, "pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", "--dbname="+t.database)
	} else {
		// psql runs whatever meta-command the file holds (\! runs a shell command on
		// the manager): it is put in restricted mode first, with a key the dump cannot
		// know, and the dump's own \restrict and \unrestrict lines are dropped.
		key := strings.ToLower(rand.Text())
		in = io.MultiReader(strings.NewReader(`\restrict `+key+"\n"), &restrictFilter{r: bufio.NewReaderSize(in, 64<<10)})
		cmd = exec.CommandContext(ctx, filepath.Join(dir, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "--dbname="+t.database, "-f", "-")
	}
	cmd.Env = env
	cmd.Dir = tmp
	cmd.SysProcAttr = toolProcAttr()
	stderr := &tailBuffer{max: 4096}
	cmd.Stdout = io.Discard
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		finish()
		return res, err
	}
	if err := cmd.Start(); err != nil {
		finish()
		return res, &restoreError{ReasonRestoreFailed, fmt.Sprintf("starting %s: %v", filepath.Base(cmd.Path), err)}
	}
	copyErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(stdin, in)
		_ = stdin.Close()
		copyErr <- err
	}()
	waitErr := cmd.Wait()
	cerr := <-copyErr
	finish()
	tool := filepath.Base(cmd.Path)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return res, &restoreError{ReasonRestoreTooSlow, fmt.Sprintf("the restore did not finish within maxRestoreDuration (%s): stopped", limit)}
	case cerr != nil && !isPipeClosed(cerr):
		return res, &restoreError{ReasonCorrupt, fmt.Sprintf("the backup could not be read to its end (truncated or corrupt?): %v", t.scrub(cerr.Error()))}
	case waitErr != nil:
		return res, &restoreError{ReasonRestoreFailed, fmt.Sprintf("%s failed (%v): %s", tool, waitErr, t.scrub(stderr.String()))}
	}
	return res, nil
}

// detect looks at the first bytes: gzip, then PGDMP (custom format) or else plain SQL.
func detect(raw *bufio.Reader) (io.Reader, string, error) {
	var in io.Reader = raw
	compressed := ""
	if magic, _ := raw.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(raw)
		if err != nil {
			return nil, "", &restoreError{ReasonCorrupt, fmt.Sprintf("the backup starts like gzip but is not: %v", err)}
		}
		in, compressed = gz, gzipSuffix
	}
	br := bufio.NewReaderSize(in, 64<<10)
	head, err := br.Peek(5)
	switch {
	case len(head) == 0 && err != nil:
		return nil, "", &restoreError{ReasonCorrupt, "the backup is empty"}
	case string(head) == "PGDMP":
		return br, formatCustom + compressed, nil
	}
	return br, formatPlain + compressed, nil
}

// toolEnv is the environment of pg_restore and psql: the connection as the
// throwaway role and nothing of the manager's own environment.
func toolEnv(t target, tmp string) ([]string, error) {
	env := []string{
		"PGHOST=" + t.server.Host,
		"PGPORT=" + strconv.Itoa(int(t.server.Port)),
		"PGUSER=" + t.role,
		"PGPASSWORD=" + t.password,
		"PGSSLMODE=" + t.server.EffectiveSSLMode(),
		"PGCONNECT_TIMEOUT=" + strconv.Itoa(int(connectTimeout.Seconds())),
		"PGAPPNAME=orderly-backupverification",
		"PGPASSFILE=" + filepath.Join(tmp, "none"),
		"PGSERVICEFILE=" + filepath.Join(tmp, "none"),
		"HOME=" + tmp,
		"LC_ALL=C",
	}
	if len(t.server.CACert) > 0 {
		ca := filepath.Join(tmp, "ca.crt")
		if err := os.WriteFile(ca, t.server.CACert, 0o600); err != nil {
			return nil, err
		}
		env = append(env, "PGSSLROOTCERT="+ca)
	}
	return env, nil
}

// scrub keeps a message of the tools, or of the restored database, free of the
// role's password.
func (t target) scrub(msg string) string {
	return strings.TrimSpace(database.Scrubber{}.With(t.password, database.PasswordPlaceholder).String(msg))
}

func isPipeClosed(err error) bool {
	return errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "file already closed")
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// restrictFilter drops lines that are a \restrict or \unrestrict meta-command
// (pg_dump 17.6+, 16.10+, 15.14+ writes them around a plain dump), which would fail
// in the restricted mode Orderly puts psql in. Every other byte passes unchanged.
type restrictFilter struct {
	r       *bufio.Reader
	pending []byte
	midLine bool
	err     error
}

func (f *restrictFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			f.err = err
		}
		startOfLine := !f.midLine
		f.midLine = errors.Is(err, bufio.ErrBufferFull)
		if startOfLine && !f.midLine && isRestrictLine(line) {
			continue
		}
		f.pending = append(f.pending[:0], line...)
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func isRestrictLine(line []byte) bool {
	l := strings.TrimSpace(string(line))
	return strings.HasPrefix(l, `\restrict `) || strings.HasPrefix(l, `\unrestrict `)
}
