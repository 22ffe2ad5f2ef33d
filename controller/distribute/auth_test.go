package distribute

import (
	"context"
	"errors"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The fake clientset stands in for the apiserver at the TokenReview seam; the
// real one is exercised in itest/controller.
func reviewer(results map[string]authv1.TokenReviewStatus, calls *int) *TokenReviewAuthenticator {
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		tr := a.(k8stesting.CreateAction).GetObject().(*authv1.TokenReview)
		st, ok := results[tr.Spec.Token]
		if !ok {
			return true, nil, errors.New("apiserver unavailable")
		}
		return true, &authv1.TokenReview{Status: st}, nil
	})
	return &TokenReviewAuthenticator{Client: client, AllowedServiceAccounts: []string{"kube-system/agent"}}
}

func TestTokenReviewAuthenticator(t *testing.T) {
	sa := func(user string, node ...string) authv1.TokenReviewStatus {
		st := authv1.TokenReviewStatus{Authenticated: true, User: authv1.UserInfo{Username: user}}
		if len(node) > 0 {
			st.User.Extra = map[string]authv1.ExtraValue{NodeNameExtra: node}
		}
		return st
	}
	results := map[string]authv1.TokenReviewStatus{
		"good":     sa("system:serviceaccount:kube-system:agent", "n1"),
		"unbound":  sa("system:serviceaccount:kube-system:agent"),
		"other-sa": sa("system:serviceaccount:default:app", "n1"),
		"human":    sa("alice", "n1"),
		"rejected": {Authenticated: false, Error: "token expired"},
	}
	tests := []struct {
		token    string
		wantNode string
		wantErr  error
	}{
		{"good", "n1", nil},
		{"", "", ErrUnauthenticated},
		{"rejected", "", ErrUnauthenticated},
		{"unbound", "", ErrForbidden},
		{"other-sa", "", ErrForbidden},
		{"human", "", ErrForbidden},
	}
	calls := 0
	a := reviewer(results, &calls)
	for _, tc := range tests {
		t.Run(tc.token, func(t *testing.T) {
			id, err := a.Authenticate(context.Background(), tc.token)
			if !errors.Is(err, tc.wantErr) || id.Node != tc.wantNode {
				t.Fatalf("got %+v, %v; want node %q, %v", id, err, tc.wantNode, tc.wantErr)
			}
		})
	}
	before := calls
	if _, err := a.Authenticate(context.Background(), "good"); err != nil || calls != before {
		t.Errorf("second review of a cached token: err %v, %d apiserver calls", err, calls-before)
	}
	if _, err := a.Authenticate(context.Background(), "unknown"); err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Errorf("apiserver failure should be reported as such, got %v", err)
	}
}
