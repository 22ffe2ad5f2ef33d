package nodeagent

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests"
)

// AgentServiceAccount is the agent DaemonSet's ServiceAccount (manifests).
const AgentServiceAccount = "switchyard-agent"

// agentNamespace is where the agent's pods and ServiceAccount live.
const agentNamespace = "kube-system"

// inNodeAPIServer is where the apiserver is reachable inside a node's
// namespace (forwarded to the root namespace's loopback).
const inNodeAPIServer = "127.0.0.1:6443"

// inNodeController is where switchyard-controller is reachable inside a
// node's namespace.
const inNodeController = "127.0.0.1:10349"

// identity is what an agent pod holds: a kubeconfig naming the apiserver
// as seen from the node, and its pod-bound ServiceAccount token.
type identity struct {
	kubeconfig, tokenFile string
}

// grantAgentRBAC applies the agent's ServiceAccount, ClusterRole and
// ClusterRoleBinding from manifests/rbac.yaml, so the tests run with
// exactly the permissions that ship.
func grantAgentRBAC(t testenv.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := fs.ReadFile(manifests.Files, "rbac.yaml")
	if err != nil {
		t.Fatalf("%v", err)
	}
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := dec.Read()
		if err != nil {
			break
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("manifests/rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			if o.Name == AgentServiceAccount {
				_, err = cp.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			}
		case *rbacv1.ClusterRole:
			if o.Name == AgentServiceAccount {
				_, err = cp.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			}
		case *rbacv1.ClusterRoleBinding:
			if o.Name == AgentServiceAccount {
				_, err = cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("applying the agent's RBAC from manifests/rbac.yaml: %v", err)
		}
	}
}

// makeIdentity creates the node's agent Pod object (hostNetwork, on that
// node, as the DaemonSet's would be) and a ServiceAccount token bound to it
// (TokenRequest, the node name is in its claims), and writes the kubeconfig
// the agent uses: the apiserver as forwarded into the node, its CA, and
// the token file.
func makeIdentity(t testenv.T, cp *controlplane.ControlPlane, n *cluster.Node, dir, sa string) identity {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if sa != AgentServiceAccount {
		_, err := cp.Client.CoreV1().ServiceAccounts(agentNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating ServiceAccount %s: %v", sa, err)
		}
	}
	podName := "switchyard-agent-" + n.Name
	pod, err := cp.Client.CoreV1().Pods(agentNamespace).Get(ctx, podName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pod, err = cp.Client.CoreV1().Pods(agentNamespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: map[string]string{"app": "switchyard", "component": "agent"}},
			Spec: corev1.PodSpec{NodeName: n.Name, ServiceAccountName: sa, HostNetwork: true,
				Containers: []corev1.Container{{Name: "agent", Image: "switchyard/switchyard"}}},
		}, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() {
				_ = cp.Client.CoreV1().Pods(agentNamespace).Delete(context.Background(), podName, metav1.DeleteOptions{})
			})
		}
	}
	if err != nil {
		t.Fatalf("creating the agent pod of %s: %v", n.Name, err)
	}
	tr, err := cp.Client.CoreV1().ServiceAccounts(agentNamespace).CreateToken(ctx, sa, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting the agent token of %s: %v", n.Name, err)
	}
	id := identity{tokenFile: filepath.Join(dir, "token"), kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := os.WriteFile(id.tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	u, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatalf("%v", err)
	}
	forwarded(t, n, inNodeAPIServer, u.Host)
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatalf("%v", err)
	}
	writeKubeconfig(t, id.kubeconfig, "https://"+inNodeAPIServer, ca, id.tokenFile)
	return id
}

// forwarded makes target (the apiserver, the controller) reachable in the
// node at listen, once per node.
func forwarded(t testenv.T, n *cluster.Node, listen, target string) {
	t.Helper()
	key := n.NetNS + "|" + listen + "|" + target
	fwdMu.Lock()
	defer fwdMu.Unlock()
	if fwd[key] {
		return
	}
	cluster.Forward(t, n.NetNS, listen, target)
	fwd[key] = true
	t.Cleanup(func() {
		fwdMu.Lock()
		delete(fwd, key)
		fwdMu.Unlock()
	})
}

func writeKubeconfig(t testenv.T, path, server string, ca []byte, tokenFile string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["agent"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "agent"}
	cfg.CurrentContext = "agent"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
}

// fwd records the nodes the apiserver is forwarded into already.
var (
	fwdMu sync.Mutex
	fwd   = map[string]bool{}
)
