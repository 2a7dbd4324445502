package imagescan

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// OSVExportURL is where osv.dev publishes its per-ecosystem archives
// (<OSVExportURL>/<Ecosystem>/all.zip).
const OSVExportURL = "https://osv-vulnerabilities.storage.googleapis.com"

// MaxDownloadBytes bounds one downloaded archive.
const MaxDownloadBytes = int64(4) << 30

// DownloadDB fetches <baseURL>/<Ecosystem>/all.zip for each ecosystem into
// <dir>/<Ecosystem>/all.zip, the layout Options.DBDir reads. Each archive is written
// aside, checked to be a readable zip, and renamed into place, so a scanner never
// sees half a file; a failed download leaves the previous archive. Requests are
// conditional (the ETag and Last-Modified are kept in <dir>/<Ecosystem>/.etag and
// .last-modified), so an unchanged archive costs one 304; a server that answers 200
// anyway with the same bytes (their SHA-256 is kept in .sha256) changes nothing
// either, so the database's version, and with it every image's scan, stays put.
// changed is true when any archive was replaced; a ReloadDB then loads it. Errors
// have reason DatabaseMissing.
func DownloadDB(ctx context.Context, client *http.Client, baseURL, dir string, ecosystems ...string) (changed bool, err error) {
	if client == nil {
		client = http.DefaultClient
	}
	var errs []error
	for _, eco := range ecosystems {
		c, err := downloadOne(ctx, client, strings.TrimSuffix(baseURL, "/"), dir, eco)
		changed = changed || c
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return changed, &Error{Reason: ReasonDatabaseMissing, Err: errors.Join(errs...)}
	}
	return changed, nil
}

func downloadOne(ctx context.Context, client *http.Client, baseURL, dir, eco string) (bool, error) {
	if eco == "" || strings.ContainsAny(eco, `/\`) || strings.HasPrefix(eco, ".") {
		return false, fmt.Errorf("%q is not an ecosystem name", eco)
	}
	u := baseURL + "/" + url.PathEscape(eco) + "/all.zip"
	d := filepath.Join(dir, eco)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return false, err
	}
	etagFile := filepath.Join(d, ".etag")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("User-Agent", "orderly-imagescan")
	modifiedFile, sumFile := filepath.Join(d, ".last-modified"), filepath.Join(d, ".sha256")
	if _, err := os.Stat(filepath.Join(d, "all.zip")); err == nil {
		if etag, err := os.ReadFile(etagFile); err == nil && len(etag) > 0 {
			req.Header.Set("If-None-Match", strings.TrimSpace(string(etag)))
		}
		if lm, err := os.ReadFile(modifiedFile); err == nil && len(lm) > 0 {
			req.Header.Set("If-Modified-Since", strings.TrimSpace(string(lm)))
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("downloading %s: %w", u, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return false, nil
	case http.StatusOK:
	default:
		return false, fmt.Errorf("downloading %s: the server answered %s", u, resp.Status)
	}
	tmp, err := os.CreateTemp(d, ".all.zip-")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, sum), io.LimitReader(resp.Body, MaxDownloadBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("downloading %s: %w", u, err)
	}
	if n > MaxDownloadBytes {
		return false, fmt.Errorf("downloading %s: bigger than %d bytes", u, MaxDownloadBytes)
	}
	zr, err := zip.OpenReader(tmp.Name())
	if err != nil {
		return false, fmt.Errorf("downloading %s: not a readable zip archive: %w", u, err)
	}
	_ = zr.Close()
	keep := func(file, value string) {
		if value != "" {
			_ = os.WriteFile(file, []byte(value), 0o644)
		} else {
			_ = os.Remove(file)
		}
	}
	keep(etagFile, resp.Header.Get("ETag"))
	keep(modifiedFile, resp.Header.Get("Last-Modified"))
	digest := hex.EncodeToString(sum.Sum(nil))
	if old, err := os.ReadFile(sumFile); err == nil && strings.TrimSpace(string(old)) == digest {
		if _, err := os.Stat(filepath.Join(d, "all.zip")); err == nil {
			return false, nil
		}
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(d, "all.zip")); err != nil {
		return false, err
	}
	keep(sumFile, digest)
	return true, nil
}
