package netpolmodel

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"switchyard.dev/switchyard/controller/app"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests"
)

// Controller is switchyard-controller running in the test process on a
// fixed loopback address, so it can be stopped and started again where the
// nodes' forwards expect it.
type Controller struct {
	Addr    string
	LogPath string

	cp     *controlplane.ControlPlane
	log    *os.File
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
}

// agentSA is the agent's ServiceAccount, the one the controller admits.
const agentSA = "kube-system/switchyard-agent"

// StartController installs the CRDs and runs the controller; it stops on
// cleanup.
func StartController(t testenv.T, cp *controlplane.ControlPlane) *Controller {
	t.Helper()
	installCRDs(t, cp)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	c := &Controller{Addr: l.Addr().String(), cp: cp}
	c.LogPath = filepath.Join(testenv.Dir(t, "ctrl"), "switchyard-controller.log")
	if c.log, err = os.Create(c.LogPath); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { c.Stop(); c.log.Close() })
	c.run(l)
	_, err = cp.Client.CoreV1().ServiceAccounts("kube-system").Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-agent"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the agent ServiceAccount: %v", err)
	}
	return c
}

func (c *Controller) run(l net.Listener) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Config{Kube: c.cp.Config, Listener: l, AllowedServiceAccounts: []string{agentSA},
			Log: slog.New(slog.NewTextHandler(c.log, nil))})
	}()
	c.mu.Lock()
	c.cancel, c.done = cancel, done
	c.mu.Unlock()
}

// Stop stops the controller (the nodes lose their stream).
func (c *Controller) Stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel, c.done = nil, nil
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
}

// Start runs a stopped controller again on the same address.
func (c *Controller) Start(t testenv.T) {
	t.Helper()
	var l net.Listener
	err := testenv.Eventually("the controller's address "+c.Addr+" to be free again", 10*time.Second, 100*time.Millisecond, func() error {
		var err error
		l, err = net.Listen("tcp", c.Addr)
		return err
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	c.run(l)
}

func installCRDs(t testenv.T, cp *controlplane.ControlPlane) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("%v", err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	files, _ := fs.Glob(manifests.Files, "crds/*.yaml")
	for _, f := range files {
		b, _ := fs.ReadFile(manifests.Files, f)
		var obj map[string]any
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096).Decode(&obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		_, err := dyn.Resource(crdGVR).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing %s: %v", f, err)
		}
	}
	tiers := schema.GroupVersionResource{Group: "crd.switchyard.dev", Version: "v1beta1", Resource: "tiers"}
	if err := testenv.Eventually("the Switchyard CRDs to be served", 30*time.Second, 200*time.Millisecond, func() error {
		_, err := dyn.Resource(tiers).List(context.Background(), metav1.ListOptions{})
		return err
	}); err != nil {
		t.Fatalf("%v", err)
	}
	_ = fmt.Sprint()
}
