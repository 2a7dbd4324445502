package config_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	// The packages whose metrics the manager exports register them when imported.
	_ "orderly.dev/orderly/internal/controller"
	_ "orderly.dev/orderly/internal/webhook/labelpolicy"

	"orderly.dev/orderly/internal/testing/testprom"
)

const (
	rulesFile     = "prometheus/rules.yaml"
	dashboardFile = "grafana/orderly.json"
	runbooksFile  = "../docs/monitoring.md"
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func loadRules(t *testing.T) map[string]rule {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	rules := map[string]rule{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = r
		}
	}
	return rules
}

// alertCase is one promtool unit case: input series, a time, and the alerts that
// must be firing then (none for a case that must stay quiet).
type alertCase struct {
	alert  string
	series map[string]string // series -> promtool values notation
	at     string
	fire   []firing
}

type firing struct {
	labels  map[string]string // besides severity, which comes from the rule
	summary string
}

// Every alert has a case that fires and one, close to it, that does not.
var alertCases = []alertCase{
	{alert: "OrderlyManagerDown", at: "10m",
		series: map[string]string{`up{job="orderly", instance="a"}`: "0x10"},
		fire:   []firing{{summary: "No Orderly manager replica has been scraped for 5 minutes."}}},
	{alert: "OrderlyManagerDown", at: "10m",
		series: map[string]string{`up{job="orderly", instance="a"}`: "0x10", `up{job="orderly", instance="b"}`: "1x10"}},
	{alert: "OrderlyNoLeader", at: "10m",
		series: map[string]string{`leader_election_master_status{job="orderly", name="orderly-manager", instance="a"}`: "0x10"},
		fire:   []firing{{summary: "Orderly replicas run, but none has held the leader lease for 5 minutes."}}},
	{alert: "OrderlyNoLeader", at: "10m",
		series: map[string]string{
			`leader_election_master_status{job="orderly", name="orderly-manager", instance="a"}`: "0x10",
			`leader_election_master_status{job="orderly", name="orderly-manager", instance="b"}`: "1x10"}},
	{alert: "OrderlyReconcileErrorsHigh", at: "30m",
		series: map[string]string{
			`controller_runtime_reconcile_errors_total{job="orderly", controller="tenant"}`:            "0+3x30",
			`controller_runtime_reconcile_total{job="orderly", controller="tenant", result="error"}`:   "0+3x30",
			`controller_runtime_reconcile_total{job="orderly", controller="tenant", result="success"}`: "0+7x30"},
		fire: []firing{{labels: map[string]string{"controller": "tenant"}, summary: "Controller tenant: 30% of reconciles fail."}}},
	{alert: "OrderlyReconcileErrorsHigh", at: "30m",
		series: map[string]string{
			`controller_runtime_reconcile_errors_total{job="orderly", controller="tenant"}`:            "0+1x30",
			`controller_runtime_reconcile_total{job="orderly", controller="tenant", result="error"}`:   "0+1x30",
			`controller_runtime_reconcile_total{job="orderly", controller="tenant", result="success"}`: "0+9x30"}},
	{alert: "OrderlyReconcilePanics", at: "5m",
		series: map[string]string{`controller_runtime_reconcile_panics_total{job="orderly", controller="canary"}`: "0 0 1 1 1 1"},
		fire:   []firing{{labels: map[string]string{"job": "orderly", "controller": "canary"}, summary: "Controller canary panicked in a reconcile."}}},
	{alert: "OrderlyReconcilePanics", at: "5m",
		series: map[string]string{`controller_runtime_reconcile_panics_total{job="orderly", controller="canary"}`: "0x10"}},
	{alert: "OrderlyWorkqueueStuck", at: "20m",
		series: map[string]string{`workqueue_longest_running_processor_seconds{job="orderly", controller="devdatabase", name="devdatabase"}`: "0+60x20"},
		fire:   []firing{{labels: map[string]string{"controller": "devdatabase"}, summary: "Controller devdatabase has a reconcile running for over 10 minutes."}}},
	{alert: "OrderlyWorkqueueStuck", at: "20m",
		series: map[string]string{`workqueue_longest_running_processor_seconds{job="orderly", controller="devdatabase", name="devdatabase"}`: "0+60x5 0x15"}},
	{alert: "OrderlyWebhookErrors", at: "20m",
		series: map[string]string{
			`controller_runtime_webhook_requests_total{job="orderly", webhook="/labelpolicy/cost", code="200"}`: "0+90x20",
			`controller_runtime_webhook_requests_total{job="orderly", webhook="/labelpolicy/cost", code="500"}`: "0+10x20"},
		fire: []firing{{labels: map[string]string{"webhook": "/labelpolicy/cost"}, summary: "Webhook /labelpolicy/cost answers 10% of its requests with an error."}}},
	{alert: "OrderlyWebhookErrors", at: "20m",
		series: map[string]string{
			`controller_runtime_webhook_requests_total{job="orderly", webhook="/labelpolicy/cost", code="200"}`: "0+99x20",
			`controller_runtime_webhook_requests_total{job="orderly", webhook="/labelpolicy/cost", code="500"}`: "0+1x20"}},
	{alert: "OrderlyWebhookSlow", at: "20m",
		series: map[string]string{
			`controller_runtime_webhook_latency_seconds_bucket{job="orderly", webhook="/labelpolicy/cost", le="0.1"}`:  "0x20",
			`controller_runtime_webhook_latency_seconds_bucket{job="orderly", webhook="/labelpolicy/cost", le="1"}`:    "0+10x20",
			`controller_runtime_webhook_latency_seconds_bucket{job="orderly", webhook="/labelpolicy/cost", le="+Inf"}`: "0+10x20"},
		fire: []firing{{labels: map[string]string{"webhook": "/labelpolicy/cost"}, summary: "Webhook /labelpolicy/cost answers in 991ms at p99."}}},
	{alert: "OrderlyWebhookSlow", at: "20m",
		series: map[string]string{
			`controller_runtime_webhook_latency_seconds_bucket{job="orderly", webhook="/labelpolicy/cost", le="0.1"}`:  "0+10x20",
			`controller_runtime_webhook_latency_seconds_bucket{job="orderly", webhook="/labelpolicy/cost", le="1"}`:    "0+10x20",
			`controller_runtime_webhook_latency_seconds_bucket{job="orderly", webhook="/labelpolicy/cost", le="+Inf"}`: "0+10x20"}},
	{alert: "OrderlyDatabaseServerUnreachable", at: "10m",
		series: map[string]string{`orderly_databaseserver_reachable{job="orderly", server="pg"}`: "0x10"},
		fire:   []firing{{labels: map[string]string{"job": "orderly", "server": "pg"}, summary: "DatabaseServer pg has been unreachable for 5 minutes."}}},
	{alert: "OrderlyDatabaseServerUnreachable", at: "10m",
		series: map[string]string{`orderly_databaseserver_reachable{job="orderly", server="pg"}`: "0x3 1x7"}},
	{alert: "OrderlyDevDatabaseFailed", at: "20m",
		series: map[string]string{`orderly_devdatabase_info{job="orderly", namespace="team-a", name="db", server="pg", phase="Failed"}`: "1x20"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "namespace": "team-a", "name": "db", "server": "pg", "phase": "Failed"},
			summary: "DevDatabase team-a/db has failed for 15 minutes."}}},
	{alert: "OrderlyDevDatabaseFailed", at: "20m",
		series: map[string]string{`orderly_devdatabase_info{job="orderly", namespace="team-a", name="db", server="pg", phase="Ready"}`: "1x20"}},
	{alert: "OrderlySleepScheduleWriteFailures", at: "5m",
		series: map[string]string{`orderly_sleepschedule_write_failures_total{job="orderly", schedule="nights"}`: "0 0 0 2 2 2"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "schedule": "nights"},
			summary: "SleepSchedule nights could not scale some workloads in the last 30 minutes."}}},
	{alert: "OrderlySleepScheduleWriteFailures", at: "5m",
		series: map[string]string{`orderly_sleepschedule_write_failures_total{job="orderly", schedule="nights"}`: "0x10"}},
	{alert: "OrderlySleepScheduleStillRunning", at: "40m",
		series: map[string]string{`orderly_sleepschedule_still_running_workloads{job="orderly", schedule="nights"}`: "1x40"},
		fire: []firing{{labels: map[string]string{"schedule": "nights"},
			summary: "SleepSchedule nights holds 1 object(s) asleep whose operator keeps them running."}}},
	{alert: "OrderlySleepScheduleStillRunning", at: "40m",
		series: map[string]string{`orderly_sleepschedule_still_running_workloads{job="orderly", schedule="nights"}`: "1x20 0x20"}},
	{alert: "OrderlyLabelPolicyNotEnforced", at: "15m",
		series: map[string]string{`orderly_labelpolicy_admission_ready{job="orderly", labelpolicy="cost"}`: "1x2 0x13"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "labelpolicy": "cost"},
			summary: "LabelPolicy cost has not been enforced at admission for 10 minutes."}}},
	{alert: "OrderlyLabelPolicyNotEnforced", at: "15m",
		series: map[string]string{`orderly_labelpolicy_admission_ready{job="orderly", labelpolicy="cost"}`: "0x8 1x7"}},
	{alert: "OrderlyLabelPolicyViolations", at: "6h5m",
		series: map[string]string{
			`orderly_labelpolicy_violations{job="orderly", labelpolicy="cost", namespace="a"}`: "3x400",
			`orderly_labelpolicy_violations{job="orderly", labelpolicy="cost", namespace="b"}`: "2x400"},
		fire: []firing{{labels: map[string]string{"labelpolicy": "cost"}, summary: "LabelPolicy cost: 5 workloads have had no allowed label for 6 hours."}}},
	{alert: "OrderlyLabelPolicyViolations", at: "6h5m",
		series: map[string]string{`orderly_labelpolicy_violations{job="orderly", labelpolicy="cost", namespace="a"}`: "3x200 0x200"}},
	{alert: "OrderlySecretRotationRolledBack", at: "3m",
		series: map[string]string{`orderly_secretrotation_rotations_total{job="orderly", namespace="pay", name="db", result="RolledBack"}`: "0 0 1 1"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "namespace": "pay", "name": "db", "result": "RolledBack"},
			summary: "SecretRotation pay/db ended a rotation RolledBack."}}},
	{alert: "OrderlySecretRotationRolledBack", at: "3m",
		series: map[string]string{`orderly_secretrotation_rotations_total{job="orderly", namespace="pay", name="db", result="Done"}`: "0 0 1 1"}},
	{alert: "OrderlySecretRotationStuck", at: "2h10m",
		series: map[string]string{`orderly_secretrotation_phase{job="orderly", namespace="pay", name="db", phase="Rolling"}`: "1x150"},
		fire: []firing{{labels: map[string]string{"namespace": "pay", "name": "db", "phase": "Rolling"},
			summary: "SecretRotation pay/db has been in phase Rolling for 2 hours."}}},
	{alert: "OrderlySecretRotationStuck", at: "2h10m",
		series: map[string]string{`orderly_secretrotation_phase{job="orderly", namespace="pay", name="db", phase="Held"}`: "1x150"}},
	{alert: "OrderlyCanaryRolledBack", at: "2m",
		series: map[string]string{`orderly_canary_phase{job="orderly", namespace="shop", canary="web", phase="RolledBack"}`: "1x5"},
		fire:   []firing{{labels: map[string]string{"namespace": "shop", "canary": "web"}, summary: "Canary shop/web rolled back its last revision."}}},
	{alert: "OrderlyCanaryRolledBack", at: "2m",
		series: map[string]string{`orderly_canary_phase{job="orderly", namespace="shop", canary="web", phase="RolledBack"}`: "0x5"}},
	{alert: "OrderlyCanaryMetricsUnavailable", at: "25m",
		series: map[string]string{
			`orderly_canary_prometheus_queries_total{job="orderly", result="unavailable"}`: "0+6x30",
			`orderly_canary_prometheus_queries_total{job="orderly", result="ok"}`:          "0+4x30"},
		fire: []firing{{summary: "More than half of the Canary analyses' Prometheus queries fail."}}},
	{alert: "OrderlyCanaryMetricsUnavailable", at: "25m",
		series: map[string]string{
			`orderly_canary_prometheus_queries_total{job="orderly", result="unavailable"}`: "0+1x30",
			`orderly_canary_prometheus_queries_total{job="orderly", result="ok"}`:          "0+9x30"}},
	{alert: "OrderlyBackupVerificationFailed", at: "5m",
		series: map[string]string{`orderly_backupverification_failures_total{job="orderly", namespace="shop", name="orders", result="Failed", reason="ChecksumMismatch"}`: "0 0 1 1 1 1"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "namespace": "shop", "name": "orders", "result": "Failed", "reason": "ChecksumMismatch"},
			summary: "BackupVerification shop/orders: the latest backup failed verification (ChecksumMismatch)."}}},
	{alert: "OrderlyBackupVerificationFailed", at: "5m",
		series: map[string]string{`orderly_backupverification_failures_total{job="orderly", namespace="shop", name="orders", result="Error", reason="SourceUnreachable"}`: "0 0 1 1 1 1"}},
	// time() is the evaluation time: 30 h in, the last success at 1 h (1 day 5 h ago).
	{alert: "OrderlyBackupNotVerified", at: "30h",
		series: map[string]string{`orderly_backupverification_last_success_timestamp_seconds{job="orderly", namespace="shop", name="orders"}`: "3600x2000"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "namespace": "shop", "name": "orders"},
			summary: "BackupVerification shop/orders: no backup has passed verification for over 26 hours."}}},
	// Never passed yet (0): that is the Verified condition's business, not this alert's.
	{alert: "OrderlyBackupNotVerified", at: "30h",
		series: map[string]string{`orderly_backupverification_last_success_timestamp_seconds{job="orderly", namespace="shop", name="orders"}`: "0x2000"}},
	{alert: "OrderlyTenantDriftFight", at: "35m",
		series: map[string]string{`orderly_tenant_drift_repairs_total{job="orderly", tenant="payments", kind="RoleBinding"}`: "0+6x40"},
		fire: []firing{{labels: map[string]string{"tenant": "payments"},
			summary: "Tenant payments: Orderly keeps restoring objects someone else keeps changing."}}},
	{alert: "OrderlyTenantDriftFight", at: "35m",
		series: map[string]string{`orderly_tenant_drift_repairs_total{job="orderly", tenant="payments", kind="RoleBinding"}`: "0+1x40"}},
	{alert: "OrderlyTenantTotalQuotaFull", at: "40m",
		series: map[string]string{
			`orderly_tenant_total_quota_hard{job="orderly", tenant="payments", resource="pods"}`: "20x50",
			`orderly_tenant_total_quota_used{job="orderly", tenant="payments", resource="pods"}`: "20x50",
		},
		fire: []firing{{labels: map[string]string{"tenant": "payments", "resource": "pods"},
			summary: "Tenant payments uses 100% of its total pods."}}},
	{alert: "OrderlyTenantTotalQuotaFull", at: "40m",
		series: map[string]string{
			`orderly_tenant_total_quota_hard{job="orderly", tenant="payments", resource="pods"}`: "20x50",
			`orderly_tenant_total_quota_used{job="orderly", tenant="payments", resource="pods"}`: "15x50",
		}},
	{alert: "OrderlyLabelPolicyTenantDrift", at: "70m",
		series: map[string]string{`orderly_labelpolicy_tenant_drift_namespaces{job="orderly", labelpolicy="cost-center"}`: "3x80"},
		fire: []firing{{labels: map[string]string{"labelpolicy": "cost-center"},
			summary: "LabelPolicy cost-center: 3 namespace(s) have a cost-center label that differs from their Tenant's costCenter."}}},
	{alert: "OrderlyLabelPolicyTenantDrift", at: "70m",
		series: map[string]string{`orderly_labelpolicy_tenant_drift_namespaces{job="orderly", labelpolicy="cost-center"}`: "3x30 0x50"}},
	{alert: "OrderlyTenantResourcesMissing", at: "40m",
		series: map[string]string{`orderly_tenant_resources_missing{job="orderly", tenant="payments"}`: "2x50"},
		fire: []firing{{labels: map[string]string{"tenant": "payments"},
			summary: "Tenant payments: 2 object(s) of spec.resources are missing from its namespaces."}}},
	{alert: "OrderlyTenantResourcesMissing", at: "40m",
		series: map[string]string{`orderly_tenant_resources_missing{job="orderly", tenant="payments"}`: "2x20 0x30"}},
	{alert: "OrderlyImagePolicyViolations", at: "40m",
		series: map[string]string{
			`orderly_imagepolicy_violations{job="orderly", imagepolicy="restricted", reason="Vulnerable"}`: "2x50",
			`orderly_imagepolicy_violations{job="orderly", imagepolicy="restricted", reason="Unscanned"}`:  "0x50"},
		fire: []firing{{labels: map[string]string{"imagepolicy": "restricted", "reason": "Vulnerable"},
			summary: "ImagePolicy restricted: 2 running workload image(s) have broken it (Vulnerable) for 30 minutes."}}},
	{alert: "OrderlyImagePolicyViolations", at: "40m",
		series: map[string]string{`orderly_imagepolicy_violations{job="orderly", imagepolicy="restricted", reason="Vulnerable"}`: "0x20 2x30"}},
	{alert: "OrderlyImageScansFailing", at: "50m",
		series: map[string]string{
			`orderly_imagescan_scans_total{job="orderly", result="RegistryUnreachable"}`: "0+3x60",
			`orderly_imagescan_scans_total{job="orderly", result="Succeeded"}`:           "0+1x60"},
		fire: []firing{{summary: "75% of the image scans of the last 30 minutes failed."}}},
	// One or two images that cannot be scanned, retried every 5 minutes, are not the
	// scanner failing: under the floor of 20 failures in 30 minutes.
	{alert: "OrderlyImageScansFailing", at: "50m",
		series: map[string]string{
			`orderly_imagescan_scans_total{job="orderly", result="RegistryUnreachable"}`: "0+0.4x60",
			`orderly_imagescan_scans_total{job="orderly", result="Succeeded"}`:           "0+0.1x60"}},
	// Failures that belong to the image are the ImagePolicy's to report.
	{alert: "OrderlyImageScansFailing", at: "50m",
		series: map[string]string{
			`orderly_imagescan_scans_total{job="orderly", result="NotFound"}`:  "0+3x60",
			`orderly_imagescan_scans_total{job="orderly", result="Succeeded"}`: "0+1x60"}},
	{alert: "OrderlyImageScanBacklog", at: "40m",
		series: map[string]string{`orderly_imagescan_queue_length{job="orderly"}`: "10+1x50"},
		fire: []firing{{labels: map[string]string{"job": "orderly"},
			summary: "The image scan queue has not drained for over 30 minutes: 50 resolves and scans wait."}}},
	// A long queue that drains (a new database rescans every image) is not a backlog.
	{alert: "OrderlyImageScanBacklog", at: "40m",
		series: map[string]string{`orderly_imagescan_queue_length{job="orderly"}`: "400-5x50"}},
	{alert: "OrderlyServiceDomainNotReady", at: "20m",
		series: map[string]string{`orderly_servicedomain_condition{job="orderly", namespace="storefront", servicedomain="shop", condition="Ready"}`: "0x25"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "namespace": "storefront", "servicedomain": "shop", "condition": "Ready"},
			summary: "ServiceDomain storefront/shop has not been Ready for 15 minutes."}}},
	// The certificate took 10 minutes to issue.
	{alert: "OrderlyServiceDomainNotReady", at: "20m",
		series: map[string]string{`orderly_servicedomain_condition{job="orderly", namespace="storefront", servicedomain="shop", condition="Ready"}`: "0x10 1x15"}},
	// time() is the evaluation time: 2 h in, the certificate expires at 10 days.
	{alert: "OrderlyServiceDomainCertificateExpiring", at: "2h",
		series: map[string]string{`orderly_servicedomain_certificate_expiry_timestamp_seconds{job="orderly", namespace="storefront", servicedomain="shop"}`: "864000x150"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "namespace": "storefront", "servicedomain": "shop"},
			summary: "ServiceDomain storefront/shop: its certificate expires in 9d 22h 0m 0s."}}},
	{alert: "OrderlyServiceDomainCertificateExpiring", at: "2h",
		series: map[string]string{`orderly_servicedomain_certificate_expiry_timestamp_seconds{job="orderly", namespace="storefront", servicedomain="shop"}`: "1296000x150"}},
	{alert: "OrderlyPlacementClusterUnhealthy", at: "15m",
		series: map[string]string{`orderly_placement_cluster_healthy{job="orderly", namespace="fleet", cluster="eu-1"}`: "1x2 0x15"},
		fire: []firing{{labels: map[string]string{"job": "orderly", "namespace": "fleet", "cluster": "eu-1"},
			summary: "Member cluster fleet/eu-1 has failed Orderly's health probe for 10 minutes."}}},
	{alert: "OrderlyPlacementClusterUnhealthy", at: "15m",
		series: map[string]string{`orderly_placement_cluster_healthy{job="orderly", namespace="fleet", cluster="eu-1"}`: "0x8 1x10"}},
	{alert: "OrderlyPlacementApplyErrors", at: "20m",
		series: map[string]string{
			`orderly_placement_apply_errors_total{job="orderly", namespace="fleet", cluster="eu-1"}`: "0+2x30",
			`orderly_placement_cluster_healthy{job="orderly", namespace="fleet", cluster="eu-1"}`:    "1x30"},
		fire: []firing{{labels: map[string]string{"namespace": "fleet", "cluster": "eu-1"},
			summary: "Member cluster fleet/eu-1: syncs of PlacementPolicies have kept failing for 15 minutes."}}},
	{alert: "OrderlyPlacementApplyErrors", at: "20m",
		series: map[string]string{
			`orderly_placement_apply_errors_total{job="orderly", namespace="fleet", cluster="eu-1"}`: "0+2x5 10x25",
			`orderly_placement_cluster_healthy{job="orderly", namespace="fleet", cluster="eu-1"}`:    "1x30"}},
	// An unreachable member is OrderlyPlacementClusterUnhealthy's.
	{alert: "OrderlyPlacementApplyErrors", at: "20m",
		series: map[string]string{
			`orderly_placement_apply_errors_total{job="orderly", namespace="fleet", cluster="eu-1"}`: "0+2x30",
			`orderly_placement_cluster_healthy{job="orderly", namespace="fleet", cluster="eu-1"}`:    "0x30"}},
	// A member of the same name in another namespace being unreachable hides nothing.
	{alert: "OrderlyPlacementApplyErrors", at: "20m",
		series: map[string]string{
			`orderly_placement_apply_errors_total{job="orderly", namespace="fleet", cluster="eu-1"}`:  "0+2x30",
			`orderly_placement_cluster_healthy{job="orderly", namespace="fleet", cluster="eu-1"}`:     "1x30",
			`orderly_placement_cluster_healthy{job="orderly", namespace="elsewhere", cluster="eu-1"}`: "0x30"},
		fire: []firing{{labels: map[string]string{"namespace": "fleet", "cluster": "eu-1"},
			summary: "Member cluster fleet/eu-1: syncs of PlacementPolicies have kept failing for 15 minutes."}}},
}

// TestAlertRules checks the rules with promtool and runs a unit case per alert that
// must fire and one that must not. The summaries are written out here; the other
// annotations are fixed text, taken from the rules.
func TestAlertRules(t *testing.T) {
	promtool, err := testprom.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rulesFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	rules := loadRules(t)
	firesIn, quietIn := map[string]bool{}, map[string]bool{}
	var tests []map[string]any
	for _, c := range alertCases {
		r, ok := rules[c.alert]
		if !ok {
			t.Fatalf("a case tests %s, which is not in %s", c.alert, rulesFile)
		}
		var series []map[string]string
		for s, v := range c.series {
			series = append(series, map[string]string{"series": s, "values": v})
		}
		sort.Slice(series, func(i, j int) bool { return series[i]["series"] < series[j]["series"] })
		exp := []map[string]any{}
		for _, f := range c.fire {
			labels := map[string]string{"severity": r.Labels["severity"]}
			for k, v := range f.labels {
				labels[k] = v
			}
			annotations := map[string]string{}
			for k, v := range r.Annotations {
				annotations[k] = v
			}
			annotations["summary"] = f.summary
			exp = append(exp, map[string]any{"exp_labels": labels, "exp_annotations": annotations})
		}
		if len(c.fire) > 0 {
			firesIn[c.alert] = true
		} else {
			quietIn[c.alert] = true
		}
		tests = append(tests, map[string]any{
			"interval":        "1m",
			"input_series":    series,
			"alert_rule_test": []map[string]any{{"eval_time": c.at, "alertname": c.alert, "exp_alerts": exp}},
		})
	}
	for name, r := range rules {
		if !firesIn[name] || !quietIn[name] {
			t.Errorf("alert %s needs a case that fires and one that does not", name)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if r.Annotations[a] == "" {
				t.Errorf("alert %s has no %s", name, a)
			}
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("alert %s: severity %q, want critical, warning or info", name, s)
		}
	}
	abs, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(map[string]any{"rule_files": []string{abs}, "evaluation_interval": "1m", "tests": tests})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules_test.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestRunbooks: every alert's runbook is a section of docs/monitoring.md.
func TestRunbooks(t *testing.T) {
	doc, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "### ") {
			anchors[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(line, "### ")))] = true
		}
	}
	for name, r := range loadRules(t) {
		want := "docs/monitoring.md#" + strings.ToLower(name)
		if r.Annotations["runbook"] != want {
			t.Errorf("alert %s: runbook %q, want %q", name, r.Annotations["runbook"], want)
		}
		if !anchors[strings.ToLower(name)] {
			t.Errorf("alert %s has no section \"### %s\" in %s", name, name, runbooksFile)
		}
	}
}

type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title      string          `json:"title"`
	Type       string          `json:"type"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// TestDashboard: the dashboard parses, and every panel but a row has a title, the
// dashboard's data source variable and at least one query.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: a dashboard needs a title and a uid", dashboardFile)
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Title == "" {
			t.Errorf("%s: a %s panel has no title", dashboardFile, p.Type)
		}
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q does not use the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
}

// TestDashboardQueriesParse: every panel query is valid PromQL. promtool parses
// them as the expressions of recording rules, since it has no command for a bare query.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := testprom.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("groups:\n- name: dashboard\n  rules:\n")
	n := 0
	for _, p := range loadDashboard(t).Panels {
		for _, q := range p.Targets {
			expr, _ := json.Marshal(q.Expr) // a JSON string is a YAML string
			fmt.Fprintf(&b, "  - record: dashboard_query_%d\n    expr: %s\n", n, expr)
			n++
		}
	}
	if n == 0 {
		t.Fatal("the dashboard has no query")
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("a dashboard query is not valid PromQL: %v\n%s", err, out)
	}
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// metricName matches the names of the series Orderly's manager exports, in PromQL.
var metricName = regexp.MustCompile(`\b(?:orderly|controller_runtime|workqueue|leader_election|rest_client)_[a-z0-9_]+\b`)

// TestEveryMetricUsedIsExported: no alert or dashboard panel queries a metric that
// the manager never exports (a typo, a renamed metric).
func TestEveryMetricUsedIsExported(t *testing.T) {
	exported := exportedNames(t)
	used := map[string][]string{}
	for name, r := range loadRules(t) {
		for _, m := range metricName.FindAllString(r.Expr, -1) {
			used[m] = append(used[m], "alert "+name)
		}
	}
	for _, p := range loadDashboard(t).Panels {
		for _, q := range p.Targets {
			for _, m := range metricName.FindAllString(q.Expr, -1) {
				used[m] = append(used[m], fmt.Sprintf("panel %q", p.Title))
			}
		}
	}
	if len(used) < 20 {
		t.Fatalf("found only %d metric names in the rules and the dashboard; is the pattern right?", len(used))
	}
	for m, where := range used {
		if !exported[m] {
			t.Errorf("%s is used by %s but the manager exports no such metric", m, strings.Join(where, ", "))
		}
	}
}

// exportedNames are the names of every metric registered with controller-runtime's
// registry (which the manager serves), with a histogram's _bucket, _sum and _count.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		ctrlmetrics.Registry.(prometheus.Collector).Describe(ch)
		close(ch)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			names[m[1]+suffix] = true
		}
	}
	return names
}
