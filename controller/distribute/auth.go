package distribute

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeNameExtra is the user-info extra key under which the apiserver puts the
// node of the pod a ServiceAccount token is bound to.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// Errors of authentication and authorization; the server maps them to
// Unauthenticated and PermissionDenied.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Identity is an authenticated caller.
type Identity struct {
	User string
	Node string
}

// Authenticator validates a bearer token.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Identity, error)
}

// TokenReviewAuthenticator validates tokens with the apiserver's TokenReview
// API. Only ServiceAccounts listed in AllowedServiceAccounts
// ("namespace/name"; empty allows every ServiceAccount) are accepted, and
// only with a pod-bound token that names a node. Results are cached for
// CacheTTL so a busy node does not cost one review per RPC.
type TokenReviewAuthenticator struct {
	Client                 kubernetes.Interface
	Audiences              []string
	AllowedServiceAccounts []string
	CacheTTL               time.Duration
	// Failed, if set, is told of every token review that did not let the
	// node in (cache hits excluded), with the reason: unauthenticated,
	// forbidden or error (the apiserver did not answer).
	Failed func(reason string)

	mu    sync.Mutex
	cache map[[32]byte]cached
}

type cached struct {
	id      Identity
	err     error
	expires time.Time
}

var _ Authenticator = (*TokenReviewAuthenticator)(nil)

// Authenticate implements Authenticator.
func (a *TokenReviewAuthenticator) Authenticate(ctx context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{}, fmt.Errorf("%w: no bearer token; send a ServiceAccount token in the authorization header", ErrUnauthenticated)
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	a.mu.Lock()
	if c, ok := a.cache[key]; ok && now.Before(c.expires) {
		a.mu.Unlock()
		return c.id, c.err
	}
	a.mu.Unlock()
	id, err := a.review(ctx, token)
	if err != nil && a.Failed != nil {
		switch {
		case errors.Is(err, ErrUnauthenticated):
			a.Failed("unauthenticated")
		case errors.Is(err, ErrForbidden):
			a.Failed("forbidden")
		default:
			a.Failed("error")
		}
	}
	if err != nil && !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, ErrForbidden) {
		return id, err // apiserver trouble: do not cache
	}
	ttl := a.CacheTTL
	if ttl == 0 {
		ttl = 30 * time.Second
	}
	a.mu.Lock()
	if a.cache == nil {
		a.cache = map[[32]byte]cached{}
	}
	for k, c := range a.cache {
		if now.After(c.expires) {
			delete(a.cache, k)
		}
	}
	a.cache[key] = cached{id, err, now.Add(ttl)}
	a.mu.Unlock()
	return id, err
}

func (a *TokenReviewAuthenticator) review(ctx context.Context, token string) (Identity, error) {
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: token, Audiences: a.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		msg := tr.Status.Error
		if msg == "" {
			msg = "token not accepted"
		}
		return Identity{}, fmt.Errorf("%w: %s", ErrUnauthenticated, msg)
	}
	user := tr.Status.User.Username
	sa, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return Identity{}, fmt.Errorf("%w: %q is not a ServiceAccount; nodes must use their agent's ServiceAccount token", ErrForbidden, user)
	}
	sa = strings.Replace(sa, ":", "/", 1)
	if len(a.AllowedServiceAccounts) > 0 && !slices.Contains(a.AllowedServiceAccounts, sa) {
		return Identity{}, fmt.Errorf("%w: ServiceAccount %s may not watch policies (allowed: %s)", ErrForbidden, sa, strings.Join(a.AllowedServiceAccounts, ", "))
	}
	nodes := tr.Status.User.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return Identity{}, fmt.Errorf("%w: token of %s is not bound to a pod on a node; request it with a boundObjectRef to the agent pod", ErrForbidden, sa)
	}
	return Identity{User: user, Node: nodes[0]}, nil
}
