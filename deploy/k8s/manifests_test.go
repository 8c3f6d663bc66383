package k8s

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizations are every kustomization here: each must render and pass.
var kustomizations = []string{"base", "overlays/dev", "overlays/sentinel", "overlays/cluster"}

// decoder decodes the API groups the manifests use, strictly: an unknown
// or duplicated field, or a value of the wrong type, is an error.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// render builds the kustomization in dir and decodes every object it makes.
func render(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []runtime.Object
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %s as YAML: %v", dir, r.CurId(), err)
		}
		obj, _, err := decoder.Decode(y, nil, nil)
		if err != nil {
			t.Errorf("%s: %s does not decode strictly: %v", dir, r.CurId(), err)
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

// find returns the object of type T called name.
func find[T runtime.Object](objs []runtime.Object, name string) (T, bool) {
	for _, o := range objs {
		if v, ok := o.(T); ok {
			if m, ok := any(v).(interface{ GetName() string }); ok && m.GetName() == name {
				return v, true
			}
		}
	}
	var zero T
	return zero, false
}

// contract is every environment variable the service reads, from its
// config struct's tags.
func contract(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("../../cmd/inventory/config.go")
	if err != nil {
		t.Fatalf("read the service's config: %v", err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`env:"(INVENTORY_[A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	// The lock backends' settings, read through their descriptors
	// (backend.Descriptor.Setting, a const Setting of each backend).
	descriptors, _ := filepath.Glob("../../internal/lock/*/descriptor.go")
	for _, d := range descriptors {
		src, err := os.ReadFile(d)
		if err != nil {
			t.Fatalf("read a lock backend's descriptor: %v", err)
		}
		for _, m := range regexp.MustCompile(`Setting = "(INVENTORY_[A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d INVENTORY_ settings in cmd/inventory/config.go, want the whole contract", len(names))
	}
	return names
}

func TestManifests(t *testing.T) {
	settings := contract(t)
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			d, ok := find[*appsv1.Deployment](objs, "inventory")
			if !ok {
				t.Fatalf("%s: no Deployment inventory", dir)
			}
			checkDeployment(t, dir, d, objs, settings)
			checkService(t, dir, d, objs)
			if pdb, ok := find[*policyv1.PodDisruptionBudget](objs, "inventory"); !ok {
				t.Errorf("%s: no PodDisruptionBudget inventory", dir)
			} else if !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || pdb.Spec.MinAvailable == nil {
				t.Errorf("%s: PodDisruptionBudget selects %v with minAvailable %v; want the service's pods %v kept", dir, pdb.Spec.Selector.MatchLabels, pdb.Spec.MinAvailable, d.Spec.Template.Labels)
			}
			if hpa, ok := find[*autoscalingv2.HorizontalPodAutoscaler](objs, "inventory"); !ok {
				t.Errorf("%s: no HorizontalPodAutoscaler inventory", dir)
			} else if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
				t.Errorf("%s: HorizontalPodAutoscaler scales %s/%s from %v; want Deployment %s from 2 or more", dir, ref.Kind, ref.Name, hpa.Spec.MinReplicas, d.Name)
			}
			checkIngress(t, dir, objs)
			if dir == "overlays/dev" {
				checkRefsResolve(t, dir, d, objs)
			}
		})
	}
}

func checkDeployment(t *testing.T, dir string, d *appsv1.Deployment, objs []runtime.Object, settings []string) {
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("%s: Deployment replicas %v, want 2 or more", dir, d.Spec.Replicas)
	}
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("%s: Deployment selector %v does not select its pods %v", dir, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want the service alone", dir, len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]
	port := -1
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = int(p.ContainerPort)
		}
	}
	cm, ok := find[*corev1.ConfigMap](objs, configMapName(c))
	if !ok {
		t.Fatalf("%s: the container takes its settings from ConfigMap %q, which is not rendered", dir, configMapName(c))
	}
	if want := listenPort(cm.Data["INVENTORY_ADDR"]); port != want {
		t.Errorf("%s: container port http = %d, INVENTORY_ADDR %q listens on %d", dir, port, cm.Data["INVENTORY_ADDR"], want)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s: %s probe %+v, want GET %s on port http", dir, p.name, p.probe, p.path)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources %+v, want CPU and memory requests and a memory limit", dir, c.Resources)
	}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	for k := range cm.Data {
		names = append(names, k)
	}
	for _, n := range names {
		if !slices.Contains(settings, n) {
			t.Errorf("%s: the container sets %s, which the service does not read (cmd/inventory/config.go)", dir, n)
		}
	}
	for _, must := range []string{"INVENTORY_POSTGRES_URL", "INVENTORY_ADMIN_TOKEN", "INVENTORY_INSTANCE"} {
		if !slices.Contains(names, must) {
			t.Errorf("%s: the container does not set %s", dir, must)
		}
	}
	for _, e := range c.Env {
		if e.Name == "INVENTORY_ADMIN_TOKEN" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s: INVENTORY_ADMIN_TOKEN comes from %+v, want a Secret", dir, e)
		}
	}
}

func checkService(t *testing.T, dir string, d *appsv1.Deployment, objs []runtime.Object) {
	s, ok := find[*corev1.Service](objs, "inventory")
	if !ok {
		t.Errorf("%s: no Service inventory", dir)
		return
	}
	if !selects(s.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("%s: Service selects %v, not the service's pods %v", dir, s.Spec.Selector, d.Spec.Template.Labels)
	}
	for _, p := range s.Spec.Ports {
		if p.TargetPort != intstr.FromString("http") {
			t.Errorf("%s: Service port %s targets %v, want the container's port http", dir, p.Name, p.TargetPort)
		}
	}
}

func checkIngress(t *testing.T, dir string, objs []runtime.Object) {
	byProduct, ok := find[*networkingv1.Ingress](objs, "inventory-by-product")
	if !ok {
		t.Errorf("%s: no Ingress inventory-by-product", dir)
		return
	}
	if byProduct.Annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == "" {
		t.Errorf("%s: Ingress inventory-by-product has no upstream-hash-by: sales of one product would not go to one replica", dir)
	}
	var paths []string
	for _, r := range byProduct.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			paths = append(paths, p.Path)
			if b := p.Backend.Service; b == nil || b.Name != "inventory" || b.Port.Name != "http" {
				t.Errorf("%s: Ingress path %s goes to %+v, want Service inventory port http", dir, p.Path, p.Backend)
			}
		}
	}
	if !slices.Contains(paths, "/products") {
		t.Errorf("%s: Ingress inventory-by-product routes %v, want /products (POST /products/{id}/sale)", dir, paths)
	}
}

// checkRefsResolve: every ConfigMap and Secret the pods name is rendered
// (generated names included), so the overlay runs as it is.
func checkRefsResolve(t *testing.T, dir string, d *appsv1.Deployment, objs []runtime.Object) {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.SecretKeyRef
			s, ok := find[*corev1.Secret](objs, ref.Name)
			_, inData := s.Data[ref.Key]
			_, inString := s.StringData[ref.Key]
			if !ok || !(inData || inString) {
				t.Errorf("%s: %s comes from Secret %s key %s, which is not rendered", dir, e.Name, ref.Name, ref.Key)
			}
		}
	}
}

func configMapName(c corev1.Container) string {
	for _, f := range c.EnvFrom {
		if f.ConfigMapRef != nil {
			return f.ConfigMapRef.Name
		}
	}
	return ""
}

func listenPort(addr string) int {
	var port int
	if _, err := fmt.Sscanf(addr[strings.LastIndex(addr, ":")+1:], "%d", &port); err != nil {
		return -1
	}
	return port
}

// selects reports whether selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestDecodingIsStrict: a mistyped field fails, so the checks above mean
// something.
func TestDecodingIsStrict(t *testing.T) {
	for _, y := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: \"eighty\"}]}\n",
		"apiVersion: v1\nkind: Widget\nmetadata: {name: x}\n",
	} {
		if _, _, err := decoder.Decode([]byte(y), nil, nil); err == nil {
			t.Errorf("Decode(%q) = nil, want an error", y)
		}
	}
}
