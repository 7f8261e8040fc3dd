package githubsim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// NewAppKey generates a throw-away App key pair (RSA 2048) for tests and local runs: the PEM
// private key the App signs its JWT with, and the public key the simulator verifies it with.
// Keys are generated at run time; none is ever committed.
func NewAppKey() ([]byte, *rsa.PublicKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("generate App key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), &key.PublicKey, nil
}

// PublicKeyFromPEM extracts the public key from a PEM private key (PKCS#1 or PKCS#8) or a PEM
// public key (PKIX), for the simulator binary.
func PublicKeyFromPEM(b []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return &k.PublicKey, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if rk, ok := k.(*rsa.PrivateKey); ok {
			return &rk.PublicKey, nil
		}
	}
	if k, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
		if rk, ok := k.(*rsa.PublicKey); ok {
			return rk, nil
		}
	}
	return nil, errors.New("not an RSA key")
}
