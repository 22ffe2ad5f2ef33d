package app

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/controller/distribute"
)

// ControllerInfoName is the name of the controller's ControllerInfo.
const ControllerInfoName = "switchyard-controller"

// The controller looks every infoCheck and writes its ControllerInfo when
// the nodes or their streams changed, else every infoHeartbeat (with the
// lags of the moment): a few writes a minute at most.
const (
	infoCheck     = 10 * time.Second
	infoHeartbeat = 30 * time.Second
)

// controllerInfo is the status the hub shows now.
func controllerInfo(streams []distribute.NodeStream) crdv1.ControllerInfoStatus {
	var st crdv1.ControllerInfoStatus
	for _, s := range streams {
		st.Nodes = append(st.Nodes, crdv1.ControllerNode{Name: s.Node, Streams: int32(s.Streams), Lag: int64(s.Lag)})
		if s.Streams > 0 {
			st.ConnectedNodes++
		}
	}
	slices.SortFunc(st.Nodes, func(a, b crdv1.ControllerNode) int { return strings.Compare(a.Name, b.Name) })
	return st
}

// sameNodes compares two statuses by their nodes and streams only (lags
// move all the time; the heartbeat carries them).
func sameNodes(a, b crdv1.ControllerInfoStatus) bool {
	strip := func(s crdv1.ControllerInfoStatus) []crdv1.ControllerNode {
		out := slices.Clone(s.Nodes)
		for i := range out {
			out[i].Lag = 0
		}
		return out
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// runInfo keeps the ControllerInfo until ctx ends.
func runInfo(ctx context.Context, res dynamic.NamespaceableResourceInterface, streams func() []distribute.NodeStream, log *slog.Logger) {
	t := time.NewTicker(infoCheck)
	defer t.Stop()
	var last *crdv1.ControllerInfoStatus
	var lastWrite time.Time
	lastErr := ""
	for {
		st := controllerInfo(streams())
		if last == nil || !sameNodes(*last, st) || time.Since(lastWrite) >= infoHeartbeat {
			if err := writeInfo(ctx, res, st); err != nil {
				if err.Error() != lastErr {
					log.Warn("writing ControllerInfo (is its CRD installed and the controller's RBAC current?)", "error", err)
				}
				lastErr = err.Error()
			} else {
				last, lastWrite, lastErr = &st, time.Now(), ""
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func writeInfo(ctx context.Context, res dynamic.NamespaceableResourceInterface, st crdv1.ControllerInfoStatus) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	obj, err := res.Get(ctx, ControllerInfoName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ci := &crdv1.ControllerInfo{TypeMeta: metav1.TypeMeta{APIVersion: crdv1.SchemeGroupVersion.String(), Kind: "ControllerInfo"},
			ObjectMeta: metav1.ObjectMeta{Name: ControllerInfoName}}
		m, cerr := runtime.DefaultUnstructuredConverter.ToUnstructured(ci)
		if cerr != nil {
			return cerr
		}
		obj, err = res.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	var cur crdv1.ControllerInfo
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cur); err != nil {
		return err
	}
	st.Heartbeat = metav1.Now()
	cur.Status = st
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cur)
	if err != nil {
		return err
	}
	_, err = res.UpdateStatus(ctx, &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{})
	return err
}
