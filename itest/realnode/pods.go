package realnode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/testenv"
)

// AgnhostPod is a pod running agnhost with args on the named node (through
// the scheduler, by its hostname label), never pulling: the image is
// imported on every node.
func AgnhostPod(name, node string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	var zero int64
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "agnhost"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "agnhost", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: args,
			}},
		},
	}
}

// CreatePod creates pod in namespace ns and removes it on cleanup.
func (c *Cluster) CreatePod(t testenv.T, ns string, pod *corev1.Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CP.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, pod.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.CP.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	})
}

// WaitPod polls the pod until cond accepts it; the error carries the last
// state and the pod's events, which say why it is stuck.
func (c *Cluster) WaitPod(ns, name string, cond func(*corev1.Pod) error, timeout time.Duration) (*corev1.Pod, error) {
	var got *corev1.Pod
	err := testenv.Eventually("pod "+ns+"/"+name, timeout, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p, err := c.CP.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got = p
		return cond(p)
	})
	if err != nil {
		return got, fmt.Errorf("%w; events: %s", err, c.Events(ns, name))
	}
	return got, nil
}

// Running is a WaitPod condition: Running with an IP.
func Running(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return fmt.Errorf("phase %s, IP %q, %s", p.Status.Phase, p.Status.PodIP, containerStates(p))
	}
	return nil
}

// Finished is a WaitPod condition: Succeeded, or Failed as a permanent
// error.
func Finished(p *corev1.Pod) error {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return nil
	case corev1.PodFailed:
		return testenv.Permanent(fmt.Errorf("pod %s failed: %s", p.Name, containerStates(p)))
	}
	return fmt.Errorf("phase %s, %s", p.Status.Phase, containerStates(p))
}

func containerStates(p *corev1.Pod) string {
	s := ""
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			s += fmt.Sprintf("%s waiting (%s: %s) ", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			s += fmt.Sprintf("%s terminated (exit %d, %s: %s) ", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason, cs.State.Terminated.Message)
		case cs.State.Running != nil:
			s += cs.Name + " running "
		}
	}
	return s
}

// WaitPodGone waits until the pod object no longer exists.
func (c *Cluster) WaitPodGone(ns, name string, timeout time.Duration) error {
	return testenv.Eventually("pod "+ns+"/"+name+" deleted", timeout, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.CP.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}

// Events lists the events about an object, oldest first, one a line.
func (c *Cluster) Events(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	evs, err := c.CP.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	s := ""
	for _, e := range evs.Items {
		s += fmt.Sprintf("\n  %s %s: %s", e.Type, e.Reason, e.Message)
	}
	return s
}
