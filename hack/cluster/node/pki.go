package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certSpec is one certificate the cluster's CA signs: a client identity (CN is the user, O the
// groups) and, for servers, the addresses it is served on.
type certSpec struct {
	file   string
	cn     string
	orgs   []string
	ips    []net.IP
	dns    []string
	server bool
}

// writePKI creates, under dir, a CA and every certificate and key the components use, each
// valid for a week (the cluster lives for a test run or a debugging session), plus the
// service-account signing key. Keys are ECDSA P-256, generated afresh by every cluster-up.
func writePKI(dir string, c *Config) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "boardreadyops-cluster-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := writeCertKey(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	bridge := c.BridgeIP()
	specs := []certSpec{
		{file: "apiserver", cn: "kube-apiserver", server: true,
			ips: []net.IP{bridge, net.ParseIP("127.0.0.1"), c.KubernetesServiceIP()},
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{file: "admin", cn: "boardreadyops-admin", orgs: []string{"system:masters"}},
		{file: "controller-manager", cn: "system:kube-controller-manager"},
		{file: "scheduler", cn: "system:kube-scheduler"},
		{file: "kube-proxy", cn: "system:kube-proxy"},
		{file: "kubelet-client", cn: "system:node:" + c.NodeName, orgs: []string{"system:nodes"}},
		{file: "kubelet-server", cn: c.NodeName, server: true, ips: []net.IP{bridge}, dns: []string{c.NodeName}},
	}
	for i, s := range specs {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)),
			Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
			NotBefore:    now,
			NotAfter:     caTmpl.NotAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			IPAddresses:  s.ips,
			DNSNames:     s.dns,
		}
		if s.server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("%s certificate: %w", s.file, err)
		}
		if err := writeCertKey(dir, s.file, der, key); err != nil {
			return err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, "sa.key"), saKey)
}

func writeCertKey(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
