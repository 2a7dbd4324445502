package main

import (
	"github.com/spf13/pflag"

	"orderly.dev/orderly/internal/controller/policy/imagescan"
	engine "orderly.dev/orderly/internal/imagescan"
)

// imageScanOptions are the flags of the image scanner (ImageScan and ImagePolicy).
type imageScanOptions struct {
	dbDir    string
	insecure []string
	webhook  bool
}

var imageScanFlags imageScanOptions

func addImageScanFlags(f *pflag.FlagSet) {
	o := &imageScanFlags
	f.StringVar(&o.dbDir, "imagescan-db-dir", "/var/lib/orderly/osv",
		"directory of the offline OSV vulnerability database (<Ecosystem>/all.zip as osv.dev exports them, optional VERSION file), e.g. a mounted volume; reloaded every --imagescan-db-refresh-interval")
	f.DurationVar(&imagescan.Settings.RefreshInterval, "imagescan-db-refresh-interval", imagescan.DefaultRefresh,
		"how often the vulnerability database is reloaded; a new version rescans every image in use")
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
