// Package controller lists every controller of Orderly. Each lives in its own package
// below this one and exports a kit.Controller.
package controller

import (
	"orderly.dev/orderly/internal/controller/data/backupverification"
	"orderly.dev/orderly/internal/controller/data/databaseserver"
	"orderly.dev/orderly/internal/controller/data/devdatabase"
	"orderly.dev/orderly/internal/controller/delivery/canary"
	"orderly.dev/orderly/internal/controller/fleet/placement"
	"orderly.dev/orderly/internal/controller/network/servicedomain"
	"orderly.dev/orderly/internal/controller/policy/imagepolicy"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/controller/power/sleepschedule"
	"orderly.dev/orderly/internal/controller/secrets/secretrotation"
	"orderly.dev/orderly/internal/controller/tenancy/tenant"
	"orderly.dev/orderly/internal/kit"
)

// All is every controller, by name; `orderly manager --controllers` picks from it.
var All = []kit.Controller{
	backupverification.Controller,
	canary.Controller,
	databaseserver.Controller,
	devdatabase.Controller,
	imagepolicy.Controller,
	imagescan.Controller,
	labelpolicy.Controller,
	placement.Controller,
	secretrotation.Controller,
	servicedomain.Controller,
	sleepschedule.Controller,
	tenant.Controller,
}
