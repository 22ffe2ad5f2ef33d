package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/testenv"
)

// AgnhostDeployment is a Deployment of agnhost pods running args, spread
// over the nodes (one per node first, by a preferred anti-affinity on the
// hostname; more replicas than nodes then share).
func AgnhostDeployment(name string, replicas int32, args ...string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	var zero int64
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &zero,
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name: "agnhost", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: args,
					}},
				},
			},
		},
	}
}

// RunningPods lists the pods matching selector in ns that are Running with
// an IP, and how many match at all.
func (c *Cluster) RunningPods(ns, selector string) (running []corev1.Pod, total int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pods, err := c.CP.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, 0, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && Running(&p) == nil {
			running = append(running, p)
		}
	}
	return running, len(pods.Items), nil
}

// DeploymentStartup creates d in ns and returns how long it took until all
// its replicas were Running with an IP. The Deployment is deleted, and its
// pods awaited gone (their CNI DEL done), before it returns.
func (c *Cluster) DeploymentStartup(t testenv.T, ns string, d *appsv1.Deployment, timeout time.Duration) time.Duration {
	t.Helper()
	selector := "app=" + d.Spec.Template.Labels["app"]
	start := time.Now()
	if _, err := c.CP.Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Deployment %s: %v", d.Name, err)
	}
	want := int(*d.Spec.Replicas)
	err := testenv.Eventually(fmt.Sprintf("%d pods of %s Running with an IP", want, d.Name), timeout, 50*time.Millisecond, func() error {
		running, total, err := c.RunningPods(ns, selector)
		if err != nil {
			return err
		}
		if len(running) < want {
			return fmt.Errorf("%d of %d Running (%d pods)", len(running), want, total)
		}
		return nil
	})
	took := time.Since(start)
	c.DeleteDeployment(t, ns, d.Name, selector)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return took
}

// DeleteDeployment deletes a Deployment and waits until its pods are gone
// and their sandboxes' networks torn down: a pod object disappears when
// its containers have stopped, while the kubelet stops the sandbox (CNI
// DEL) afterwards, on its own schedule.
func (c *Cluster) DeleteDeployment(t testenv.T, ns, name, selector string) {
	t.Helper()
	fg := metav1.DeletePropagationForeground
	_ = c.CP.Client.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &fg})
	err := testenv.Eventually("pods of "+name+" gone", 120*time.Second, 200*time.Millisecond, func() error {
		_, total, err := c.RunningPods(ns, selector)
		if err != nil {
			return err
		}
		if total > 0 {
			return fmt.Errorf("%d pods left", total)
		}
		return c.SandboxesSettled()
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// SandboxesSettled reports an error while any node holds more pod network
// namespaces (containerd's, in the node's /run/netns) than pods with their
// own network exist on it: some CNI DEL is still to come.
func (c *Cluster) SandboxesSettled() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pods, err := c.CP.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	live := map[string]int{}
	for _, p := range pods.Items {
		if !p.Spec.HostNetwork && p.Spec.NodeName != "" {
			live[p.Spec.NodeName]++
		}
	}
	for _, n := range c.Nodes {
		ents, err := os.ReadDir(n.Private("/run/netns"))
		if err != nil {
			return err
		}
		if len(ents) > live[n.Name] {
			return fmt.Errorf("%s holds %d pod network namespaces for %d pods", n.Name, len(ents), live[n.Name])
		}
	}
	return nil
}

// WaitSystemReady waits until every pod of namespace ns is Running and
// Ready and every node holds a CNI configuration: after an install, the
// node's Ready condition alone can still be the previous CNI's.
func (c *Cluster) WaitSystemReady(ns string, timeout time.Duration) error {
	return testenv.Eventually("pods of "+ns+" Ready and a CNI config on every node", timeout, 250*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pods, err := c.CP.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no pods yet")
		}
		for _, p := range pods.Items {
			ready := false
			for _, cond := range p.Status.Conditions {
				ready = ready || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
			}
			if !ready {
				return fmt.Errorf("pod %s not Ready (%s %s)", p.Name, p.Status.Phase, containerStates(&p))
			}
		}
		for _, n := range c.Nodes {
			confs, _ := filepath.Glob(filepath.Join(n.Private("/etc/cni/net.d"), "*.conflist"))
			if len(confs) == 0 {
				return fmt.Errorf("%s has no CNI config", n.Name)
			}
		}
		return nil
	})
}
