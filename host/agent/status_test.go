package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

func TestSameStatusIgnoresTimes(t *testing.T) {
	mk := func(at time.Time, restarts int32, ready metav1.ConditionStatus) crdv1.NodeAgentStatus {
		return crdv1.NodeAgentStatus{Heartbeat: metav1.NewTime(at), Plugins: []crdv1.NodeAgentPlugin{{Name: "p", Restarts: restarts}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: ready, LastTransitionTime: metav1.NewTime(at)}}}
	}
	t0, t1 := time.Unix(100, 0), time.Unix(200, 0)
	for _, tc := range []struct {
		name string
		a, b crdv1.NodeAgentStatus
		same bool
	}{
		{"only the times differ", mk(t0, 0, "True"), mk(t1, 0, "True"), true},
		{"a restart", mk(t0, 0, "True"), mk(t0, 1, "True"), false},
		{"readiness flipped", mk(t0, 0, "True"), mk(t0, 0, "False"), false},
	} {
		if got := sameStatus(tc.a, tc.b); got != tc.same {
			t.Errorf("%s: sameStatus = %v, want %v", tc.name, got, tc.same)
		}
	}
}

func TestNotReadyReason(t *testing.T) {
	for line, want := range map[string]string{
		"OVS: the OpenFlow connection to the bridge is down (is ovs-vswitchd running?)": "OVSDisconnected",
		`plugin "podnet" is starting`: "PluginNotSynced",
		"something new":               "NotReady",
	} {
		if got := notReadyReason(line); got != want {
			t.Errorf("notReadyReason(%q) = %q, want %q", line, got, want)
		}
	}
}
