package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrNoNode: the apiserver has no Node of the agent's node name.
var ErrNoNode = errors.New("no Node object")

// nodeVerbs are what the node informer needs.
var nodeVerbs = []string{"get", "list", "watch"}

// Preflight checks, in order, that the apiserver answers with these
// credentials, that they may get, list and watch nodes, and that the
// agent's own Node exists. Each failure is one sentence that names the
// cause and the fix; a missing Node wraps ErrNoNode.
func Preflight(ctx context.Context, c kubernetes.Interface, server, nodeName string) (*corev1.Node, error) {
	if _, err := c.Discovery().ServerVersion(); err != nil {
		return nil, errors.New(Explain(server, err))
	}
	var missing []string
	for _, verb := range nodeVerbs {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Resource: "nodes"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, errors.New(Explain(server, err))
		}
		if !r.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("RBAC: %s may not %s resource nodes (API group \"\"); grant the verbs %s on nodes to the agent's ServiceAccount (ClusterRole switchyard-agent in manifests/rbac.yaml)",
			whoAmI(ctx, c), strings.Join(missing, ", "), strings.Join(missing, ", "))
	}
	n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: the apiserver has no Node %q; the agent's node name (nodeName, SWITCHYARD_NODENAME or NODE_NAME) must be the name the kubelet registered (kubectl get nodes); waiting for it to appear", ErrNoNode, nodeName)
	}
	if err != nil {
		return nil, errors.New(Explain(server, err))
	}
	return n, nil
}

// whoAmI names the user the apiserver sees, for RBAC messages.
func whoAmI(ctx context.Context, c kubernetes.Interface) string {
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username == "" {
		return "the agent's credentials"
	}
	return fmt.Sprintf("user %q", r.Status.UserInfo.Username)
}
