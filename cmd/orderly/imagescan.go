package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"orderly.dev/orderly/internal/controller/policy/imagescan"
	engine "orderly.dev/orderly/internal/imagescan"
)

// imageScanOptions are the flags of the image scanner (ImageScan and ImagePolicy).
type imageScanOptions struct {
	dbDir        string
	dbURL        string
	dbEcosystems []string
	insecure     []string
	webhook      bool
}

var imageScanFlags imageScanOptions

func addImageScanFlags(f *pflag.FlagSet) {
	o := &imageScanFlags
	f.StringVar(&o.dbDir, "imagescan-db-dir", "/var/lib/orderly/osv",
		"directory of the offline OSV vulnerability database (<Ecosystem>/all.zip as osv.dev exports them, optional VERSION file), e.g. a mounted volume; reloaded every --imagescan-db-refresh-interval")
	f.DurationVar(&imagescan.Settings.RefreshInterval, "imagescan-db-refresh-interval", imagescan.DefaultRefresh,
		"how often the vulnerability database is reloaded (downloaded first with --imagescan-db-url); a new version rescans every image in use")
	f.StringVar(&o.dbURL, "imagescan-db-url", "",
		"download the database from this base URL (<url>/<Ecosystem>/all.zip, the layout of osv.dev's exports, e.g. an internal mirror) into --imagescan-db-dir, which must be writable, at start and before each reload; conditional requests, so an unchanged archive is not fetched again (default: none, the directory is filled by other means)")
	f.StringSliceVar(&o.dbEcosystems, "imagescan-db-ecosystems", []string{"Debian", "Alpine", "Go", "PyPI", "npm", "Maven"},
		"the OSV ecosystems --imagescan-db-url downloads")
	f.StringVar(&imagescan.Settings.CredentialsSecret, "imagescan-registry-secret", "",
		"kubernetes.io/dockerconfigjson Secret in the manager's namespace with the registry credentials the scanner uses after the pods' own pull secrets (default: none)")
	f.BoolVar(&imagescan.Settings.PodPullSecrets, "imagescan-pod-pull-secrets", true,
		"try the imagePullSecrets of the pods that run an image (and of the object admission met) before --imagescan-registry-secret; read by name, in the pod's namespace")
	f.StringSliceVar(&o.insecure, "imagescan-insecure-registries", nil,
		"registries (host:port) the scanner reaches over plain HTTP, e.g. a test registry on loopback")
	f.BoolVar(&o.webhook, "imagepolicy-webhook", false,
		"serve Orderly's validating webhook for ImagePolicy's checks from scan results (maxSeverity, ignore, unscanned), on the --webhook-* server; without it those are only reported in status, while allowedRegistries and requireDigest are enforced natively anyway")
	f.IntVar(&imagescan.Settings.Workers, "imagescan-workers", imagescan.DefaultWorkers, "images resolved or scanned at once")
	f.DurationVar(&imagescan.Settings.Retention, "imagescan-retention", imagescan.DefaultRetention,
		"how long an ImageScan is kept after no pod uses its image")
	imagescan.Settings.NewEngine = func() (imagescan.Engine, error) {
		s, err := engine.New(engine.Options{DBDir: o.dbDir, Insecure: o.insecure})
		if err != nil {
			return nil, err
		}
		return imagescan.FromScanner(s), nil
	}
}

// apply checks the flags that need checking once parsed and sets up the database
// download when --imagescan-db-url is given.
func (o *imageScanOptions) apply() error {
	if o.dbURL == "" {
		imagescan.Settings.FetchDB = nil
		return nil
	}
	u, err := url.Parse(o.dbURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--imagescan-db-url %q: want an http(s) URL, e.g. https://mirror.example.com/osv", o.dbURL)
	}
	if len(o.dbEcosystems) == 0 {
		return errors.New("--imagescan-db-url needs at least one ecosystem in --imagescan-db-ecosystems")
	}
	imagescan.Settings.FetchDB = func(ctx context.Context) (bool, error) {
		// Bounded, so that a stuck mirror cannot hold the scanner for good.
		ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
		defer cancel()
		return engine.DownloadDB(ctx, nil, o.dbURL, o.dbDir, o.dbEcosystems...)
	}
	return nil
}
