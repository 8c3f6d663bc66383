// Package k8s holds the Kubernetes manifests' offline checks: its tests
// render every kustomization here and decode each object strictly against
// the Kubernetes API types. It is a module of its own so that the service's
// build never compiles the Kubernetes libraries.
package k8s
