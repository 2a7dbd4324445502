package devdatabase

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// spec.secretTemplate is rendered with text/template and nothing added to its
// built-in functions: no environment, no files, no network, nothing but the
// values given (urlquery escapes for URLs, printf, index, len, ...), and no loops
// or templates calling templates, whose cost has no bound (kit.ParseTemplate). CEL cannot
// parse a Go template, so the API server checks only the keys and sizes, and the
// controller parses the templates before it creates or changes anything, reporting
// a bad one as Ready=False, reason InvalidSecretTemplate. A validating webhook
// could refuse it at admission, but would put Orderly's availability in the path
// of every DevDatabase write; the project uses native policies where it can, and a
// condition here costs the user one `kubectl describe`.

// maxRenderedBytes bounds one rendered value, so that `printf "%0999999d"` cannot
// make a Secret the API server refuses (1 MiB).
const maxRenderedBytes = 16 << 10

// templateData is what a template sees: the values of the Secret it is rendered
// into (each user's Secret with its own username and password).
type templateData struct {
	Host, Port, Database, Username, Password string
}

// errInvalidTemplate: a secretTemplate value does not parse or does not render.
var errInvalidTemplate = errors.New("invalid secretTemplate")

// secretTemplates are the parsed spec.secretTemplate, by key.
type secretTemplates map[string]*kit.Template

// parseTemplates parses every value of spec.secretTemplate. The error names the
// key and says what is wrong with its text; it cannot hold a password, which a
// template only sees when rendered.
func parseTemplates(spec map[string]string) (secretTemplates, error) {
	out := secretTemplates{}
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		t, err := kit.ParseTemplate(k, spec[k], maxRenderedBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: key %s: %w", errInvalidTemplate, k, err)
		}
		out[k] = t
	}
	return out, nil
}

// execLocation keeps of a text/template execution error where it happened (the
// template's own text), dropping why: the reason could quote a value, and so the
// password.
var execLocation = regexp.MustCompile(`^template: [^ ]+ executing "[^"]*" at <[^>]*>`)

// render renders every template for one Secret. An error names the key and the
// place in the template, never a rendered value.
func (ts secretTemplates) render(data templateData) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ts))
	for _, k := range slices.Sorted(maps.Keys(ts)) {
		v, err := ts[k].Execute(data)
		if err != nil {
			if errors.Is(err, kit.ErrTemplateTooLong) {
				return nil, fmt.Errorf("%w: key %s renders to more than %d bytes", errInvalidTemplate, k, maxRenderedBytes)
			}
			where := execLocation.FindString(err.Error())
			if where == "" {
				where = "template: " + k
			}
			return nil, fmt.Errorf("%w: key %s cannot be rendered (%s; the cause is not shown, as it could quote the password)", errInvalidTemplate, k, where)
		}
		out[k] = []byte(v)
	}
	return out, nil
}

// standardKeys are the keys of a connection Secret that templates cannot replace
// (the API server refuses them too).
var standardKeys = []string{datav1alpha1.SecretKeyHost, datav1alpha1.SecretKeyPort, datav1alpha1.SecretKeyDatabase,
	datav1alpha1.SecretKeyUsername, datav1alpha1.SecretKeyPassword, datav1alpha1.SecretKeyURI, datav1alpha1.SecretKeyJDBCURL,
	datav1alpha1.SecretKeyCACert}
