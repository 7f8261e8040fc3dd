package hubsig_test

import (
	"errors"
	"testing"

	"github.com/boardreadyops/cloud/pkg/hubsig"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	// GitHub's published test vector (docs: "Validating webhook deliveries").
	const (
		secret  = "It's a Secret to Everybody"
		payload = "Hello, World!"
		sig     = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	if got := hubsig.Sign([]byte(secret), []byte(payload)); got != sig {
		t.Fatalf("Sign = %s, want GitHub's %s", got, sig)
	}
	tests := []struct {
		name    string
		secrets []string
		header  string
		body    string
		want    error
	}{
		{"test vector", []string{secret}, sig, payload, nil},
		{"rotation: old and new both accepted (new)", []string{"old secret", secret}, sig, payload, nil},
		{"rotation: old and new both accepted (old)", []string{secret, "new secret"}, sig, payload, nil},
		{"removed secret refused", []string{"new secret"}, sig, payload, hubsig.ErrBadSignature},
		{"no secrets refuses everything", nil, sig, payload, hubsig.ErrBadSignature},
		{"body changed", []string{secret}, sig, payload + " ", hubsig.ErrBadSignature},
		{"missing header", []string{secret}, "", payload, hubsig.ErrUnsigned},
		{"sha1 only", []string{secret}, "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59", payload, hubsig.ErrUnsigned},
		{"uppercase prefix", []string{secret}, "SHA256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", payload, hubsig.ErrUnsigned},
		{"not hex", []string{secret}, "sha256=zz7107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", payload, hubsig.ErrUnsigned},
		{"short", []string{secret}, "sha256=757107ea", payload, hubsig.ErrUnsigned},
		{"uppercase hex accepted", []string{secret}, "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17", payload, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			secrets := make([][]byte, len(tt.secrets))
			for i, s := range tt.secrets {
				secrets[i] = []byte(s)
			}
			if err := hubsig.Verify(secrets, tt.header, []byte(tt.body)); !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}
