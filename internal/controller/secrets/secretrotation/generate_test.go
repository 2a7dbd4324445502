package secretrotation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

func TestPasswordHasEveryEnabledClassAndNothingElse(t *testing.T) {
	tests := []struct {
		name    string
		gen     secretsv1alpha1.PasswordGenerator
		wantSet []string
		wantNot string
	}{
		{"all but symbols", secretsv1alpha1.PasswordGenerator{Length: 16}, []string{lowercase, uppercase, digits}, symbols},
		{"digits only", secretsv1alpha1.PasswordGenerator{Length: 20, Lowercase: ptr.To(false), Uppercase: ptr.To(false)}, []string{digits}, lowercase + uppercase + symbols},
		{"symbols and lowercase", secretsv1alpha1.PasswordGenerator{Length: 64, Uppercase: ptr.To(false), Digits: ptr.To(false), Symbols: ptr.To(true)}, []string{lowercase, symbols}, uppercase + digits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 50 {
				p, err := password(tt.gen)
				if err != nil {
					t.Fatal(err)
				}
				if len(p) != int(tt.gen.Length) {
					t.Fatalf("length %d, want %d", len(p), tt.gen.Length)
				}
				for _, set := range tt.wantSet {
					if !strings.ContainsAny(p, set) {
						t.Fatalf("password has no character of %q", set)
					}
				}
				if strings.ContainsAny(p, tt.wantNot) {
					t.Fatalf("password has a character of a disabled class")
				}
			}
		})
	}
	if _, err := password(secretsv1alpha1.PasswordGenerator{Length: 16, Lowercase: ptr.To(false), Uppercase: ptr.To(false), Digits: ptr.To(false)}); err == nil {
		t.Error("no class enabled: want an error")
	}
}

func TestGenerateWritesTheKeyAndNeverRepeats(t *testing.T) {
	g := secretsv1alpha1.Generator{APIKey: &secretsv1alpha1.APIKeyGenerator{Prefix: "sk_live_", Length: 32}}
	a, err := generate(g)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := generate(g)
	v := string(a["apiKey"])
	if !strings.HasPrefix(v, "sk_live_") || len(v) != len("sk_live_")+32 {
		t.Errorf("api key %d characters with prefix? %v", len(v), strings.HasPrefix(v, "sk_live_"))
	}
	if string(a["apiKey"]) == string(b["apiKey"]) {
		t.Error("two generated keys are equal")
	}
	p, _ := generate(secretsv1alpha1.Generator{Password: &secretsv1alpha1.PasswordGenerator{Key: "pw", Length: 24}})
	if len(p["pw"]) != 24 {
		t.Errorf("password under key pw: %d bytes, want 24", len(p["pw"]))
	}
	if _, err := generate(secretsv1alpha1.Generator{External: &secretsv1alpha1.ExternalGenerator{}}); err == nil {
		t.Error("external generator: want an error, nothing to generate")
	}
}

func TestVersionTellsContentApartWithoutRevealingIt(t *testing.T) {
	data := map[string][]byte{"password": []byte("hunter2hunter2"), "user": []byte("app")}
	v := Version("uid-1", data)
	if len(v) != 16 || strings.Contains(v, "hunter2") {
		t.Fatalf("version %q", v)
	}
	if Version("uid-1", map[string][]byte{"user": []byte("app"), "password": []byte("hunter2hunter2")}) != v {
		t.Error("version depends on map order")
	}
	if Version("uid-2", data) == v {
		t.Error("the same content in two SecretRotations has the same version")
	}
	// Key/value boundaries count: {"ab":"c"} is not {"a":"bc"}.
	if Version("u", map[string][]byte{"ab": []byte("c")}) == Version("u", map[string][]byte{"a": []byte("bc")}) {
		t.Error("versions collide across key boundaries")
	}
	if Version("u", nil) != "" {
		t.Error("empty data has a version")
	}
}
