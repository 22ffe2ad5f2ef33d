package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

// ServiceCIDR is the Service ClusterIP range the apiserver allocates from.
const ServiceCIDR = "10.96.0.0/16"

// ServiceCIDRv6 is the IPv6 one, with Options.DualStackServices: a /108,
// the largest IPv6 range the apiserver allocates from.
const ServiceCIDRv6 = "fd00:10:96::/108"

// ServiceAccountIssuer is the issuer written into service-account tokens.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// ControlPlane is a running etcd + kube-apiserver pair.
type ControlPlane struct {
	// URL is the apiserver's https endpoint on loopback.
	URL string
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Client is an admin clientset built from Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for Config.
	Kubeconfig string
	// CAFile is the PEM CA that signed the apiserver's serving certificate.
	CAFile string
	// Dir holds data, keys and logs.
	Dir string
	// ServiceAccountKeyFile is the PEM key that signs service-account
	// tokens; a kube-controller-manager needs it to mint them.
	ServiceAccountKeyFile string
	// Port is the apiserver's secure port.
	Port int

	etcd, apiserver *testenv.Process
	apiserverSpec   testenv.ProcessSpec
}

// Options tunes StartWithOptions.
type Options struct {
	// SecurePort fixes the apiserver's port; zero picks a free one.
	SecurePort int
	// AdvertiseAddress, if set, is the address the apiserver publishes as
	// the endpoint of the default/kubernetes Service (with the lease
	// reconciler) and puts in its serving certificate, for clients that
	// reach it from elsewhere than loopback, such as real nodes' pods.
	// The apiserver still listens on loopback; whoever sets this makes the
	// address reach it (itest/realnode forwards it into its fabric).
	AdvertiseAddress net.IP
	// ServiceAccounts keeps the ServiceAccount admission plugin on (pods
	// get their token volume); only for a run that also has a
	// kube-controller-manager creating each namespace's default account.
	ServiceAccounts bool
	// DualStackServices makes the Service ClusterIP ranges ServiceCIDR and
	// ServiceCIDRv6, so a Service may have an address of each family.
	DualStackServices bool
	// ExtraArgs are appended to kube-apiserver's arguments (e.g. an
	// egress selector that lets it reach kubelets in other namespaces).
	ExtraArgs []string
}

// Start builds (or reuses cached) upstream binaries, starts etcd and
// kube-apiserver and waits until the apiserver is ready. Both stop on cleanup.
func Start(t testenv.T) *ControlPlane {
	t.Helper()
	return StartWithOptions(t, Options{})
}

// StartWithOptions is Start with explicit options.
func StartWithOptions(t testenv.T, opts Options) *ControlPlane {
	t.Helper()
	toolsDir, err := testenv.SourceDir("tools")
	if err != nil {
		t.Fatalf("%v", err)
	}
	bin, err := upstream.Ensure(toolsDir, t.Logf)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cp := &ControlPlane{Dir: testenv.Dir(t, "cp")}
	t.Cleanup(cp.Stop)
	// A port freePort found can be taken before etcd or the apiserver
	// binds it: by another package's test running in parallel, or by an
	// outgoing connection's ephemeral port. Such a start is tried again
	// on fresh ports; a port the caller chose is not.
	for attempt := 1; ; attempt++ {
		err := cp.start(bin, opts)
		if err == nil {
			return cp
		}
		if !errors.Is(err, errPortInUse) || opts.SecurePort != 0 || attempt == 3 {
			t.Fatalf("starting control plane: %v", err)
		}
		t.Logf("control plane start %d: %v; trying again on other ports", attempt, err)
		cp.Stop()
		if err := os.RemoveAll(filepath.Join(cp.Dir, "etcd")); err != nil {
			t.Fatalf("%v", err)
		}
	}
}

// errPortInUse: a process of the control plane found its port taken.
var errPortInUse = errors.New("address already in use")

// freePort asks the kernel for an unused loopback port (a variable, so a
// test can hand out a taken one).
var freePort = freeLoopbackPort

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (cp *ControlPlane) start(bin string, opts Options) error {
	var extraIPs []net.IP
	if opts.AdvertiseAddress != nil {
		// The first Service IP is the kubernetes Service's ClusterIP, which
		// in-cluster clients dial.
		extraIPs = append(extraIPs, opts.AdvertiseAddress, net.IPv4(10, 96, 0, 1))
	}
	keys, err := makePKI(cp.Dir, extraIPs)
	if err != nil {
		return err
	}
	cp.CAFile = filepath.Join(cp.Dir, "ca.crt")
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return fmt.Errorf("finding a free loopback port: %w", err)
		}
	}
	if opts.SecurePort != 0 {
		ports[2] = opts.SecurePort
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cp.etcd, err = testenv.StartProcess(testenv.ProcessSpec{
		Name: "etcd", Path: filepath.Join(bin, "etcd"), Dir: cp.Dir,
		Args: []string{"--name=itest", "--data-dir=" + filepath.Join(cp.Dir, "etcd"),
			"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=itest=" + peerURL, "--log-level=warn",
			// Test data is thrown away, so durability is not worth the fsyncs.
			"--unsafe-no-fsync"},
	})
	if err != nil {
		return err
	}
	if err := waitHTTP("etcd /health", cp.etcd, clientURL+"/health", nil, 30*time.Second); err != nil {
		return err
	}

	token, err := randomToken()
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(cp.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+",itest-admin,itest-admin-uid,system:masters\n"), 0o600); err != nil {
		return err
	}
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	cp.Port = ports[2]
	cp.ServiceAccountKeyFile = keys.saKey
	advertise, reconciler := "127.0.0.1", "none"
	if opts.AdvertiseAddress != nil {
		advertise, reconciler = opts.AdvertiseAddress.String(), "lease"
	}
	admission := []string{
		// No controller-manager runs here to create each namespace's
		// "default" ServiceAccount, which that admission plugin insists on.
		"--disable-admission-plugins=ServiceAccount",
	}
	if opts.ServiceAccounts {
		admission = nil
	}
	serviceCIDRs := ServiceCIDR
	if opts.DualStackServices {
		serviceCIDRs += "," + ServiceCIDRv6
	}
	cp.apiserverSpec = testenv.ProcessSpec{
		Name: "kube-apiserver", Path: filepath.Join(bin, "kube-apiserver"), Dir: cp.Dir,
		Args: []string{
			"--etcd-servers=" + clientURL,
			"--bind-address=127.0.0.1", "--advertise-address=" + advertise, fmt.Sprintf("--secure-port=%d", ports[2]),
			"--tls-cert-file=" + keys.servingCert, "--tls-private-key-file=" + keys.servingKey,
			"--token-auth-file=" + tokenFile,
			"--authorization-mode=RBAC",
			"--service-account-issuer=" + ServiceAccountIssuer,
			"--service-account-key-file=" + keys.saPub,
			"--service-account-signing-key-file=" + keys.saKey,
			"--service-cluster-ip-range=" + serviceCIDRs,
			"--endpoint-reconciler-type=" + reconciler,
			"--allow-privileged=true", "--profiling=false", "--v=1",
		},
	}
	cp.apiserverSpec.Args = append(cp.apiserverSpec.Args, admission...)
	cp.apiserverSpec.Args = append(cp.apiserverSpec.Args, opts.ExtraArgs...)
	cp.apiserver, err = testenv.StartProcess(cp.apiserverSpec)
	if err != nil {
		return err
	}
	cp.Config = &rest.Config{
		Host:            cp.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: keys.caPEM},
		QPS:             200, Burst: 400,
	}
	if err := waitHTTP("kube-apiserver /readyz", cp.apiserver, cp.URL+"/readyz", cp.Config, 60*time.Second); err != nil {
		return err
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return err
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	return cp.writeKubeconfig(token, keys.caPEM)
}

func (cp *ControlPlane) writeKubeconfig(token string, ca []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["itest"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["itest"] = &clientcmdapi.Context{Cluster: "itest", AuthInfo: "admin"}
	cfg.CurrentContext = "itest"
	return clientcmd.WriteToFile(*cfg, cp.Kubeconfig)
}

// Stop ends the apiserver and etcd. It is idempotent.
func (cp *ControlPlane) Stop() {
	if cp.apiserver != nil {
		cp.apiserver.Stop(5 * time.Second)
	}
	if cp.etcd != nil {
		cp.etcd.Stop(5 * time.Second)
	}
}

// StopAPIServer stops kube-apiserver alone (etcd keeps the data), as an
// apiserver outage would.
func (cp *ControlPlane) StopAPIServer() { cp.apiserver.Stop(5 * time.Second) }

// StartAPIServer starts kube-apiserver again on the same port, with the
// same keys and data, and waits until it is ready.
func (cp *ControlPlane) StartAPIServer() error {
	p, err := testenv.StartProcess(cp.apiserverSpec)
	if err != nil {
		return err
	}
	cp.apiserver = p
	return waitHTTP("kube-apiserver /readyz", cp.apiserver, cp.URL+"/readyz", cp.Config, 60*time.Second)
}

// StartAPIServerElsewhere starts a second kube-apiserver on the same etcd
// but another loopback port, and returns an admin client configuration for
// it and its stop function. While the usual one is stopped, this lets a
// test change the cluster where no agent (whose kubeconfig names the usual
// port) can see it: the changes an agent misses during an outage.
func (cp *ControlPlane) StartAPIServerElsewhere() (*rest.Config, func(), error) {
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	spec := cp.apiserverSpec
	spec.Name = "kube-apiserver-elsewhere"
	spec.Args = append([]string(nil), spec.Args...)
	for i, a := range spec.Args {
		if strings.HasPrefix(a, "--secure-port=") {
			spec.Args[i] = fmt.Sprintf("--secure-port=%d", port)
		}
	}
	p, err := testenv.StartProcess(spec)
	if err != nil {
		return nil, nil, err
	}
	stop := func() { p.Stop(5 * time.Second) }
	cfg := rest.CopyConfig(cp.Config)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := waitHTTP("second kube-apiserver /readyz", p, cfg.Host+"/readyz", cfg, 60*time.Second); err != nil {
		stop()
		return nil, nil, err
	}
	return cfg, stop, nil
}

// APIServerLog returns the tail of the apiserver log, for failure messages.
func (cp *ControlPlane) APIServerLog(lines int) string { return cp.apiserver.Tail(lines) }

func randomToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// waitHTTP polls url until it answers 200, failing fast if the process died
// and translating "address already in use" into an actionable message.
func waitHTTP(what string, p *testenv.Process, url string, cfg *rest.Config, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	if cfg != nil {
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			return err
		}
		client.Transport = rt
	}
	return testenv.Eventually(what, timeout, 100*time.Millisecond, func() error {
		if p.Exited() {
			tail := p.Tail(30)
			if strings.Contains(tail, "address already in use") {
				return testenv.Permanent(fmt.Errorf("%s could not bind its port (%w): free the port, or run `make clean-itest` to stop leftovers of a crashed run", p.Name, errPortInUse))
			}
			return testenv.Permanent(fmt.Errorf("%s exited; last log lines:\n%s", p.Name, tail))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	})
}
