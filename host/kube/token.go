package kube

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenFile serves the agent's ServiceAccount token from its file. The
// kubelet rewrites a projected token well before it expires; the file is
// read again whenever its modification time or size changes, so plugins
// always get the current one.
type TokenFile struct {
	Path string

	mu     sync.Mutex
	mod    time.Time
	size   int64
	token  string
	expiry time.Time
}

// Token returns the current token and its expiry (zero if the token is not
// a JWT with an exp claim).
func (t *TokenFile) Token() (string, time.Time, error) {
	st, err := os.Stat(t.Path)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("agent token file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && st.ModTime().Equal(t.mod) && st.Size() == t.size {
		return t.token, t.expiry, nil
	}
	b, err := os.ReadFile(t.Path)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("agent token file: %w", err)
	}
	t.token = strings.TrimSpace(string(b))
	t.mod, t.size = st.ModTime(), st.Size()
	t.expiry = Expiry(t.token)
	return t.token, t.expiry, nil
}

// Expiry reads the exp claim of a JWT without verifying it (the host only
// passes the token on; whoever receives it verifies it). Zero if absent.
func Expiry(jwt string) time.Time {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(claims.Exp, 0)
}
