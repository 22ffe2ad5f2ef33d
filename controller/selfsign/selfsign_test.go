package selfsign

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func leaf(t *testing.T, c tls.Certificate) *x509.Certificate {
	t.Helper()
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func verify(t *testing.T, c tls.Certificate, caPEM []byte, name string, at time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM holds no certificate")
	}
	if _, err := leaf(t, c).Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: at}); err != nil {
		t.Fatalf("serving certificate does not verify for %q under the published CA: %v", name, err)
	}
}

func TestEnsure(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	names := ServiceDNSNames("switchyard-controller", "kube-system")
	cfg := func(now time.Time, names []string) Config {
		return Config{Namespace: "kube-system", Secret: "switchyard-controller-tls", ConfigMap: "switchyard-controller-ca",
			DNSNames: names, Now: func() time.Time { return now }}
	}
	published := func(t *testing.T, kube *fake.Clientset) []byte {
		t.Helper()
		cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "switchyard-controller-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cm.Data[keyCAKey]; ok {
			t.Fatal("the CA key leaked into the ConfigMap")
		}
		return []byte(cm.Data[KeyCA])
	}

	tests := []struct {
		name string
		// later is the second start, relative to the first.
		later      time.Duration
		laterNames []string
		corruptCA  bool
		sameCA     bool
		sameCert   bool
	}{
		{name: "restart reuses everything", later: time.Hour, laterNames: names, sameCA: true, sameCert: true},
		{name: "serving cert near expiry is re-issued under the same CA", later: certLife - renewLeft/2, laterNames: names, sameCA: true},
		{name: "a new name re-issues under the same CA", later: time.Hour, laterNames: append(names, "controller.example"), sameCA: true},
		{name: "an unreadable CA is replaced", later: time.Hour, laterNames: names, corruptCA: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			c1, ca1, err := Ensure(ctx, kube, cfg(start, names))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(published(t, kube), ca1) {
				t.Fatal("ConfigMap does not hold the CA the certificate was issued by")
			}
			verify(t, c1, ca1, "switchyard-controller.kube-system.svc", start)
			if tc.corruptCA {
				sec, _ := kube.CoreV1().Secrets("kube-system").Get(ctx, "switchyard-controller-tls", metav1.GetOptions{})
				sec.Data[KeyCA] = []byte("garbage")
				if _, err := kube.CoreV1().Secrets("kube-system").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			at := start.Add(tc.later)
			c2, ca2, err := Ensure(ctx, kube, cfg(at, tc.laterNames))
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Equal(ca1, ca2); got != tc.sameCA {
				t.Errorf("same CA = %v, want %v", got, tc.sameCA)
			}
			if got := bytes.Equal(c1.Certificate[0], c2.Certificate[0]); got != tc.sameCert {
				t.Errorf("same serving certificate = %v, want %v", got, tc.sameCert)
			}
			if !bytes.Equal(published(t, kube), ca2) {
				t.Error("ConfigMap was not updated to the CA in use")
			}
			for _, n := range tc.laterNames {
				verify(t, c2, ca2, n, at)
			}
		})
	}
}

func TestEnsureRejectsIncompleteConfig(t *testing.T) {
	_, _, err := Ensure(context.Background(), fake.NewClientset(), Config{Namespace: "kube-system"})
	if err == nil {
		t.Fatal("want an error naming the missing fields")
	}
}

// A Secret an operator made by hand with only tls.crt/tls.key of some other
// CA is replaced by a complete one rather than served half-known.
func TestEnsureCompletesForeignSecret(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
		Data:       map[string][]byte{KeyCert: []byte("x"), KeyKey: []byte("y")},
	})
	c, ca, err := Ensure(ctx, kube, Config{Namespace: "ns", Secret: "s", ConfigMap: "cm", DNSNames: []string{"ctl.ns.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	verify(t, c, ca, "ctl.ns.svc", time.Now())
}
