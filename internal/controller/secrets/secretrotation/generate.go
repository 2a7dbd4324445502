package secretrotation

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"strings"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

// The alphabets of the password generator. Symbols are those that need no quoting in
// a shell, a URI's userinfo or a libpq connection string.
const (
	lowercase = "abcdefghijklmnopqrstuvwxyz"
	uppercase = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits    = "0123456789"
	symbols   = "!#%+,-.:=@^_~"
	base62    = digits + lowercase + uppercase
)

// generate returns the new data of the Secret for a password or apiKey generator.
// The value lives in the returned map only: the caller writes it to the rotation's
// own Secret and drops it.
func generate(g secretsv1alpha1.Generator) (map[string][]byte, error) {
	switch {
	case g.Password != nil:
		p, err := password(*g.Password)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{keyOr(g.Password.Key, "password"): []byte(p)}, nil
	case g.APIKey != nil:
		s, err := randomString(base62, int(lengthOr(g.APIKey.Length, 40)))
		if err != nil {
			return nil, err
		}
		return map[string][]byte{keyOr(g.APIKey.Key, "apiKey"): []byte(g.APIKey.Prefix + s)}, nil
	}
	return nil, fmt.Errorf("generator has no value to generate")
}

func keyOr(k, def string) string {
	if k == "" {
		return def
	}
	return k
}

func lengthOr(n, def int32) int32 {
	if n <= 0 {
		return def
	}
	return n
}

// password draws from the enabled classes and guarantees one character of each, so
// that a server's complexity rules never refuse a generated password.
func password(p secretsv1alpha1.PasswordGenerator) (string, error) {
	var classes []string
	lo, up, dg, sy := p.Classes()
	for _, c := range []struct {
		on  bool
		set string
	}{{lo, lowercase}, {up, uppercase}, {dg, digits}, {sy, symbols}} {
		if c.on {
			classes = append(classes, c.set)
		}
	}
	if len(classes) == 0 {
		return "", fmt.Errorf("password generator has no character class enabled")
	}
	n := int(lengthOr(p.Length, 32))
	if n < len(classes) {
		return "", fmt.Errorf("password length %d is shorter than its %d character classes", n, len(classes))
	}
	out := make([]byte, 0, n)
	for _, c := range classes {
		s, err := randomString(c, 1)
		if err != nil {
			return "", err
		}
		out = append(out, s...)
	}
	rest, err := randomString(strings.Join(classes, ""), n-len(out))
	if err != nil {
		return "", err
	}
	out = append(out, rest...)
	// Shuffle, so the guaranteed characters are not always first.
	for i := len(out) - 1; i > 0; i-- {
		j, err := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		if err != nil {
			return "", err
		}
		out[i], out[j.Int64()] = out[j.Int64()], out[i]
	}
	return string(out), nil
}

// randomString draws n characters of alphabet uniformly (crypto/rand, no modulo bias).
func randomString(alphabet string, n int) (string, error) {
	out := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range out {
		j, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("reading random bytes: %w", err)
		}
		out[i] = alphabet[j.Int64()]
	}
	return string(out), nil
}

// Version is the version of a Secret's content: an HMAC-SHA256 of its data, keyed by
// the SecretRotation's UID and cut to 16 hex characters. It tells one content from
// another without revealing it; the key keeps equal values in two SecretRotations
// from having equal versions, so a version says nothing across objects.
func Version(uid string, data map[string][]byte) string {
	if len(data) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, []byte("orderly.dev/secretrotation/"+uid))
	for _, k := range slices.Sorted(mapsKeys(data)) {
		fmt.Fprintf(mac, "%d:%s%d:", len(k), k, len(data[k]))
		mac.Write(data[k])
	}
	return hex.EncodeToString(mac.Sum(nil))[:16]
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
