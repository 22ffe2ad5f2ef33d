package selfsign

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Keys of the Secret (the kubernetes.io/tls layout plus the CA) and of the
// ConfigMap.
const (
	KeyCert   = corev1.TLSCertKey       // tls.crt
	KeyKey    = corev1.TLSPrivateKeyKey // tls.key
	KeyCA     = "ca.crt"
	keyCAKey  = "ca.key"
	caLife    = 10 * 365 * 24 * time.Hour
	certLife  = 365 * 24 * time.Hour
	renewLeft = 30 * 24 * time.Hour
)

// Config names where the material lives and what the certificate covers.
type Config struct {
	Namespace string
	// Secret holds CA and serving certificate; only the controller reads it.
	Secret string
	// ConfigMap publishes ca.crt for agents.
	ConfigMap string
	// DNSNames the serving certificate covers, e.g. the Service's names.
	DNSNames []string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Ensure returns the serving certificate and the CA's PEM, creating or
// renewing them in the Secret and publishing the CA in the ConfigMap.
func Ensure(ctx context.Context, kube kubernetes.Interface, cfg Config) (tls.Certificate, []byte, error) {
	if cfg.Namespace == "" || cfg.Secret == "" || cfg.ConfigMap == "" || len(cfg.DNSNames) == 0 {
		return tls.Certificate{}, nil, errors.New("selfsign: Namespace, Secret, ConfigMap and DNSNames are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	secrets := kube.CoreV1().Secrets(cfg.Namespace)
	for attempt := 0; ; attempt++ {
		sec, err := secrets.Get(ctx, cfg.Secret, metav1.GetOptions{})
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return tls.Certificate{}, nil, fmt.Errorf("reading Secret %s/%s (the controller needs get/create/update on it): %w", cfg.Namespace, cfg.Secret, err)
		}
		var data map[string][]byte
		if exists {
			data = sec.Data
		}
		next, changed, err := material(data, cfg)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("Secret %s/%s: %w", cfg.Namespace, cfg.Secret, err)
		}
		switch {
		case !changed:
		case exists:
			sec.Data = next
			_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
		default:
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: cfg.Secret, Namespace: cfg.Namespace,
					Labels: map[string]string{"app": "switchyard", "component": "controller"}},
				Type: corev1.SecretTypeTLS, Data: next,
			}, metav1.CreateOptions{})
		}
		// Another controller instance wrote first: start over from its copy,
		// so both end up serving under the same CA.
		if (apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)) && attempt < 5 {
			continue
		}
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("writing Secret %s/%s: %w", cfg.Namespace, cfg.Secret, err)
		}
		if err := publishCA(ctx, kube, cfg, next[KeyCA]); err != nil {
			return tls.Certificate{}, nil, err
		}
		cert, err := tls.X509KeyPair(next[KeyCert], next[KeyKey])
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("Secret %s/%s: serving pair: %w", cfg.Namespace, cfg.Secret, err)
		}
		return cert, next[KeyCA], nil
	}
}

// material returns the Secret data to hold: data itself when it is complete
// and current, else data with what was missing or stale made anew. A CA that
// parses is always kept, so agents that trust it go on trusting.
func material(data map[string][]byte, cfg Config) (map[string][]byte, bool, error) {
	now := cfg.Now()
	ca, caKey, err := parsePair(data[KeyCA], data[keyCAKey])
	if err != nil || now.Add(renewLeft).After(ca.NotAfter) {
		if ca, caKey, err = newCA(now); err != nil {
			return nil, false, err
		}
		data = nil // a new CA invalidates the serving certificate
	}
	if data != nil {
		if cert, _, err := parsePair(data[KeyCert], data[KeyKey]); err == nil &&
			cert.CheckSignatureFrom(ca) == nil &&
			now.Add(renewLeft).Before(cert.NotAfter) &&
			coversAll(cert, cfg.DNSNames) {
			return data, false, nil
		}
	}
	certPEM, keyPEM, err := newServing(now, ca, caKey, cfg.DNSNames)
	if err != nil {
		return nil, false, err
	}
	return map[string][]byte{
		KeyCA: pemCert(ca.Raw), keyCAKey: pemKey(caKey),
		KeyCert: certPEM, KeyKey: keyPEM,
	}, true, nil
}

func coversAll(c *x509.Certificate, names []string) bool {
	for _, n := range names {
		if !slices.Contains(c.DNSNames, n) {
			return false
		}
	}
	return true
}

func publishCA(ctx context.Context, kube kubernetes.Interface, cfg Config, caPEM []byte) error {
	cms := kube.CoreV1().ConfigMaps(cfg.Namespace)
	cm, err := cms.Get(ctx, cfg.ConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: cfg.ConfigMap, Namespace: cfg.Namespace,
				Labels: map[string]string{"app": "switchyard", "component": "controller"}},
			Data: map[string]string{KeyCA: string(caPEM)},
		}, metav1.CreateOptions{})
	case err == nil && !bytes.Equal([]byte(cm.Data[KeyCA]), caPEM):
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[KeyCA] = string(caPEM)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("publishing the CA in ConfigMap %s/%s: %w", cfg.Namespace, cfg.ConfigMap, err)
	}
	return nil
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, nil, errors.New("missing")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("key is not ECDSA")
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	return c, key, err
}

func newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "switchyard-controller-ca@" + now.UTC().Format(time.RFC3339)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLife),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func newServing(now time.Time, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLife),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	return pemCert(der), pemKey(key), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemKey(k *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalECPrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// ServiceDNSNames are the names a client may use for Service name in
// namespace ns: the certificate must cover each.
func ServiceDNSNames(name, ns string) []string {
	return []string{name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}
}
