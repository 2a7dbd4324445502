package audit

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestVersionMaturity(t *testing.T) {
	for v, want := range map[string]string{
		"v1": Stable, "v2": Stable, "v1beta1": Beta, "v2beta3": Beta, "v1alpha1": Alpha, "v1alpha2": Alpha,
		"v1beta": Other, "v0": Other, "v1-experimental": Other, "alpha": Other, "": Other,
	} {
		if got := versionMaturity(v); got != want {
			t.Errorf("versionMaturity(%q) = %s, want %s", v, got, want)
		}
	}
}

// redescribed gives a schema other descriptions, at its root and below.
func redescribed(v *apiextensionsv1.CustomResourceValidation) *apiextensionsv1.CustomResourceValidation {
	v.OpenAPIV3Schema.Description = "A widget, described at length."
	spec := v.OpenAPIV3Schema.Properties["spec"]
	spec.Description = "What the widget should be."
	v.OpenAPIV3Schema.Properties["spec"] = spec
	return v
}

func TestGroupAPIFindings(t *testing.T) {
	const g = "example.com"
	different := specSchema(1)
	different.OpenAPIV3Schema.Properties["spec"].Properties["extra"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	stable := func(kind string) apiextensionsv1.CustomResourceDefinition {
		return newCRD(g, kind, strings.ToLower(kind)+"s").version("v1", true, specSchema(1)).build()
	}
	alpha := func(kind string) apiextensionsv1.CustomResourceDefinition {
		return newCRD(g, kind, strings.ToLower(kind)+"s").version("v1alpha1", true, specSchema(1)).build()
	}
	cases := []struct {
		name         string
		crds         []apiextensionsv1.CustomResourceDefinition
		roles        []rbacv1.ClusterRole
		wantMaturity string
		// wantResults are the results of the checks named; the others pass.
		wantResults map[string]string
		wantScore   int
		// wantInMessage is a piece of the named check's message.
		wantInMessage map[string]string
	}{{
		name:         "alpha only, like Orderly's groups",
		crds:         []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").version("v1alpha1", true, specSchema(2)).build()},
		wantMaturity: Alpha, wantResults: map[string]string{"api.maturity": Fail}, wantScore: 70,
		wantInMessage: map[string]string{"api.maturity": "alpha only for Widget", "api.cel": "2 CEL validation rules"},
	}, {
		name: "a group of kinds of several maturities is graded on their mean",
		crds: []apiextensionsv1.CustomResourceDefinition{
			newCRD(g, "Widget", "widgets").version("v1", true, specSchema(1)).build(),
			newCRD(g, "Gadget", "gadgets").version("v1alpha1", false, specSchema(1)).version("v1beta1", true, specSchema(1)).build(),
		},
		wantMaturity: Beta, wantResults: map[string]string{"api.maturity": Warn}, wantScore: 95,
		wantInMessage: map[string]string{"api.maturity": "of the 2 kinds users write, 1 stable (Widget), 1 beta (Gadget)", "api.conversion": "identical schemas"},
	}, {
		name:         "stable, served versions with identical schemas and no webhook",
		crds:         []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").version("v1beta1", false, specSchema(1)).version("v1", true, specSchema(1)).build()},
		wantMaturity: Stable, wantResults: map[string]string{}, wantScore: 100,
	}, {
		name: "different schemas without a conversion webhook; deprecated version served; stored at beta",
		crds: []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").
			version("v1beta1", true, specSchema(1)).version("v1", false, different).deprecated("v1beta1").build()},
		wantMaturity: Stable,
		wantResults:  map[string]string{"api.conversion": Fail, "api.deprecated-served": Warn, "api.storage-version": Warn},
		wantScore:    100 - 15 - 5 - 5,
		wantInMessage: map[string]string{
			"api.conversion": "Widget (v1beta1 and v1)", "api.deprecated-served": "Widget v1beta1", "api.storage-version": "stored as v1beta1",
		},
	}, {
		// The Gateway API's Gateway v1beta1 and v1: the same fields, described differently.
		name: "served versions whose schemas differ only in their descriptions need no webhook",
		crds: []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").
			version("v1beta1", false, specSchema(1)).version("v1", true, redescribed(specSchema(1))).build()},
		wantMaturity: Stable, wantResults: map[string]string{}, wantScore: 100,
		wantInMessage: map[string]string{"api.conversion": "identical schemas"},
	}, {
		name:         "different schemas converted by a webhook",
		crds:         []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").version("v1beta1", false, specSchema(1)).version("v1", true, different).webhook().build()},
		wantMaturity: Stable, wantResults: map[string]string{}, wantScore: 100,
		wantInMessage: map[string]string{"api.conversion": "converted by a webhook: Widget"},
	}, {
		name:         "spec keeps unknown fields, no CEL",
		crds:         []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").version("v1beta1", true, openSpecSchema()).build()},
		wantMaturity: Beta, wantResults: map[string]string{"api.maturity": Fail, "api.schema": Fail, "api.cel": Fail}, wantScore: 100 - 10 - 20 - 10,
		wantInMessage: map[string]string{"api.schema": "Widget v1beta1 keeps any field in spec"},
	}, {
		// Before, the group took the penalty of its least mature kind: 30, as if
		// alpha only.
		name:         "a stable API that adds three alpha kinds is graded on the mix, not as an alpha project",
		crds:         []apiextensionsv1.CustomResourceDefinition{stable("Cluster"), stable("Backup"), stable("Pooler"), stable("Database"), alpha("Publication"), alpha("Subscription"), alpha("Catalog")},
		wantMaturity: Alpha, wantResults: map[string]string{"api.maturity": Fail}, wantScore: 100 - 13, // 3×30 / 7 = 12.9
		wantInMessage: map[string]string{"api.maturity": "of the 7 kinds users write, 4 stable (Cluster, Backup, Pooler, Database), 3 alpha (Publication, Subscription, Catalog)"},
	}, {
		name: "a kind with only a status is a record the operator keeps: shown, not graded",
		crds: []apiextensionsv1.CustomResourceDefinition{stable("Cluster"),
			newCRD(g, "Quorum", "quorums").version("v1alpha1", true, statusOnlySchema()).build()},
		wantMaturity: Stable, wantResults: map[string]string{}, wantScore: 100,
		wantInMessage: map[string]string{"api.maturity": "(not graded: Quorum, which users do not write)"},
	}, {
		name: "the kinds aggregated into edit are those users write",
		crds: []apiextensionsv1.CustomResourceDefinition{stable("Cluster"), alpha("Internal")},
		roles: []rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: "x-edit", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
			Rules: []rbacv1.PolicyRule{rule(l(g), l("clusters"), l("create", "update", "delete"))}}},
		wantMaturity: Stable, wantResults: map[string]string{}, wantScore: 100,
		wantInMessage: map[string]string{"api.maturity": "every kind users write is served at a stable (v1 or later) version: Cluster (not graded: Internal"},
	}, {
		name:         "unconventional version names",
		crds:         []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").version("v1-preview", true, specSchema(1)).build()},
		wantMaturity: Other, wantResults: map[string]string{"api.maturity": Fail}, wantScore: 80,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sums []CRD
			for i := range tc.crds {
				sums = append(sums, summarizeCRD(&tc.crds[i]))
			}
			markUserWritten(g, tc.crds, sums, tc.roles)
			if got := groupMaturity(sums); got != tc.wantMaturity {
				t.Errorf("maturity = %s, want %s", got, tc.wantMaturity)
			}
			fs := groupAPIFindings(g, tc.crds, sums)
			for _, f := range fs {
				want := Pass
				if r, ok := tc.wantResults[f.Check]; ok {
					want = r
				}
				if f.Result != want {
					t.Errorf("%s = %s (%s), want %s", f.Check, f.Result, f.Message, want)
				}
				if f.Subject != g || f.Category != CategoryAPI {
					t.Errorf("%s: subject %q category %q, want %q %q", f.Check, f.Subject, f.Category, g, CategoryAPI)
				}
				if piece, ok := tc.wantInMessage[f.Check]; ok && !strings.Contains(f.Message, piece) {
					t.Errorf("%s message %q does not say %q", f.Check, f.Message, piece)
				}
			}
			if got := score(fs); got != tc.wantScore {
				t.Errorf("score = %d, want %d; findings %+v", got, tc.wantScore, fs)
			}
		})
	}
}
