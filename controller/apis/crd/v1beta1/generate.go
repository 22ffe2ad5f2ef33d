package v1beta1

// Regenerate deepcopy functions and the CRD manifests with the controller-gen
// pinned in controller/tools (run from the repository root:
// go generate ./controller/apis/...).
//go:generate go run -modfile=../../../tools/go.mod sigs.k8s.io/controller-tools/cmd/controller-gen object paths=. crd:crdVersions=v1 output:crd:artifacts:config=../../../../manifests/crds
